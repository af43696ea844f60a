package policytest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/pvguard/pvguard/internal/manifests"
)

// Every document, whatever its format on disk, is turned into JSON and decoded strictly: YAML by
// sigs.k8s.io/yaml (the converter kubectl and the apiserver use), strictly, so that a key repeated
// in a mapping is an error and not its last value; JSON by go-json-experiment with unknown members
// refused and duplicate names refused (its default). Errors name the field path
// (`cases[2].expect.denied`), never a JSON pointer.

// strict refuses unknown fields; duplicate names are refused by default.
var strict = json.RejectUnknownMembers(true)

// document is one document of a file, as JSON, with its place in the file (from 1).
type document struct {
	index int
	js    []byte
	err   error
	raw   []byte // the text of a document that could not be converted
}

// splitDocuments cuts a file into its documents and converts each to JSON. A JSON file (its first
// byte '{') is a stream of values; anything else is YAML, cut where kubectl cuts it (lines
// starting with "---"). A document that cannot be converted carries its error; a stream that
// cannot be cut ends with an error.
func splitDocuments(data []byte) ([]document, error) {
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	var docs []document
	if len(trimmed) > 0 && trimmed[0] == '{' {
		dec := jsontext.NewDecoder(bytes.NewReader(trimmed), jsontext.AllowDuplicateNames(true))
		for {
			v, err := dec.ReadValue()
			if errors.Is(err, io.EOF) {
				return docs, nil
			}
			if err != nil {
				return docs, fmt.Errorf("document %d: %w", len(docs)+1, err)
			}
			// v is valid only until the next read; the same bytes of trimmed stay.
			end := int(dec.InputOffset())
			docs = append(docs, document{index: len(docs) + 1, js: trimmed[end-len(v) : end : end]})
		}
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return docs, fmt.Errorf("document %d: %w", len(docs)+1, err)
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue // a separator with nothing but comments around it
		}
		js, err := yamlToJSON(doc)
		d := document{index: len(docs) + 1, js: js, err: err}
		if err != nil {
			d.raw = doc
		}
		docs = append(docs, d)
	}
}

// stripComments drops YAML comment lines, to tell an empty document from one that is not.
func stripComments(doc []byte) []byte {
	var out []byte
	for line := range bytes.Lines(doc) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' {
			out = append(out, line...)
		}
	}
	return out
}

// yamlToJSON converts one YAML document to JSON, refusing a key repeated in a mapping with the
// path of the repeat.
func yamlToJSON(doc []byte) ([]byte, error) {
	js, err := yaml.YAMLToJSONStrict(doc)
	if err == nil {
		return js, nil
	}
	if dups := manifests.DuplicateKeys(doc); len(dups) > 0 {
		return nil, duplicateError(dups[0])
	}
	// No repeated key: go-yaml's strictness took a merge key's override ("<<: *base" then one
	// of base's keys) for a repeat; YAML says the explicit key wins, as the plain conversion has it.
	js, err2 := yaml.YAMLToJSON(doc)
	if err2 != nil {
		return nil, err2
	}
	return js, nil
}

// decodeStrict decodes JSON into v, refusing unknown and repeated fields; errors name the field
// path below prefix (the path of the value decoded, "" for a whole document).
func decodeStrict(js []byte, v any, prefix string) error {
	if err := json.Unmarshal(js, v, strict); err != nil {
		return fieldError(err, prefix)
	}
	return nil
}

// fieldError restates a decoding error in terms of the field path.
func fieldError(err error, prefix string) error {
	var sem *json.SemanticError
	var syn *jsontext.SyntacticError
	switch {
	case errors.As(err, &sem) && errors.Is(sem.Err, json.ErrUnknownName):
		return fmt.Errorf("unknown field %q", joinPath(prefix, manifests.FieldPath(sem.JSONPointer)))
	case errors.As(err, &syn) && errors.Is(syn.Err, jsontext.ErrDuplicateName):
		return duplicateError(joinPath(prefix, manifests.FieldPath(syn.JSONPointer)))
	case errors.As(err, &sem) && sem.JSONPointer != "" && sem.Err != nil:
		return fmt.Errorf("%s: %w", joinPath(prefix, manifests.FieldPath(sem.JSONPointer)), sem.Err)
	case errors.As(err, &sem) && sem.GoType != nil:
		at := joinPath(prefix, manifests.FieldPath(sem.JSONPointer))
		if at == "" {
			at = "the document"
		}
		return fmt.Errorf("%s: a JSON %s where %s was expected", at, jsonKind(sem.JSONKind), goTypeName(sem.GoType.String()))
	}
	if prefix != "" {
		return fmt.Errorf("%s: %w", prefix, err)
	}
	return err
}

func duplicateError(path string) error { return fmt.Errorf("duplicate field %q", path) }

// joinPath joins a field path and a field below it.
func joinPath(prefix, field string) string {
	switch {
	case prefix == "":
		return field
	case field == "":
		return prefix
	case strings.HasPrefix(field, "["):
		return prefix + field
	}
	return prefix + "." + field
}

func jsonKind(k jsontext.Kind) string {
	switch k {
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	case '"':
		return "string"
	case '0':
		return "number"
	case 'n':
		return "null"
	}
	return "value"
}

// goTypeName says what a Go type is to someone who writes YAML.
func goTypeName(t string) string {
	switch {
	case strings.HasPrefix(t, "[]"):
		return "a list"
	case t == "string":
		return "a string"
	case t == "bool":
		return "a boolean"
	case strings.HasPrefix(t, "map[") || strings.HasPrefix(t, "policytest.") || strings.HasPrefix(t, "*policytest."):
		return "a mapping"
	}
	return t
}

// absent reports whether a raw value was not given (or given as null).
func absent(v jsontext.Value) bool {
	t := bytes.TrimSpace(v)
	return len(t) == 0 || bytes.Equal(t, []byte("null"))
}

// header is a document's apiVersion and kind.
type header struct {
	APIVersion, Kind string
}

// readHeader reads a document's apiVersion and kind, whatever else it holds.
func readHeader(js []byte) (header, error) {
	h, _, err := scanHeader(js)
	return h, err
}

// scanHeader reads a JSON object's apiVersion and kind, skipping the other members unread and
// stopping once it has both, unless it is a List: a List is read to its end, and the elements of
// its "items" (which kubectl writes before the kind) are returned as views of js. A List's other
// members must be its metadata.
func scanHeader(js []byte) (header, [][]byte, error) {
	dec := jsontext.NewDecoder(bytes.NewReader(js), jsontext.AllowDuplicateNames(true))
	return scanObject(dec, js, true)
}

// scanObject is scanHeader of the value dec is at, in input (the decoder's whole input). With
// stop, it stops once it has the apiVersion and kind of an object that is not a List; without,
// it reads the value to its end.
func scanObject(dec *jsontext.Decoder, input []byte, stop bool) (header, [][]byte, error) {
	var (
		h        header
		items    [][]byte
		extra    string
		gotItems bool
	)
	tok, err := dec.ReadToken()
	if err != nil {
		return h, nil, err
	}
	if tok.Kind() != '{' {
		return h, nil, fmt.Errorf("the document is a JSON %s, not an object", jsonKind(tok.Kind()))
	}
	var haveVersion, haveKind bool
	for dec.PeekKind() != '}' {
		if stop && haveVersion && haveKind && !isList(h.Kind) {
			return h, nil, nil
		}
		tok, err := dec.ReadToken()
		if err != nil {
			return h, nil, err
		}
		switch name := tok.String(); name {
		case "apiVersion", "kind":
			v, err := dec.ReadToken()
			if err != nil {
				return h, nil, err
			}
			if v.Kind() != '"' {
				return h, nil, fmt.Errorf("%s: a JSON %s where a string was expected", name, jsonKind(v.Kind()))
			}
			if name == "kind" {
				h.Kind, haveKind = v.String(), true
			} else {
				h.APIVersion, haveVersion = v.String(), true
			}
		case "items":
			if gotItems {
				return h, nil, duplicateError("items")
			}
			gotItems = true
			if items, err = arrayElements(dec, input); err != nil {
				return h, nil, err
			}
		default:
			if name != "metadata" && extra == "" {
				extra = name
			}
			if err := dec.SkipValue(); err != nil {
				return h, nil, err
			}
		}
	}
	if _, err := dec.ReadToken(); err != nil { // '}'
		return h, nil, err
	}
	if isList(h.Kind) && extra != "" {
		return h, nil, fmt.Errorf("%s: unknown field %q", h.Kind, extra)
	}
	return h, items, nil
}

// isList reports whether a kind is a List of items: List, or a typed one such as
// PersistentVolumeList.
func isList(kind string) bool { return strings.HasSuffix(kind, "List") }

// arrayElements reads the value dec is at: the elements of an array, as views of js (the
// decoder's whole input).
func arrayElements(dec *jsontext.Decoder, js []byte) ([][]byte, error) {
	if k := dec.PeekKind(); k != '[' {
		return nil, fmt.Errorf("items: a JSON %s where a list was expected", jsonKind(k))
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, err
	}
	var elems [][]byte
	for i := 0; dec.PeekKind() != ']'; i++ {
		v, err := dec.ReadValue()
		if err != nil {
			return nil, fmt.Errorf("items[%d]: %w", i, err)
		}
		// v is valid only until the next read; the same bytes of js stay.
		end := int(dec.InputOffset())
		elems = append(elems, js[end-len(v):end:end])
	}
	_, err := dec.ReadToken() // ']'
	return elems, err
}

// decodeLenient decodes what it can, for headers and names in error messages.
func decodeLenient(js []byte, v any) error {
	return json.Unmarshal(js, v, json.RejectUnknownMembers(false), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
}
