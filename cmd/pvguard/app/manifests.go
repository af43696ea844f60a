package app

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/pvguard/pvguard/policy"
)

// LoadManifests reads the storage objects from files and directories (recursively: .yaml, .yml,
// .json; a file named directly is read whatever its extension). A document that cannot be read
// is reported with its file and position and skipped; the rest is still loaded, including the
// documents after it in the same file. Kinds other than PersistentVolume, PersistentVolumeClaim,
// StorageClass and Node are ignored.
//
// Files are decoded in parallel and joined in walk order, so the result does not depend on
// scheduling. Each document goes from YAML to JSON once and from JSON straight into its typed
// object. Decoding is strict, as the apiserver's is: field names are case-sensitive, and an
// unknown or duplicate field makes the document unreadable rather than silently half-read.
// (go-json-experiment, the basis of encoding/json/v2, decodes these objects about twice as fast
// as encoding/json; it also refuses invalid UTF-8, where the apiserver would replace it.)
func LoadManifests(paths []string) (*policy.Snapshot, int, []error) {
	var (
		files []string
		errs  []error
	)
	for _, root := range paths {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				return nil
			}
			if path != root {
				switch strings.ToLower(filepath.Ext(path)) {
				case ".yaml", ".yml", ".json":
				default:
					return nil
				}
			}
			files = append(files, path)
			return nil
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("reading %s: %w", root, err))
		}
	}

	parts := make([]manifestFile, len(files))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), max(len(files), 1)) {
		wg.Go(func() {
			for i := range next {
				parts[i].load(files[i])
			}
		})
	}
	for i := range files {
		next <- i
	}
	close(next)
	wg.Wait()

	snap := &policy.Snapshot{}
	objects := 0
	for i := range parts {
		p := &parts[i]
		snap.PVs = append(snap.PVs, p.snap.PVs...)
		snap.PVCs = append(snap.PVCs, p.snap.PVCs...)
		snap.Nodes = append(snap.Nodes, p.snap.Nodes...)
		snap.Classes = append(snap.Classes, p.snap.Classes...)
		objects += p.objects
		errs = append(errs, p.errs...)
	}
	return snap, objects, errs
}

// manifestFile is what one file holds; each is filled by one worker.
type manifestFile struct {
	snap    policy.Snapshot
	objects int
	errs    []error
}

func (m *manifestFile) load(path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		m.errs = append(m.errs, err)
		return
	}
	if trimmed := bytes.TrimLeft(data, " \t\r\n"); len(trimmed) > 0 && trimmed[0] == '{' {
		// JSON needs no YAML parser: a stream of objects, as `kubectl get -o json` writes one.
		// Duplicate names are left to the typed decode, which names the object and field.
		dec := jsontext.NewDecoder(bytes.NewBuffer(trimmed), jsontext.AllowDuplicateNames(true))
		for doc := 1; ; doc++ {
			raw, err := dec.ReadValue()
			if err != nil {
				if !errors.Is(err, io.EOF) {
					// A JSON syntax error loses the position of the next value: stop here.
					m.errs = append(m.errs, fmt.Errorf("%s: document %d: %w", path, doc, err))
				}
				return
			}
			m.add(path, doc, raw)
		}
	}
	docs := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for doc := 1; ; doc++ {
		text, err := docs.Read()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			m.errs = append(m.errs, fmt.Errorf("%s: document %d: %w", path, doc, err))
			return
		}
		js, err := yaml.YAMLToJSON(text)
		if err != nil {
			// Documents are split on "---" before parsing, so the next one is still read.
			m.errs = append(m.errs, fmt.Errorf("%s: document %d: %w", path, doc, err))
			continue
		}
		m.add(path, doc, js)
	}
}

func (m *manifestFile) add(path string, doc int, js []byte) {
	n, err := addDocument(&m.snap, js)
	m.objects += n
	if err != nil {
		m.errs = append(m.errs, fmt.Errorf("%s: document %d: %w", path, doc, err))
	}
}

// header is the part of a document that says what it is.
type header struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Items []jsontext.Value `json:"items"`
}

// strict makes a typed decode refuse unknown fields; duplicate names and case-insensitive
// matches are refused by default.
var strict = json.RejectUnknownMembers(true)

// addDocument adds one JSON document (or the items of a List) to the snapshot and returns how
// many objects it added.
func addDocument(snap *policy.Snapshot, js []byte) (int, error) {
	js = bytes.TrimSpace(js)
	if len(js) == 0 || bytes.Equal(js, []byte("null")) {
		return 0, nil // an empty document
	}
	var h header
	if err := json.Unmarshal(js, &h, jsontext.AllowDuplicateNames(true)); err != nil {
		return 0, fmt.Errorf("reading apiVersion, kind and metadata.name: %w", err)
	}
	if strings.HasSuffix(h.Kind, "List") {
		total := 0
		var errs []error
		for i, it := range h.Items {
			n, err := addDocument(snap, it)
			total += n
			if err != nil {
				errs = append(errs, fmt.Errorf("items[%d]: %w", i, err))
			}
		}
		return total, errors.Join(errs...)
	}
	var target any
	switch {
	case h.Kind == "PersistentVolume" && h.APIVersion == "v1":
		target = &corev1.PersistentVolume{}
	case h.Kind == "PersistentVolumeClaim" && h.APIVersion == "v1":
		target = &corev1.PersistentVolumeClaim{}
	case h.Kind == "Node" && h.APIVersion == "v1":
		target = &corev1.Node{}
	case h.Kind == "StorageClass" && h.APIVersion == "storage.k8s.io/v1":
		target = &storagev1.StorageClass{}
	case h.Kind == "":
		return 0, errors.New("no kind")
	default:
		return 0, nil
	}
	if err := json.Unmarshal(js, target, strict); err != nil {
		return 0, fmt.Errorf("%s %s: %w", h.Kind, h.Metadata.Name, fieldError(err))
	}
	if h.Metadata.Name == "" {
		return 0, fmt.Errorf("%s without metadata.name", h.Kind)
	}
	switch t := target.(type) {
	case *corev1.PersistentVolume:
		snap.PVs = append(snap.PVs, t)
	case *corev1.PersistentVolumeClaim:
		if t.Namespace == "" {
			t.Namespace = "default"
		}
		snap.PVCs = append(snap.PVCs, t)
	case *corev1.Node:
		snap.Nodes = append(snap.Nodes, t)
	case *storagev1.StorageClass:
		snap.Classes = append(snap.Classes, t)
	}
	return 1, nil
}

// fieldError restates a decoding error in terms of the object's field path
// (spec.accessModes[0]) rather than a JSON pointer (/spec/accessModes/0).
func fieldError(err error) error {
	var sem *json.SemanticError
	var syn *jsontext.SyntacticError
	switch {
	case errors.As(err, &sem) && sem.Err == json.ErrUnknownName:
		return fmt.Errorf("unknown field %q", fieldPath(sem.JSONPointer))
	case errors.As(err, &syn) && syn.Err == jsontext.ErrDuplicateName:
		return fmt.Errorf("duplicate field %q", fieldPath(syn.JSONPointer))
	case errors.As(err, &sem) && sem.JSONPointer != "" && sem.Err != nil:
		return fmt.Errorf("%s: %w", fieldPath(sem.JSONPointer), sem.Err)
	case errors.As(err, &sem) && sem.JSONPointer != "" && sem.GoType != nil:
		return fmt.Errorf("%s: a JSON %s where %s was expected", fieldPath(sem.JSONPointer), sem.JSONKind, sem.GoType)
	}
	return err
}

func fieldPath(p jsontext.Pointer) string {
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
