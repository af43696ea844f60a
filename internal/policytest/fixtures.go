package policytest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/go-json-experiment/json/jsontext"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pvguard/pvguard/policy"
)

// Fixtures are a suite's cluster state, in the order they were given.
type Fixtures struct {
	Volumes           []*corev1.PersistentVolume
	Claims            []*corev1.PersistentVolumeClaim
	Classes           []*storagev1.StorageClass
	Nodes             []*corev1.Node
	AttributesClasses []*storagev1.VolumeAttributesClass
	Leases            []*coordinationv1.Lease
	Pods              []*corev1.Pod

	// byRef indexes the volumes, claims and classes for lookup, built on first use; the lists
	// are not changed once it is (a sequential suite's next state is a clone).
	indexOnce sync.Once
	byRef     map[objectRef]metav1.Object
}

// index is the volumes, claims and classes by reference.
func (f *Fixtures) index() map[objectRef]metav1.Object {
	f.indexOnce.Do(func() {
		f.byRef = make(map[objectRef]metav1.Object, len(f.Volumes)+len(f.Claims)+len(f.Classes))
		for _, o := range f.Volumes {
			f.byRef[objectRef{kind: string(policy.KindPersistentVolume), name: o.Name}] = o
		}
		for _, o := range f.Claims {
			f.byRef[objectRef{kind: string(policy.KindPersistentVolumeClaim), namespace: o.Namespace, name: o.Name}] = o
		}
		for _, o := range f.Classes {
			f.byRef[objectRef{kind: string(policy.KindStorageClass), name: o.Name}] = o
		}
	})
	return f.byRef
}

// fixtureKinds are the kinds a fixture may be, by apiVersion and kind.
var fixtureKinds = map[header]func() metav1.Object{
	{"v1", "PersistentVolume"}:                     func() metav1.Object { return &corev1.PersistentVolume{} },
	{"v1", "PersistentVolumeClaim"}:                func() metav1.Object { return &corev1.PersistentVolumeClaim{} },
	{"v1", "Node"}:                                 func() metav1.Object { return &corev1.Node{} },
	{"v1", "Pod"}:                                  func() metav1.Object { return &corev1.Pod{} },
	{"storage.k8s.io/v1", "StorageClass"}:          func() metav1.Object { return &storagev1.StorageClass{} },
	{"storage.k8s.io/v1", "VolumeAttributesClass"}: func() metav1.Object { return &storagev1.VolumeAttributesClass{} },
	{"coordination.k8s.io/v1", "Lease"}:            func() metav1.Object { return &coordinationv1.Lease{} },
}

const fixtureKindList = "v1 PersistentVolume, PersistentVolumeClaim, Node, Pod; storage.k8s.io/v1 StorageClass, VolumeAttributesClass; coordination.k8s.io/v1 Lease; or a List of them"

// add puts an object in its kind's list.
func (f *Fixtures) add(obj metav1.Object) {
	switch o := obj.(type) {
	case *corev1.PersistentVolume:
		f.Volumes = append(f.Volumes, o)
	case *corev1.PersistentVolumeClaim:
		f.Claims = append(f.Claims, o)
	case *corev1.Node:
		f.Nodes = append(f.Nodes, o)
	case *corev1.Pod:
		f.Pods = append(f.Pods, o)
	case *storagev1.StorageClass:
		f.Classes = append(f.Classes, o)
	case *storagev1.VolumeAttributesClass:
		f.AttributesClasses = append(f.AttributesClasses, o)
	case *coordinationv1.Lease:
		f.Leases = append(f.Leases, o)
	}
}

// unit is one JSON value to decode into fixture objects, with where it comes from for errors.
type unit struct {
	where string // "file: document 2: items[7]" or "suite.yaml: document 1: fixtures.objects[0]"
	js    []byte
	objs  []metav1.Object
	err   error
}

// readFixtures reads the fixture files (relative to dir) and inline objects of a suite.
// where names the suite document for inline objects' errors.
func readFixtures(dir string, doc fixturesDoc, where string) (*Fixtures, []error) {
	var errs []error
	var files []string
	for _, f := range doc.Files {
		path := f
		if !filepath.IsAbs(path) {
			path = filepath.Join(dir, f)
		}
		found, err := walkManifests(path)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: fixtures.files: %w", where, err))
		}
		files = append(files, found...)
	}
	// Files are split into documents on every core; then every document, and every item of a
	// List, is decoded on every core. The result keeps the order given.
	perFile := make([][]*unit, len(files))
	fileErrs := make([]error, len(files))
	parallel(len(files), func(i int) { perFile[i], fileErrs[i] = splitFixtureFile(files[i]) })
	var units []*unit
	for i := range files {
		if fileErrs[i] != nil {
			errs = append(errs, fileErrs[i])
		}
		units = append(units, perFile[i]...)
	}
	for i, raw := range doc.Objects {
		units = append(units, &unit{where: fmt.Sprintf("%s: fixtures.objects[%d]", where, i), js: raw})
	}
	parallel(len(units), func(i int) {
		if units[i].err == nil {
			units[i].objs, units[i].err = decodeFixture(units[i].js)
		}
	})
	fx := &Fixtures{}
	for _, u := range units {
		if u.err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", u.where, u.err))
			continue
		}
		for _, obj := range u.objs {
			fx.add(obj)
		}
	}
	for _, err := range fx.checkUnique() {
		errs = append(errs, fmt.Errorf("%s: %w", where, err))
	}
	return fx, errs
}

// walkManifests lists the files a fixtures.files entry names: the file, or the .yaml, .yml and
// .json files under a directory, in lexical order.
func walkManifests(root string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		if path != root && !isManifest(path) {
			return nil
		}
		files = append(files, path)
		return nil
	})
	return files, err
}

func isManifest(path string) bool {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// splitFixtureFile cuts a fixture file into the values to decode: its documents, and the items of
// its Lists.
func splitFixtureFile(path string) ([]*unit, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if isJSON(data) {
		return splitJSONFixtures(path, data)
	}
	docs, err := splitDocuments(data)
	if err != nil {
		err = fmt.Errorf("%s: %w", path, err)
	}
	var units []*unit
	for _, d := range docs {
		where := fmt.Sprintf("%s: document %d", path, d.index)
		if d.err != nil {
			units = append(units, &unit{where: where, err: d.err})
			continue
		}
		units = append(units, listItems(where, d.js)...)
	}
	return units, err
}

// splitJSONFixtures cuts a JSON stream into its values, and a List into its items, in one pass
// (a `kubectl get -o json` dump of a large cluster is one List).
func splitJSONFixtures(path string, data []byte) ([]*unit, error) {
	data = bytes.TrimLeft(data, " \t\r\n")
	dec := jsontext.NewDecoder(bytes.NewReader(data), jsontext.AllowDuplicateNames(true))
	var units []*unit
	for index := 1; ; index++ {
		if dec.PeekKind() == 0 {
			if _, err := dec.ReadToken(); errors.Is(err, io.EOF) {
				return units, nil
			}
		}
		where := fmt.Sprintf("%s: document %d", path, index)
		start := int(dec.InputOffset())
		h, items, err := scanObject(dec, data, false)
		if err != nil {
			// The place of the next value is lost: the stream ends here.
			return units, fmt.Errorf("%s: %w", where, err)
		}
		if !isList(h.Kind) {
			end := int(dec.InputOffset())
			units = append(units, &unit{where: where, js: bytes.TrimSpace(data[start:end])})
			continue
		}
		for i, it := range items {
			units = append(units, &unit{where: fmt.Sprintf("%s: items[%d]", where, i), js: it})
		}
	}
}

// isJSON reports whether a file is JSON rather than YAML: its first byte is '{'.
func isJSON(data []byte) bool {
	t := bytes.TrimLeft(data, " \t\r\n")
	return len(t) > 0 && t[0] == '{'
}

// listItems is a document to decode, or the items of the List it is, each its own unit so that
// a large List is decoded on every core.
func listItems(where string, js []byte) []*unit {
	h, items, err := scanHeader(js)
	switch {
	case err != nil && isList(h.Kind):
		return []*unit{{where: where, err: err}}
	case err != nil || !isList(h.Kind):
		return []*unit{{where: where, js: js}} // decodeFixture reports what is wrong
	}
	units := make([]*unit, len(items))
	for i, it := range items {
		units[i] = &unit{where: fmt.Sprintf("%s: items[%d]", where, i), js: it}
	}
	return units
}

// decodeFixture decodes one value into its objects: one object, the items of a List, or none
// for an empty document.
func decodeFixture(js []byte) ([]metav1.Object, error) {
	if absent(js) {
		return nil, nil
	}
	h, items, err := scanHeader(js)
	if err != nil {
		return nil, fmt.Errorf("reading apiVersion and kind: %w", fieldError(err, ""))
	}
	if isList(h.Kind) {
		var (
			objs []metav1.Object
			errs []error
		)
		for i, it := range items {
			got, err := decodeFixture(it)
			if err != nil {
				errs = append(errs, fmt.Errorf("items[%d]: %w", i, err))
			}
			objs = append(objs, got...)
		}
		return objs, errors.Join(errs...)
	}
	obj, err := decodeObject(js, h, fixtureKinds, fixtureKindList, "")
	if err != nil {
		return nil, err
	}
	return []metav1.Object{obj}, nil
}

// decodeObject decodes an object of one of the kinds given, strictly; errors name the field below
// prefix. A claim, pod or lease without a namespace is in "default", as kubectl would create it.
func decodeObject(js []byte, h header, kinds map[header]func() metav1.Object, want, prefix string) (metav1.Object, error) {
	mk, ok := kinds[h]
	if !ok {
		switch {
		case h.Kind == "" && h.APIVersion == "":
			return nil, fmt.Errorf("%sno apiVersion and kind (want %s)", at(prefix), want)
		case h.Kind == "":
			return nil, fmt.Errorf("%sno kind (want %s)", at(prefix), want)
		}
		return nil, fmt.Errorf("%sapiVersion %q kind %q is not what pvguard reads here (want %s)", at(prefix), h.APIVersion, h.Kind, want)
	}
	obj := mk()
	if err := decodeStrict(js, obj, prefix); err != nil {
		return nil, fmt.Errorf("%s %s: %w", h.Kind, nameOf(js), err)
	}
	if obj.GetName() == "" {
		return nil, fmt.Errorf("%s%s without metadata.name", at(prefix), h.Kind)
	}
	switch obj.(type) {
	case *corev1.PersistentVolumeClaim, *corev1.Pod, *coordinationv1.Lease:
		if obj.GetNamespace() == "" {
			obj.SetNamespace("default")
		}
	}
	return obj, nil
}

func at(prefix string) string {
	if prefix == "" {
		return ""
	}
	return prefix + ": "
}

// nameOf is a document's metadata.name for an error ("" when unreadable).
func nameOf(js []byte) string {
	var doc struct {
		Metadata struct {
			Namespace string `json:"namespace"`
			Name      string `json:"name"`
		} `json:"metadata"`
	}
	_ = decodeLenient(js, &doc)
	if doc.Metadata.Namespace != "" {
		return doc.Metadata.Namespace + "/" + doc.Metadata.Name
	}
	return doc.Metadata.Name
}

// checkUnique refuses two fixtures with the same kind, namespace and name: the cluster holds one.
func (f *Fixtures) checkUnique() []error {
	var errs []error
	seen := map[string]bool{}
	check := func(kind string, m metav1.Object) {
		key := objectKey(kind, m.GetNamespace(), m.GetName())
		if seen[key] {
			errs = append(errs, fmt.Errorf("fixture %s is given twice", key))
		}
		seen[key] = true
	}
	for _, o := range f.Volumes {
		check("PersistentVolume", o)
	}
	for _, o := range f.Claims {
		check("PersistentVolumeClaim", o)
	}
	for _, o := range f.Classes {
		check("StorageClass", o)
	}
	for _, o := range f.Nodes {
		check("Node", o)
	}
	for _, o := range f.AttributesClasses {
		check("VolumeAttributesClass", o)
	}
	for _, o := range f.Leases {
		check("Lease", o)
	}
	for _, o := range f.Pods {
		check("Pod", o)
	}
	return errs
}

// objectKey is Kind/name or Kind/namespace/name: how suites name objects.
func objectKey(kind, namespace, name string) string {
	if namespace == "" {
		return kind + "/" + name
	}
	return kind + "/" + namespace + "/" + name
}

// parallel calls f(0..n-1) on up to GOMAXPROCS goroutines.
func parallel(n int, f func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), n)
	if workers <= 1 {
		for i := range n {
			f(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				f(i)
			}
		})
	}
	wg.Wait()
}
