package manifests

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/pvguard/pvguard/test/gen"
)

// FuzzReaders holds the readers to one another on any input, read as a JSON file and as a YAML
// file: nothing panics; decoding on several goroutines in small batches gives what one goroutine
// gives (objects, order, count, error text); and the objects decoded with values shared across
// inputs (shared.go) equal those decoded without. Seeds are listDocuments, as JSON and as YAML,
// with a small List of the generator's for its large ones (a fuzzer minimises what it finds by
// running it again and again).
//
//	go test -run '^$' -fuzz FuzzReaders -fuzztime 2m -fuzzminimizetime 100x ./manifests/
func FuzzReaders(f *testing.F) {
	small, err := gen.WriteJSON(gen.Inventory(6), f.TempDir(), 100)
	if err != nil {
		f.Fatal(err)
	}
	js, err := os.ReadFile(small[0])
	if err != nil {
		f.Fatal(err)
	}
	docs := []listDocument{{js: string(js)}}
	for _, d := range listDocuments(f) {
		if d.want != nil {
			docs = append(docs, d)
		}
	}
	for _, d := range docs {
		f.Add([]byte(d.js))
		if y, err := yaml.JSONToYAML([]byte(d.js)); err == nil {
			f.Add(y)
		}
	}
	f.Add([]byte("apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: a}\nspec:\n  volumeMode: Block\n  volumeMode: Filesystem\n"))
	f.Add([]byte("base: &b {x: 1}\nitems:\n- <<: *b\n  x: 2\n  kind: PersistentVolume\n  apiVersion: v1\nkind: List\n"))
	dir := f.TempDir()
	shared := new(decoder) // kept across inputs, as a goroutine's is across documents
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, name := range []string{"f.json", "f.yaml"} {
			path := filepath.Join(dir, name)
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}
			one, n1, errs1 := load([]string{path}, 1, 1<<20)
			many, n2, errs2 := load([]string{path}, 3, 1)
			if n1 != n2 || !reflect.DeepEqual(one, many) || fmt.Sprint(errs1) != fmt.Sprint(errs2) {
				t.Fatalf("%s: one goroutine read %d objects and %v; three %d and %v", name, n1, errs1, n2, errs2)
			}
		}

		plain := &decoder{opts: strict} // no sharing
		got, err := shared.readAll(item{js: data})
		want, wantErr := plain.readAll(item{js: data})
		if !reflect.DeepEqual(got, want) || fmt.Sprint(err) != fmt.Sprint(wantErr) {
			t.Fatalf("with shared values: %d objects and %v; without: %d and %v", len(got), err, len(want), wantErr)
		}
	})
}
