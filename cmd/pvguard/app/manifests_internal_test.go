package app

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/pvguard/pvguard/hack/bench/auditgen"
)

// TestAddListAgreesWithTheCarefulWay holds the one-pass List reader (addList) to what the
// careful way (find the items, then decode each) makes of the same document: the same objects
// when it takes a document, and nothing at all when it declines one, so that every document it
// declines is read the careful way and every problem is named there.
func TestAddListAgreesWithTheCarefulWay(t *testing.T) {
	w := new(worker)
	for _, d := range listDocuments(t) {
		t.Run(d.name, func(t *testing.T) {
			quick := &manifestFile{w: w}
			n, took := quick.addList([]byte(d.js))
			if took != d.take {
				t.Fatalf("addList took it: %v, want %v", took, d.take)
			}
			if !took {
				if n != 0 || !reflect.DeepEqual(quick.snap, manifestFile{}.snap) {
					t.Fatalf("addList declined but added %d objects: %+v", n, quick.snap)
				}
				return
			}
			careful := &manifestFile{w: w}
			_, kind, items, err := careful.typeOfDocument([]byte(d.js))
			if err != nil || !strings.HasSuffix(kind, "List") {
				t.Fatalf("the careful way reads kind %q (%v)", kind, err)
			}
			want, err := careful.addItems(items)
			if err != nil {
				t.Fatalf("the careful way failed on a document addList took: %v", err)
			}
			if n != want || !reflect.DeepEqual(quick.snap, careful.snap) {
				t.Fatalf("addList added %d objects, the careful way %d; snapshots equal: %v", n, want, reflect.DeepEqual(quick.snap, careful.snap))
			}
		})
	}
}

// TestStreamListAgreesWithLoad holds the streamed List reader (streamList, for large files) to
// what load makes of the same file, errors included: when it takes a file, the same objects in
// the same order, the same count and the same error text; when it declines one, nothing kept.
// It takes every file that is one List without a syntax error, including Lists with broken
// items, whose problems it must name as load does.
func TestStreamListAgreesWithLoad(t *testing.T) {
	pool := newItemPool(3)
	defer pool.close()
	w := new(worker)
	dir := t.TempDir()
	docs := listDocuments(t)
	docs = append(docs,
		listDocument{name: "two Lists", js: docs[0].js + "\n" + docs[1].js},
		listDocument{name: "a syntax error in an item", js: `{"kind":"List","items":[{"apiVersion":"v1",}]}`},
		listDocument{name: "garbage after the List", js: `{"kind":"List","items":[]} x`},
		listDocument{name: "leading whitespace", js: "  " + docs[0].js},
	)
	// What is not one List free of syntax errors (and the file that begins with whitespace, left
	// to load); every other List is streamed, broken items and all.
	declined := map[string]bool{"not a List": true, "a List without a kind": true, "items not an array": true,
		"invalid UTF-8": true, "two Lists": true, "a syntax error in an item": true, "garbage after the List": true,
		"leading whitespace": true}
	for i, d := range docs {
		t.Run(d.name, func(t *testing.T) {
			path := filepath.Join(dir, fmt.Sprintf("f%02d.json", i))
			if err := os.WriteFile(path, []byte(d.js), 0o600); err != nil {
				t.Fatal(err)
			}
			streamed := &manifestFile{}
			took := streamed.streamList(path, pool, 0)
			if took == declined[d.name] {
				t.Fatalf("streamList took it: %v, want %v", took, !declined[d.name])
			}
			if !took {
				if !reflect.DeepEqual(*streamed, manifestFile{}) {
					t.Fatalf("streamList declined but kept %+v", *streamed)
				}
			}
			loaded := &manifestFile{}
			loaded.load(path, w, pool)
			if took {
				if !reflect.DeepEqual(streamed.snap, loaded.snap) || streamed.objects != loaded.objects || fmt.Sprint(streamed.errs) != fmt.Sprint(loaded.errs) {
					t.Fatalf("streamList kept %d objects and errors %v; load %d and %v; snapshots equal: %v",
						streamed.objects, streamed.errs, loaded.objects, loaded.errs, reflect.DeepEqual(streamed.snap, loaded.snap))
				}
			}
		})
	}
}

type listDocument struct {
	name string
	js   string
	take bool // whether addList takes it
}

// listDocuments are Lists and other documents for the List readers: the generator's Lists,
// indented as `kubectl get -o json` writes them, and every kind of odd or broken List.
func listDocuments(t testing.TB) []listDocument {
	t.Helper()
	dir := t.TempDir()
	files, err := auditgen.WriteJSON(auditgen.Generate(600), dir, 200)
	if err != nil {
		t.Fatal(err)
	}
	type doc = listDocument
	var docs []doc
	for _, f := range files {
		js, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, doc{filepath.Base(f), string(js), true})
	}
	pv := func(name string) string {
		return `{"apiVersion":"v1","kind":"PersistentVolume","metadata":{"name":"` + name + `"},"spec":{"capacity":{"storage":"1Gi"}}}`
	}
	list := func(items ...string) string {
		return `{"apiVersion":"v1","items":[` + strings.Join(items, ",\n ") + `],"kind":"List"}`
	}
	docs = append(docs, []doc{
		{"kind first, items spaced out", `{"kind":"PersistentVolumeList", "apiVersion":"v1", "items": [ ` + pv("a") + ` ,  ` + pv("b") + ` ] }`, true},
		{"items of kinds the audit skips", list(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"x":"y"}}`, pv("a"),
			`{"apiVersion":"other.example/v1","kind":"PersistentVolume","metadata":{"name":"elsewhere"}}`), true},
		{"a claim without a namespace", list(`{"metadata":{"name":"c"},"kind":"PersistentVolumeClaim","apiVersion":"v1"}`), true},
		{"two items members (a duplicate name)", `{"items":[` + pv("a") + `],"kind":"List","items":[` + pv("b") + `]}`, false},
		{"an empty List", `{"kind":"List","items":[]}`, true},
		{"not a List", pv("a"), false},
		{"a List without a kind", `{"apiVersion":"v1","items":[` + pv("a") + `]}`, false},
		{"items not an array", `{"kind":"List","items":` + pv("a") + `}`, false},
		{"an item with an unknown field", list(pv("a"), `{"apiVersion":"v1","kind":"PersistentVolume","metadata":{"name":"b"},"spec":{"capacty":{}}}`), false},
		{"an item with a duplicate field", list(`{"apiVersion":"v1","kind":"PersistentVolume","metadata":{"name":"a","name":"b"}}`), false},
		{"an item without a name", list(`{"apiVersion":"v1","kind":"PersistentVolume","metadata":{}}`), false},
		{"an item without a kind", list(`{"apiVersion":"v1","metadata":{"name":"a"}}`), false},
		{"an item of another version", list(`{"apiVersion":"v2","kind":"PersistentVolume","metadata":{"name":"a"}}`), false},
		{"an item that is not an object", list(pv("a"), `"pv-b"`), false},
		{"a List in a List", list(list(pv("a"))), false},
		{"invalid UTF-8", list(`{"apiVersion":"v1","kind":"PersistentVolume","metadata":{"name":"a","labels":{"x":"` + "\xff" + `"}}}`), false},
		{"a duplicate kind", `{"kind":"List","kind":"List","items":[` + pv("a") + `]}`, false},
	}...)

	return docs
}

// FuzzListReaders holds the ways a List is read to one another on any input: addList, when it
// takes a document, adds what the careful way (find the items, decode each) adds, and what each
// item decodes to alone, without values shared with earlier inputs; streamList,
// when it takes a file, keeps what load keeps, errors included; splitYAMLList, when it takes a
// YAML document, keeps what converting it whole keeps; and none of them panics. Seeds are
// listDocuments, as JSON and as YAML.
//
//	go test -run '^$' -fuzz FuzzListReaders -fuzztime 2m ./cmd/pvguard/app/
func FuzzListReaders(f *testing.F) {
	for _, d := range listDocuments(f) {
		f.Add([]byte(d.js))
		if y, err := yaml.JSONToYAML([]byte(d.js)); err == nil {
			f.Add(y)
		}
	}
	pool := newItemPool(2)
	defer pool.close()
	w := new(worker)
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, js []byte) {
		quick := &manifestFile{w: w}
		if n, took := quick.addList(js); took {
			careful := &manifestFile{w: w}
			_, kind, items, err := careful.typeOfDocument(js)
			if err != nil || !strings.HasSuffix(kind, "List") {
				t.Fatalf("addList took a document the careful way reads as kind %q (%v)", kind, err)
			}
			want, err := careful.addItems(items)
			if err != nil || n != want || !reflect.DeepEqual(quick.snap, careful.snap) {
				t.Fatalf("addList added %d objects, the careful way %d (%v)", n, want, err)
			}
			// Values shared with earlier inputs (w's tables) decode as they would alone.
			if plain := byKind(plainItems(t, js)); !reflect.DeepEqual(snapshotObjects(quick), plain) {
				t.Fatalf("addList's objects differ from the items decoded alone, without shared values")
			}
		} else if n != 0 || !reflect.DeepEqual(quick.snap, manifestFile{}.snap) {
			t.Fatalf("addList declined but added %d objects", n)
		}

		split := &manifestFile{w: w}
		if split.splitYAMLList("f.yaml", 1, js, pool) {
			whole := &manifestFile{w: w}
			converted, err := yaml.YAMLToJSON(js)
			if err != nil {
				t.Fatalf("splitYAMLList took a document that does not convert whole: %v", err)
			}
			whole.add("f.yaml", 1, converted)
			if !reflect.DeepEqual(split.snap, whole.snap) || split.objects != whole.objects || fmt.Sprint(split.errs) != fmt.Sprint(whole.errs) {
				t.Fatalf("splitYAMLList kept %d objects and %v; whole %d and %v", split.objects, split.errs, whole.objects, whole.errs)
			}
		} else if !reflect.DeepEqual(*split, manifestFile{w: w}) {
			t.Fatalf("splitYAMLList declined but kept %+v", *split)
		}

		path := filepath.Join(dir, "f.json")
		if err := os.WriteFile(path, js, 0o600); err != nil {
			t.Fatal(err)
		}
		streamed := &manifestFile{}
		took := streamed.streamList(path, pool, 0)
		loaded := &manifestFile{}
		loaded.load(path, w, pool)
		switch {
		case !took && !reflect.DeepEqual(*streamed, manifestFile{}):
			t.Fatalf("streamList declined but kept %+v", *streamed)
		case took && (!reflect.DeepEqual(streamed.snap, loaded.snap) || streamed.objects != loaded.objects || fmt.Sprint(streamed.errs) != fmt.Sprint(loaded.errs)):
			t.Fatalf("streamList kept %d objects and %v; load %d and %v", streamed.objects, streamed.errs, loaded.objects, loaded.errs)
		}
	})
}

// TestSplitYAMLListAgreesWithConversion holds the split YAML List reader (splitYAMLList, for
// large documents) to converting the document whole: when it takes a document, the same objects
// in the same order, the same count and the same error text; when it declines one, nothing kept.
func TestSplitYAMLListAgreesWithConversion(t *testing.T) {
	pool := newItemPool(3)
	defer pool.close()
	w := new(worker)
	var docs []listDocument
	for _, d := range listDocuments(t) {
		y, err := yaml.JSONToYAML([]byte(d.js))
		if err != nil {
			continue // not one JSON document (the UTF-8 case)
		}
		docs = append(docs, listDocument{name: d.name, js: string(y)})
	}
	pv := func(name string) string {
		return "- apiVersion: v1\n  kind: PersistentVolume\n  metadata:\n    name: " + name + "\n"
	}
	docs = append(docs, []listDocument{
		{name: "comments, blank lines and a block scalar", js: "apiVersion: v1\nitems:\n# first\n" + pv("a") +
			"  spec:\n    csi:\n      driver: x\n      volumeHandle: h\n      volumeAttributes:\n        note: |\n          - not an item\n\n          still the note\n\n" + pv("b") + "kind: List\n"},
		{name: "kind before items, items indented by three", js: "kind: PersistentVolumeList\napiVersion: v1\nitems:\n-   apiVersion: v1\n    kind: PersistentVolume\n    metadata: {name: c}\n"},
		{name: "an alias to another item's anchor", js: "apiVersion: v1\nitems:\n- apiVersion: v1\n  kind: PersistentVolume\n  metadata: &m {name: d}\n- apiVersion: v1\n  kind: PersistentVolume\n  metadata: *m\nkind: List\n"},
		{name: "an anchor at the top used in an item", js: "x: &n e\napiVersion: v1\nitems:\n- apiVersion: v1\n  kind: PersistentVolume\n  metadata: {name: *n}\nkind: List\n"},
		{name: "an indented sequence", js: "apiVersion: v1\nitems:\n  - apiVersion: v1\n    kind: PersistentVolume\n    metadata: {name: f}\nkind: List\n"},
		{name: "a dash alone", js: "apiVersion: v1\nitems:\n-\n  apiVersion: v1\n  kind: PersistentVolume\n  metadata: {name: g}\nkind: List\n"},
		{name: "a line less indented than its item", js: "apiVersion: v1\nitems:\n-   apiVersion: v1\n    kind: PersistentVolume\n  metadata: {name: h}\nkind: List\n"},
		{name: "two items keys", js: "apiVersion: v1\nitems:\n" + pv("i") + "kind: List\nitems:\n" + pv("j")},
		{name: "items of something else", js: "apiVersion: v1\nitems:\n" + pv("k") + "kind: ConfigMap\nmetadata: {name: x}\n"},
		{name: "a broken item", js: "apiVersion: v1\nitems:\n" + pv("l") + "- apiVersion: v1\n  kind: PersistentVolume\n  metadata: {name: [m\nkind: List\n"},
		{name: "an item with an unknown field", js: "apiVersion: v1\nitems:\n" + pv("n") + "  spek: {}\n" + pv("o") + "kind: List\n"},
		{name: "a quoted scalar over two lines", js: "apiVersion: v1\nitems:\n- apiVersion: v1\n  kind: PersistentVolume\n  metadata:\n    name: p\n    annotations:\n      note: \"one\n        two\"\nkind: List\n"},
	}...)
	// What must be split: kubectl's layout, and the block-layout cases it handles.
	mustSplit := map[string]bool{"comments, blank lines and a block scalar": true, "kind before items, items indented by three": true,
		"a quoted scalar over two lines": true, "an item with an unknown field": true, "items of kinds the audit skips": true}
	for _, d := range docs {
		t.Run(d.name, func(t *testing.T) {
			split := &manifestFile{w: w}
			took := split.splitYAMLList("f.yaml", 3, []byte(d.js), pool)
			if !took && (mustSplit[d.name] || strings.HasPrefix(d.name, "objects-")) {
				t.Fatalf("splitYAMLList declined a document it must split:\n%.400s", d.js)
			}
			if !took {
				if !reflect.DeepEqual(*split, manifestFile{w: w}) {
					t.Fatalf("splitYAMLList declined but kept %+v", *split)
				}
				t.Logf("declined")
				return
			}
			whole := &manifestFile{w: w}
			if js, err := yaml.YAMLToJSON([]byte(d.js)); err != nil {
				t.Fatalf("splitYAMLList took a document that does not convert whole: %v", err)
			} else {
				whole.add("f.yaml", 3, js)
			}
			if !reflect.DeepEqual(split.snap, whole.snap) || split.objects != whole.objects || fmt.Sprint(split.errs) != fmt.Sprint(whole.errs) {
				t.Fatalf("split kept %d objects and %v; whole %d and %v", split.objects, split.errs, whole.objects, whole.errs)
			}
			t.Logf("took: %d objects, %d errors", split.objects, len(split.errs))
		})
	}
}

// TestLoadSplitsALargeYAMLList: load splits a YAML List of more than splitMin that is the file's
// only document, with or without a leading "---", and keeps what converting it whole keeps.
func TestLoadSplitsALargeYAMLList(t *testing.T) {
	dir := t.TempDir()
	files, err := auditgen.WriteJSON(auditgen.Generate(5000), dir, 10000)
	if err != nil || len(files) != 1 {
		t.Fatalf("%d files, %v", len(files), err)
	}
	js, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	y, err := yaml.JSONToYAML(js)
	if err != nil {
		t.Fatal(err)
	}
	if len(y) < splitMin {
		t.Fatalf("the List is %d bytes, under splitMin", len(y))
	}
	whole := &manifestFile{w: new(worker)}
	whole.add("f.yaml", 1, js)
	for name, text := range map[string][]byte{"plain": y, "after a separator": append([]byte("---\n"), y...)} {
		t.Run(name, func(t *testing.T) {
			pool := newItemPool(2)
			defer pool.close()
			path := filepath.Join(dir, "f.yaml")
			if err := os.WriteFile(path, text, 0o600); err != nil {
				t.Fatal(err)
			}
			loaded := &manifestFile{}
			loaded.load(path, new(worker), pool)
			if loaded.objects != whole.objects || !reflect.DeepEqual(loaded.snap, whole.snap) || len(loaded.errs) != 0 {
				t.Fatalf("loaded %d objects (%v), want the %d of the whole conversion", loaded.objects, loaded.errs, whole.objects)
			}
			// Only the item pool hands buffers back, so these show that the List was split.
			if len(pool.free) == 0 {
				t.Fatal("the List was converted whole, not split")
			}
		})
	}
}

// TestOnlyDocument holds onlyDocument to the document reader: where it finds one document, the
// reader finds that one document and no other.
func TestOnlyDocument(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{"a: 1\nb: 2\n", true},
		{"---\na: 1\n", true},
		{"---   \na: 1\n", true},
		{"a: |\n  ---\n  text\n", true},
		{"a: 1\n---\nb: 2\n", false},
		{"---\na: 1\n---\n", false},
		{"--- # comment\na: 1\n", true},
		{"---x\na: 1\n", false},
		{"---", false},
		{"a: 1\n--- \n", false},
	} {
		got, ok := onlyDocument([]byte(tc.in))
		if ok != tc.want {
			t.Errorf("%q: one document %v, want %v", tc.in, ok, tc.want)
			continue
		}
		if !ok {
			continue
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(tc.in)))
		first, err := r.Read()
		if err != nil || string(first) != string(got) {
			t.Errorf("%q: %q, the reader reads %q (%v)", tc.in, got, first, err)
		}
		if next, err := r.Read(); err != io.EOF {
			t.Errorf("%q: the reader reads a second document %q (%v)", tc.in, next, err)
		}
	}
}
