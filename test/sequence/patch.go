package sequence

import (
	"encoding/json"
	"fmt"
	"reflect"
)

// Writes are recorded as JSON merge patches (RFC 7386) from the old object to the new one: every
// verb and patch type a client may use ends up as such an old -> new pair, the patch shows exactly
// the fields a write changes, and it still applies when a shrunk sequence has dropped an earlier
// step that touched other fields of the same object.

// toMap turns an API object into its JSON map.
func toMap(obj any) (map[string]any, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encoding %T: %w", obj, err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("decoding %T as a map: %w", obj, err)
	}
	return m, nil
}

// fromMap decodes a JSON map into the API object out points at.
func fromMap(m map[string]any, out any) error {
	data, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("encoding a map: %w", err)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("decoding %T: %w", out, err)
	}
	return nil
}

// MergePatch returns the merge patch that turns old into cur, or nil when they are equal.
func MergePatch(old, cur any) (json.RawMessage, error) {
	a, err := toMap(old)
	if err != nil {
		return nil, err
	}
	b, err := toMap(cur)
	if err != nil {
		return nil, err
	}
	d := diffMaps(a, b)
	if len(d) == 0 {
		return nil, nil
	}
	data, err := json.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("encoding a merge patch: %w", err)
	}
	return data, nil
}

func diffMaps(a, b map[string]any) map[string]any {
	out := map[string]any{}
	for k, bv := range b {
		av, ok := a[k]
		if ok && reflect.DeepEqual(av, bv) {
			continue
		}
		am, aIsMap := av.(map[string]any)
		bm, bIsMap := bv.(map[string]any)
		if ok && aIsMap && bIsMap {
			out[k] = diffMaps(am, bm)
			continue
		}
		out[k] = bv
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			out[k] = nil
		}
	}
	return out
}

// applyPatch applies a merge patch to an object and decodes the result into out.
func applyPatch(obj any, patch json.RawMessage, out any) error {
	doc, err := toMap(obj)
	if err != nil {
		return err
	}
	var p map[string]any
	if err := json.Unmarshal(patch, &p); err != nil {
		return fmt.Errorf("decoding merge patch %s: %w", patch, err)
	}
	return fromMap(mergeInto(doc, p), out)
}

// mergeInto applies patch p to doc as RFC 7386 says: null deletes, objects merge, anything else
// replaces.
func mergeInto(doc, p map[string]any) map[string]any {
	if doc == nil {
		doc = map[string]any{}
	}
	for k, pv := range p {
		if pv == nil {
			delete(doc, k)
			continue
		}
		pm, isMap := pv.(map[string]any)
		if !isMap {
			doc[k] = pv
			continue
		}
		dm, _ := doc[k].(map[string]any)
		doc[k] = mergeInto(dm, pm)
	}
	return doc
}

// prune drops nulls and empty objects and lists from a JSON value, for the objects of a case
// file (a decoded object marshals creationTimestamp: null, status: {} and the like).
func prune(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, x := range t {
			x = prune(x)
			if x == nil {
				continue
			}
			if m, ok := x.(map[string]any); ok && len(m) == 0 {
				continue
			}
			if l, ok := x.([]any); ok && len(l) == 0 {
				continue
			}
			out[k] = x
		}
		return out
	case []any:
		out := make([]any, 0, len(t))
		for _, x := range t {
			out = append(out, prune(x))
		}
		return out
	}
	return v
}
