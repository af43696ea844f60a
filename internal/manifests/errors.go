package manifests

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/pvguard/pvguard/clusterstate"
)

// Errors name what a user must fix: the file and document are added by Load, the object (kind and
// name) and the field path (spec.accessModes[1], not the decoder's /spec/accessModes/1) here.

// fieldError restates a decoding error in terms of the object's field path.
func fieldError(err error) error {
	var sem *json.SemanticError
	var syn *jsontext.SyntacticError
	switch {
	case errors.As(err, &sem) && sem.Err == json.ErrUnknownName:
		return fmt.Errorf("unknown field %q", FieldPath(sem.JSONPointer))
	case errors.As(err, &syn) && syn.Err == jsontext.ErrDuplicateName:
		return duplicateError(FieldPath(syn.JSONPointer))
	case errors.As(err, &sem) && sem.JSONPointer != "" && sem.Err != nil:
		return fmt.Errorf("%s: %w", FieldPath(sem.JSONPointer), sem.Err)
	case errors.As(err, &sem) && sem.JSONPointer != "" && sem.GoType != nil:
		return fmt.Errorf("%s: a JSON %s where %s was expected", FieldPath(sem.JSONPointer), sem.JSONKind, sem.GoType)
	}
	return err
}

// duplicateError is the one message for a repeated key, found in JSON or in YAML.
func duplicateError(path string) error {
	return fmt.Errorf("duplicate field %q", path)
}

// FieldPath turns a JSON pointer into a field path: /cases/2/name is cases[2].name.
func FieldPath(p jsontext.Pointer) string {
	var b strings.Builder
	for tok := range p.Tokens() {
		if _, err := strconv.Atoi(tok); err == nil && b.Len() > 0 {
			b.WriteString("[" + tok + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(tok)
	}
	return b.String()
}

// jsonKind names a JSON value's kind for an error message.
func jsonKind(k jsontext.Kind) string {
	switch k {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a " + k.String()
}

// nameOfDocument is the document's metadata.name, for an error message ("" when unreadable).
func nameOfDocument(js []byte) string {
	var doc struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(js, &doc, jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	return doc.Metadata.Name
}

// readVersion is the API version the audit reads of a kind, or "" for a kind it does not read.
func readVersion(kind string) string {
	switch kind {
	case "PersistentVolume", "PersistentVolumeClaim", "Node":
		return "v1"
	case "StorageClass":
		return "storage.k8s.io/v1"
	}
	if r, ok := clusterstate.ReadableKind(clusterstate.Kind(kind)); ok {
		return r.APIVersion()
	}
	return ""
}

// versionError explains why a document of an audited kind was not read, or returns nil for a
// kind the audit does not read. A kind the audit reads, in its own API group or the core group
// but another version (or with none), is refused rather than skipped, so that no volume or claim
// leaves the audit unseen; the same kind in another named group is another resource and is
// skipped with the other kinds.
func versionError(apiVersion, kind string, js []byte) error {
	want := readVersion(kind)
	if want == "" {
		return nil
	}
	group, _ := schema.ParseGroupVersion(want)
	if apiVersion == "" {
		return fmt.Errorf("%s %s: no apiVersion (want %s)", kind, nameOfDocument(js), want)
	}
	if gv, err := schema.ParseGroupVersion(apiVersion); err != nil || gv.Group == group.Group || gv.Group == "" {
		return fmt.Errorf("%s %s: apiVersion %q is not read by pvguard (want %s)", kind, nameOfDocument(js), apiVersion, want)
	}
	return nil
}
