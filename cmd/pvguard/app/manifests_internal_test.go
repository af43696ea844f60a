package app

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/pvguard/pvguard/hack/bench/auditgen"
)

// TestAddListAgreesWithTheCarefulWay holds the one-pass List reader (addList) to what the
// careful way (find the items, then decode each) makes of the same document: the same objects
// when it takes a document, and nothing at all when it declines one, so that every document it
// declines is read the careful way and every problem is named there.
func TestAddListAgreesWithTheCarefulWay(t *testing.T) {
	// Lists as the benchmarks write them: volumes, claims, classes and nodes of every shape the
	// generator makes, indented as `kubectl get -o json` does.
	dir := t.TempDir()
	files, err := auditgen.WriteJSON(auditgen.Generate(600), dir, 200)
	if err != nil {
		t.Fatal(err)
	}
	type doc struct {
		name string
		js   string
		take bool // whether addList takes it
	}
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

	w := new(worker)
	for _, d := range docs {
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
