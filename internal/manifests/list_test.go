package manifests

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/pvguard/pvguard/clusterstate"
	"github.com/pvguard/pvguard/test/gen"
)

type listDocument struct {
	name string
	js   string
	// want are the objects read (kind/name, as objectNames lists them), or nil for the
	// generator's Lists, whose objects must be their items decoded alone (plainItems).
	want []string
	// wantErr, when set, is in the document's one error.
	wantErr string
}

// listDocuments are Lists and other documents for the List reader: the generator's Lists,
// indented as `kubectl get -o json` writes them, and every kind of odd or broken List.
func listDocuments(t testing.TB) []listDocument {
	t.Helper()
	files, err := gen.WriteJSON(gen.Inventory(600), t.TempDir(), 200)
	if err != nil {
		t.Fatal(err)
	}
	var docs []listDocument
	for _, f := range files {
		js, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, listDocument{name: filepath.Base(f), js: string(js)})
	}
	pv := func(name string) string {
		return `{"apiVersion":"v1","kind":"PersistentVolume","metadata":{"name":"` + name + `"},"spec":{"capacity":{"storage":"1Gi"}}}`
	}
	list := func(items ...string) string {
		return `{"apiVersion":"v1","items":[` + strings.Join(items, ",\n ") + `],"kind":"List"}`
	}
	none := []string{}
	return append(docs, []listDocument{
		{name: "kind first, items spaced out", js: `{"kind":"PersistentVolumeList", "apiVersion":"v1", "items": [ ` + pv("a") + ` ,  ` + pv("b") + ` ] }`,
			want: []string{"pv/a", "pv/b"}},
		{name: "items of kinds the audit skips", js: list(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"x":"y"}}`, pv("a"),
			`{"apiVersion":"other.example/v1","kind":"PersistentVolume","metadata":{"name":"elsewhere"}}`), want: []string{"pv/a"}},
		{name: "a claim without a namespace", js: list(`{"metadata":{"name":"c"},"kind":"PersistentVolumeClaim","apiVersion":"v1"}`),
			want: []string{"pvc/default/c"}},
		{name: "an empty List", js: `{"kind":"List","items":[]}`, want: none},
		{name: "not a List", js: pv("a"), want: []string{"pv/a"}},
		{name: "a List in a List", js: list(list(pv("a")), pv("b")), want: []string{"pv/a", "pv/b"}},
		{name: "items not an array", js: `{"kind":"List","items":` + pv("a") + `}`, want: none},
		{name: "a List without a kind", js: `{"apiVersion":"v1","items":[` + pv("a") + `]}`, want: none, wantErr: "document 1: no kind"},
		{name: "an item with an unknown field", js: list(pv("a"), `{"apiVersion":"v1","kind":"PersistentVolume","metadata":{"name":"b"},"spec":{"capacty":{}}}`),
			want: []string{"pv/a"}, wantErr: `document 1: items[1]: PersistentVolume b: unknown field "spec.capacty"`},
		{name: "an item with a duplicate field", js: list(`{"apiVersion":"v1","kind":"PersistentVolume","metadata":{"name":"a","name":"b"}}`, pv("c")),
			want: []string{"pv/c"}, wantErr: `document 1: items[0]: PersistentVolume b: duplicate field "metadata.name"`},
		{name: "an item without a name", js: list(`{"apiVersion":"v1","kind":"PersistentVolume","metadata":{}}`),
			want: none, wantErr: "items[0]: PersistentVolume without metadata.name"},
		{name: "an item without a kind", js: list(`{"apiVersion":"v1","metadata":{"name":"a"}}`), want: none, wantErr: "items[0]: no kind"},
		{name: "an item of another version", js: list(`{"apiVersion":"v2","kind":"PersistentVolume","metadata":{"name":"a"}}`),
			want: none, wantErr: `items[0]: PersistentVolume a: apiVersion "v2" is not read by pvguard (want v1)`},
		{name: "an item that is not an object", js: list(pv("a"), `"pv-b"`),
			want: []string{"pv/a"}, wantErr: "items[1]: reading apiVersion and kind: a string, not an object"},
		{name: "bad items in a List in a List", js: list(pv("a"), list(pv("b"), `{"kind":"PersistentVolume","metadata":{"name":"c"}}`)),
			want: []string{"pv/a", "pv/b"}, wantErr: "items[1]: items[1]: PersistentVolume c: no apiVersion"},
		{name: "invalid UTF-8", js: list(`{"apiVersion":"v1","kind":"PersistentVolume","metadata":{"name":"a","labels":{"x":"` + "\xff" + `"}}}`),
			want: none, wantErr: "document 1: jsontext: invalid UTF-8"},
		// A List with a member twice is refused, as the apiserver refuses it.
		{name: "two items members", js: `{"items":[` + pv("a") + `],"kind":"List","items":[` + pv("b") + `]}`,
			want: none, wantErr: `document 1: List: duplicate field "items"`},
		{name: "a duplicate kind", js: `{"kind":"List","kind":"List","items":[` + pv("a") + `]}`,
			want: none, wantErr: `document 1: List: duplicate field "kind"`},
	}...)
}

// loadText loads text as the one file name, decoding on workers goroutines in batches of batch.
func loadText(t testing.TB, name, text string, workers, batch int) (*clusterstate.State, int, []error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return load([]string{path}, workers, batch)
}

// TestListReader: a List's items are read as documents of their own, in order, on every
// goroutine; each problem is named by the item's index and the other items are kept. The
// generator's Lists read as their items decoded alone.
func TestListReader(t *testing.T) {
	for _, d := range listDocuments(t) {
		t.Run(d.name, func(t *testing.T) {
			st, n, errs := loadText(t, "f.json", d.js, 3, 2)
			if d.want == nil {
				want := byKind(plainItems(t, []byte(d.js)))
				if got := stateObjects(st); len(errs) != 0 || !reflect.DeepEqual(got, want) || n != len(want) {
					t.Fatalf("read %d objects (%v), want the %d items decoded alone", n, errs, len(want))
				}
				return
			}
			if got := objectNames(st); !slices.Equal(got, d.want) || n != len(d.want) {
				t.Errorf("read %d: %v, want %v", n, got, d.want)
			}
			switch {
			case d.wantErr == "" && len(errs) != 0:
				t.Errorf("errors %v, want none", errs)
			case d.wantErr != "" && (len(errs) != 1 || !strings.Contains(errs[0].Error(), d.wantErr)):
				t.Errorf("errors %v, want one containing %q", errs, d.wantErr)
			}
		})
	}
}

// TestYAMLReadsAsJSON holds the YAML reader to the JSON reader: a YAML document reads as the JSON
// sigs.k8s.io/yaml converts it to (objects, order, count and error text), whatever its layout.
// The documents are listDocuments written as kubectl writes YAML, and YAML of other layouts.
func TestYAMLReadsAsJSON(t *testing.T) {
	var docs []listDocument
	for _, d := range listDocuments(t) {
		if strings.Contains(d.wantErr, "duplicate") {
			continue // YAML written from them would hold only the last of each key
		}
		y, err := yaml.JSONToYAML([]byte(d.js))
		if err != nil {
			continue // not one JSON document (the UTF-8 case)
		}
		docs = append(docs, listDocument{name: d.name, js: string(y)})
	}
	item := func(name string) string {
		return "- apiVersion: v1\n  kind: PersistentVolume\n  metadata:\n    name: " + name + "\n"
	}
	docs = append(docs, []listDocument{
		{name: "comments, blank lines and a block scalar", js: "apiVersion: v1\nitems:\n# first\n" + item("a") +
			"  spec:\n    csi:\n      driver: x\n      volumeHandle: h\n      volumeAttributes:\n        note: |\n          - not an item\n\n          still the note\n\n" + item("b") + "kind: List\n"},
		{name: "kind before items, items indented by three", js: "kind: PersistentVolumeList\napiVersion: v1\nitems:\n-   apiVersion: v1\n    kind: PersistentVolume\n    metadata: {name: c}\n"},
		{name: "an alias to another item's anchor", js: "apiVersion: v1\nitems:\n- apiVersion: v1\n  kind: PersistentVolume\n  metadata: &m {name: d}\n- apiVersion: v1\n  kind: PersistentVolume\n  metadata: *m\nkind: List\n"},
		{name: "an anchor at the top used in an item", js: "x: &n e\napiVersion: v1\nitems:\n- apiVersion: v1\n  kind: PersistentVolume\n  metadata: {name: *n}\nkind: List\n"},
		{name: "an indented sequence", js: "apiVersion: v1\nitems:\n  - apiVersion: v1\n    kind: PersistentVolume\n    metadata: {name: f}\nkind: List\n"},
		{name: "a dash alone", js: "apiVersion: v1\nitems:\n-\n  apiVersion: v1\n  kind: PersistentVolume\n  metadata: {name: g}\nkind: List\n"},
		{name: "items of something else", js: "apiVersion: v1\nitems:\n" + item("k") + "kind: ConfigMap\nmetadata: {name: x}\n"},
		{name: "an item with an unknown field", js: "apiVersion: v1\nitems:\n" + item("n") + "  spek: {}\n" + item("o") + "kind: List\n"},
		{name: "a quoted scalar over two lines", js: "apiVersion: v1\nitems:\n- apiVersion: v1\n  kind: PersistentVolume\n  metadata:\n    name: p\n    annotations:\n      note: \"one\n        two\"\nkind: List\n"},
		{name: "flow style, folded scalars and YAML 1.1 booleans", js: "apiVersion: v1\nkind: PersistentVolume\nmetadata:\n  name: q\n  annotations:\n    note: >\n      folded\n      text\n    on: on\n" +
			"spec: {hostPath: {path: /x}, mountOptions: [ro], csi: null}\n"},
		{name: "yes is a boolean, as kubectl reads it", js: "apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: r}\nspec:\n  csi: {driver: d, volumeHandle: h, readOnly: yes}\n"},
	}...)
	for _, d := range docs {
		t.Run(d.name, func(t *testing.T) {
			js, err := yaml.YAMLToJSON([]byte(d.js))
			if err != nil {
				t.Fatalf("the test's YAML does not convert: %v", err)
			}
			fromYAML, nYAML, errsYAML := loadText(t, "f.yaml", d.js, 3, 1)
			fromJSON, nJSON, errsJSON := loadText(t, "f.json", string(js), 1, 100)
			if nYAML != nJSON || !reflect.DeepEqual(fromYAML, fromJSON) || errorTexts(errsYAML, "f.yaml") != errorTexts(errsJSON, "f.json") {
				t.Fatalf("from YAML %d objects %v and %v; from its JSON %d %v and %v",
					nYAML, objectNames(fromYAML), errsYAML, nJSON, objectNames(fromJSON), errsJSON)
			}
			t.Logf("%d objects, errors %v", nYAML, errsYAML)
		})
	}
}

// errorTexts is the errors' text with the file's name left out.
func errorTexts(errs []error, file string) string {
	var b strings.Builder
	for _, e := range errs {
		_, after, _ := strings.Cut(e.Error(), file)
		fmt.Fprintln(&b, after)
	}
	return b.String()
}

// TestLoadLargeLists: the one file kubectl writes for a whole inventory (a List, as JSON or as
// YAML, with or without a first "---") reads as its items decoded alone, in order, however many
// goroutines share its items.
func TestLoadLargeLists(t *testing.T) {
	files, err := gen.WriteJSON(gen.Inventory(1000), t.TempDir(), 10000)
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
	want := byKind(plainItems(t, js))
	for name, text := range map[string]string{"f.json": string(js), "f.yaml": string(y), "g.yaml": "---\n" + string(y)} {
		for _, workers := range []int{1, 4} {
			t.Run(fmt.Sprint(name, workers), func(t *testing.T) {
				st, n, errs := loadText(t, name, text, workers, 7)
				if got := stateObjects(st); len(errs) != 0 || n != len(want) || !reflect.DeepEqual(got, want) {
					t.Fatalf("read %d objects (%v), want the %d items decoded alone", n, errs, len(want))
				}
			})
		}
	}
}

// TestLoadInAnyOrder: files, documents and items are decoded on several goroutines but joined in
// walk order, then document order, then item order: the result is the one a single goroutine
// gets, errors included.
func TestLoadInAnyOrder(t *testing.T) {
	dir := t.TempDir()
	st := gen.Inventory(600)
	for sub, write := range map[string]func(*clusterstate.State, string, int) ([]string, error){
		"json": gen.WriteJSON, "yaml": gen.WriteYAML, "yaml-list": gen.WriteYAMLList,
	} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
		if _, err := write(st, filepath.Join(dir, sub), 100); err != nil {
			t.Fatal(err)
		}
	}
	broken := "apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: bad}\nspec: {capacity: {storage: lots}}\n---\nkind: [\n---\n" +
		"apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Node, metadata: {name: n, name: m}}\n- {apiVersion: v1, kind: Node, metadata: {name: o}}\n"
	if err := os.WriteFile(filepath.Join(dir, "yaml", "objects-00003b.yaml"), []byte(broken), 0o600); err != nil {
		t.Fatal(err)
	}
	one, n1, errs1 := load([]string{dir}, 1, 1<<20)
	many, n2, errs2 := load([]string{dir}, 5, 3)
	if n1 != 3*(600+3+32)+1 || len(errs1) != 3 {
		t.Fatalf("one goroutine read %d objects and %d errors (%v)", n1, len(errs1), errs1)
	}
	if n1 != n2 || !reflect.DeepEqual(one, many) || fmt.Sprint(errs1) != fmt.Sprint(errs2) {
		t.Fatalf("one goroutine read %d objects and %v; five %d and %v; states equal: %v", n1, errs1, n2, errs2, reflect.DeepEqual(one, many))
	}
}
