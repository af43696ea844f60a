package manifests

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// The List reader: `kubectl get pv,pvc -o json|yaml` writes one document, a List, whose items are
// the objects. Its JSON (converted from YAML or not) is scanned once for its type and items, and
// each item is read as a document of its own, so a bad item is named by its index and the other
// items are still read.

// isList reports whether a kind is a List of items: List, or a typed one such as
// PersistentVolumeList.
func isList(kind string) bool { return strings.HasSuffix(kind, "List") }

// header is what a JSON document says of itself before it is decoded.
type header struct {
	apiVersion, kind string
	// items are the elements of an "items" array, as views of the document: a List's kind comes
	// after them in kubectl's output, so they are kept on the way rather than read again.
	items [][]byte
	// dups are the top-level names the document repeats, as far as it was read.
	dups []string
}

// header reads a JSON object's apiVersion and kind, skipping the values of the other members
// unread and stopping once it has both, unless it is a List.
func (d *decoder) header(js []byte) (header, error) {
	var h header
	dec := &d.scan
	dec.Reset(bytes.NewBuffer(js), jsontext.AllowDuplicateNames(true))
	tok, err := dec.ReadToken()
	if err != nil {
		return h, err
	}
	if tok.Kind() != '{' {
		return h, fmt.Errorf("%s, not an object", jsonKind(tok.Kind()))
	}
	d.names = d.names[:0]
	var haveVersion, haveKind bool
	for dec.PeekKind() != '}' {
		// A List is read to its end, for items that come after its kind.
		if haveVersion && haveKind && !isList(h.kind) {
			break
		}
		tok, err := dec.ReadToken()
		if err != nil {
			return h, err
		}
		// A token is valid only until the next read.
		name := tok.String()
		if slices.Contains(d.names, name) {
			h.dups = append(h.dups, name)
		}
		d.names = append(d.names, name)
		switch name {
		case "apiVersion", "kind":
			v, err := dec.ReadToken()
			if err != nil {
				return h, err
			}
			if v.Kind() != '"' {
				return h, fmt.Errorf("%s is %s, not a string", name, jsonKind(v.Kind()))
			}
			if name == "kind" {
				h.kind, haveKind = v.String(), true
			} else {
				h.apiVersion, haveVersion = v.String(), true
			}
		case "items":
			if h.items, err = arrayElements(dec, js); err != nil {
				return h, err
			}
		default:
			if err := dec.SkipValue(); err != nil {
				return h, err
			}
		}
	}
	return h, nil
}

// arrayElements reads the value dec is at: the elements of an array, as views of js (the
// decoder's whole input), or none for a value of another kind.
func arrayElements(dec *jsontext.Decoder, js []byte) ([][]byte, error) {
	if dec.PeekKind() != '[' {
		return nil, dec.SkipValue()
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, err
	}
	var elems [][]byte
	for i := 0; dec.PeekKind() != ']'; i++ {
		v, err := dec.ReadValue()
		if err != nil {
			return nil, itemError(i, err)
		}
		// v is valid only until the next read; the same bytes of js stay.
		end := int(dec.InputOffset())
		elems = append(elems, js[end-len(v):end:end])
	}
	_, err := dec.ReadToken() // ']'
	return elems, err
}

// listItems returns a List's items to read, each with the repeated keys found inside it. A key
// the List itself repeats (two items members, say) makes the whole List unreadable, as the
// apiserver would find it.
func listItems(h header, dups []string) ([]item, error) {
	items := make([]item, len(h.items))
	for i, js := range h.items {
		items[i].js = js
	}
	for _, p := range dups {
		i, rest, ok := itemPath(p)
		if !ok || i >= len(items) {
			return nil, fmt.Errorf("%s: %w", h.kind, duplicateError(p))
		}
		items[i].dups = append(items[i].dups, rest)
	}
	return items, nil
}

// itemPath splits the path of a field inside a List's item ("items[3].spec.volumeMode") into the
// item's index and the field's path in the item.
func itemPath(p string) (int, string, bool) {
	rest, ok := strings.CutPrefix(p, "items[")
	if !ok {
		return 0, "", false
	}
	index, rest, ok := strings.Cut(rest, "].")
	if !ok {
		return 0, "", false
	}
	i, err := strconv.Atoi(index)
	return i, rest, err == nil && i >= 0
}
