package manifests

import (
	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	corev1 "k8s.io/api/core/v1"
)

// An inventory repeats itself: thousands of claims request the same few sizes, carry the same
// bind annotations and access modes, and local volumes on one node share its node affinity.
// Decoded one by one, each repeat is its own map or slice, and Go's smallest map holds eight
// entries: the labels, annotations and capacities of 100k objects were three fifths of the
// audit's heap, and making and clearing that memory a third of its time. sharedValues decodes a
// value that it has already seen, byte for byte, in the same place of an earlier object as that
// object's value, so every repeat shares one copy.
//
// Sharing is safe because nothing that reads a loaded state writes to it: the audit hands the
// objects only to policy, whose entry points are fuzzed for leaving their inputs unchanged.

// sharedBudget bounds the bytes of values each table remembers: past it the table starts over,
// so that an inventory of unique values neither grows it without end nor keeps it full of values
// that never repeat. A repeat forgotten this way is decoded once more and remembered again.
const sharedBudget = 256 << 10

// sharedMaxLen is the longest value shared; longer ones are rarely repeated.
const sharedMaxLen = 1 << 10

// sharedValues holds one decoder's tables (a decoder is used by one goroutine at a time).
type sharedValues struct {
	strings     map[string]map[string]string
	resources   map[string]corev1.ResourceList
	modes       map[string][]corev1.PersistentVolumeAccessMode
	lists       map[string][]string
	affinities  map[string]*corev1.VolumeNodeAffinity
	unmarshaler json.Options
}

func newSharedValues() *sharedValues {
	s := &sharedValues{
		strings:    make(map[string]map[string]string),
		resources:  make(map[string]corev1.ResourceList),
		modes:      make(map[string][]corev1.PersistentVolumeAccessMode),
		lists:      make(map[string][]string),
		affinities: make(map[string]*corev1.VolumeNodeAffinity),
	}
	s.unmarshaler = json.WithUnmarshalers(json.JoinUnmarshalers(
		json.UnmarshalFromFunc(sharedFrom(s.strings)),
		json.UnmarshalFromFunc(sharedFrom(s.resources)),
		json.UnmarshalFromFunc(sharedFrom(s.modes)),
		json.UnmarshalFromFunc(sharedFrom(s.lists)),
		json.UnmarshalFromFunc(sharedFrom(s.affinities)),
	))
	return s
}

// sharedFrom decodes a value of type T through table: the copy decoded earlier from the same
// bytes, or a new one (decoded as without the table) that later repeats will share.
//
// An error is placed in the value, not the object: decoder.object decodes the object again
// without sharing to name the field.
func sharedFrom[T any](table map[string]T) func(*jsontext.Decoder, *T) error {
	used := 0
	return func(dec *jsontext.Decoder, v *T) error {
		raw, err := dec.ReadValue() // checked as the whole object is: syntax, UTF-8, duplicate names
		if err != nil {
			return err
		}
		if seen, ok := table[string(raw)]; ok {
			*v = seen
			return nil
		}
		var fresh T
		if err := json.Unmarshal(raw, &fresh, strict); err != nil {
			return err
		}
		if len(raw) <= sharedMaxLen {
			if used += len(raw); used > sharedBudget {
				clear(table)
				used = len(raw)
			}
			table[string(raw)] = fresh
		}
		*v = fresh
		return nil
	}
}
