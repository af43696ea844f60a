package manifests

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pvguard/pvguard/clusterstate"
)

// The JSON reader: every document, whatever its format on disk, ends here as JSON and is decoded
// straight into its typed object by go-json-experiment (the basis of encoding/json/v2), which
// decodes these objects about twice as fast as encoding/json. Decoding is strict, as the
// apiserver's is: field names are case-sensitive, and an unknown or duplicate field makes the
// object unreadable rather than silently half-read. (It also refuses invalid UTF-8, where the
// apiserver would replace it.)

// strict makes a typed decode refuse unknown fields; duplicate names and case-insensitive matches
// are refused by default. It is a constant in all but name.
var strict = json.RejectUnknownMembers(true)

// isJSON reports whether a file is JSON rather than YAML: JSON needs no YAML parser.
func isJSON(data []byte) bool {
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	return len(trimmed) > 0 && trimmed[0] == '{'
}

// jsonDocuments calls emit with each value of a JSON stream, as views of data: `kubectl get -o
// json` writes one, and several may follow one another. A syntax error loses the place where the
// next value starts, so it ends the stream; the values before it have been emitted.
func jsonDocuments(data []byte, emit func([]byte)) error {
	data = bytes.TrimLeft(data, " \t\r\n")
	// Duplicate names are left to the typed decode, which names the object and the field.
	dec := jsontext.NewDecoder(bytes.NewBuffer(data), jsontext.AllowDuplicateNames(true))
	for {
		v, err := dec.ReadValue()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		// v is valid only until the next read; the same bytes of data stay (the decoder reads a
		// bytes.Buffer in place).
		end := int(dec.InputOffset())
		emit(data[end-len(v) : end : end])
	}
}

// decoder decodes JSON documents. Each goroutine has its own: it holds a scanner reset for every
// document and the tables of shared values (shared.go), neither safe for concurrent use. Nothing
// decoded refers to it (the typed decode copies every string).
type decoder struct {
	scan  jsontext.Decoder // reads each document's header
	names []string         // the top-level names of the document being scanned
	// shared and opts (strict, sharing through shared) are made on first use.
	shared *sharedValues
	opts   json.Options
}

func (d *decoder) options() json.Options {
	if d.opts == nil {
		d.shared = newSharedValues()
		d.opts = json.JoinOptions(strict, d.shared.unmarshaler)
	}
	return d.opts
}

// item is a JSON document to read, with the paths of the keys its YAML repeated (yamlToJSON):
// they are gone from the JSON, which holds only the last of each, so they are refused here.
type item struct {
	js   []byte
	dups []string
}

// read reads one JSON document: it returns the object, or, for a List, its items still to read
// (readAll reads them in place, Load on every core). Empty documents, null and kinds the audit
// does not read give neither.
func (d *decoder) read(doc item) (metav1.Object, []item, error) {
	js := bytes.TrimSpace(doc.js)
	if len(js) == 0 || bytes.Equal(js, []byte("null")) {
		return nil, nil, nil
	}
	h, err := d.header(js)
	if err != nil {
		return nil, nil, fmt.Errorf("reading apiVersion and kind: %w", err)
	}
	dups := append(h.dups, doc.dups...)
	if isList(h.kind) {
		items, err := listItems(h, dups)
		return nil, items, err
	}
	obj, err := d.object(js, h.apiVersion, h.kind, dups)
	return obj, nil, err
}

// readAll reads one JSON document and the items of a List in it, in order. A bad item is named
// by its index, and the other items are still read.
func (d *decoder) readAll(doc item) ([]metav1.Object, error) {
	obj, items, err := d.read(doc)
	if obj != nil || err != nil {
		return nonNil(obj), err
	}
	var (
		objs []metav1.Object
		errs []error
	)
	for i, it := range items {
		got, err := d.readAll(it)
		objs = append(objs, got...)
		if err != nil {
			errs = append(errs, itemError(i, err))
		}
	}
	return objs, errors.Join(errs...)
}

func nonNil(obj metav1.Object) []metav1.Object {
	if obj == nil {
		return nil
	}
	return []metav1.Object{obj}
}

// itemError names a List's item in an error.
func itemError(i int, err error) error {
	return fmt.Errorf("items[%d]: %w", i, err)
}

// object decodes a document that is not a List into its typed object, or returns nil for a kind
// the audit does not read.
func (d *decoder) object(js []byte, apiVersion, kind string, dups []string) (metav1.Object, error) {
	obj := newObject(apiVersion, kind)
	switch {
	case obj != nil:
	case kind == "":
		return nil, errors.New("no kind")
	default:
		return nil, versionError(apiVersion, kind, js)
	}
	if len(dups) > 0 {
		return nil, fmt.Errorf("%s %s: %w", kind, nameOfDocument(js), duplicateError(dups[0]))
	}
	if err := json.Unmarshal(js, obj, d.options()); err != nil {
		// An error met while sharing a value is placed in the value, not the object: decoded
		// again without sharing, the error names the field.
		obj = newObject(apiVersion, kind)
		if err := json.Unmarshal(js, obj, strict); err != nil {
			return nil, fmt.Errorf("%s %s: %w", kind, nameOfDocument(js), fieldError(err))
		}
	}
	if obj.GetName() == "" {
		return nil, fmt.Errorf("%s without metadata.name", kind)
	}
	if c, ok := obj.(*corev1.PersistentVolumeClaim); ok && c.Namespace == "" {
		c.Namespace = "default" // as kubectl would create it
	}
	return obj, nil
}

// newObject returns an empty object of a kind the audit reads, or nil.
func newObject(apiVersion, kind string) metav1.Object {
	if apiVersion != readVersion(kind) {
		return nil
	}
	switch kind {
	case "PersistentVolume":
		return &corev1.PersistentVolume{}
	case "PersistentVolumeClaim":
		return &corev1.PersistentVolumeClaim{}
	case "Node":
		return &corev1.Node{}
	case "StorageClass":
		return &storagev1.StorageClass{}
	}
	if r, ok := clusterstate.ReadableKind(clusterstate.Kind(kind)); ok {
		return r.Object.DeepCopyObject().(metav1.Object)
	}
	return nil
}
