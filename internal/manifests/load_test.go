package manifests_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	storagev1 "k8s.io/api/storage/v1"

	"github.com/pvguard/pvguard/internal/manifests"
	"github.com/pvguard/pvguard/test/testobj"
)

// yamlItem makes a YAML document an item of a List's items.
func yamlItem(doc string) string {
	return "- " + strings.ReplaceAll(strings.TrimSuffix(doc, "\n"), "\n", "\n  ") + "\n"
}

func pvYAML(name string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: %s}\nspec: {capacity: {storage: 1Gi}, hostPath: {path: /d}}\n", name)
}

func TestLoad(t *testing.T) {
	for _, tc := range []struct {
		name    string
		files   map[string]string
		want    []string // objects loaded, in order
		wantErr []string // substrings, one per expected error, in order
	}{{
		name:  "a broken document does not hide the ones after it",
		files: map[string]string{"a.yaml": pvYAML("one") + "---\nkind: [\n---\n" + pvYAML("three")},
		want:  []string{"pv/one", "pv/three"}, wantErr: []string{"a.yaml: document 2:"},
	}, {
		name: "a JSON stream of objects and a List",
		files: map[string]string{"a.json": `{"apiVersion":"v1","kind":"PersistentVolume","metadata":{"name":"one"}}
{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":"c"}},
 {"apiVersion":"storage.k8s.io/v1","kind":"StorageClass","metadata":{"name":"fast"},"provisioner":"x"}]}`},
		want: []string{"pv/one", "pvc/default/c", "sc/fast"},
	}, {
		name: "a List's items wherever they are; items that are not an array are none",
		files: map[string]string{"a.json": `{"items":[{"apiVersion":"v1","kind":"PersistentVolume","metadata":{"name":"before"}}],
 "apiVersion":"v1","kind":"PersistentVolumeList","metadata":{}}
{"apiVersion":"v1","kind":"List","items":{"apiVersion":"v1","kind":"PersistentVolume","metadata":{"name":"no"}}}
{"items":[{"apiVersion":"v1","kind":"PersistentVolume","metadata":{"name":"not-a-list"}}],"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}`},
		want: []string{"pv/before"},
	}, {
		// The apiserver refuses such a List, and so does the reader.
		name: "a List that repeats its items, or any other key, is refused whole",
		files: map[string]string{"a.json": `{"items":[{"apiVersion":"v1","kind":"PersistentVolume","metadata":{"name":"before"}}],
 "apiVersion":"v1","kind":"PersistentVolumeList","metadata":{},
 "items":[{"apiVersion":"v1","kind":"PersistentVolume","metadata":{"name":"after"}}]}
{"kind":"List","apiVersion":"v1","kind":"List","items":[]}`,
			"b.yaml": "apiVersion: v1\nkind: List\nmetadata: {}\nitems:\n" + yamlItem(pvYAML("one")) + "metadata: {}\n---\n" + pvYAML("kept")},
		want: []string{"pv/kept"},
		wantErr: []string{`a.json: document 1: PersistentVolumeList: duplicate field "items"`, `a.json: document 2: List: duplicate field "kind"`,
			`b.yaml: document 1: List: duplicate field "metadata"`},
	}, {
		name: "a key repeated in YAML is refused, naming the object and the field; the rest is read",
		files: map[string]string{"dup.yaml": "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: db, namespace: team-a}\nspec:\n" +
			"  volumeMode: Block\n  resources: {requests: {storage: 1Gi}}\n  volumeMode: Filesystem\n---\n" + pvYAML("after") +
			"---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: other-kinds-are-not-read}\ndata: {a: x, a: y}\n",
			"list.yaml": "apiVersion: v1\nkind: List\nitems:\n" + yamlItem(pvYAML("first")) +
				"- apiVersion: v1\n  kind: PersistentVolume\n  metadata:\n    name: second\n    labels: {a: x, b: y, a: z}\n" +
				yamlItem(pvYAML("third"))},
		want: []string{"pv/after", "pv/first", "pv/third"},
		wantErr: []string{`dup.yaml: document 1: PersistentVolumeClaim db: duplicate field "spec.volumeMode"`,
			`list.yaml: document 1: items[1]: PersistentVolume second: duplicate field "metadata.labels.a"`},
	}, {
		name: "a key repeated in JSON is refused the same way",
		files: map[string]string{"dup.json": `{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":"db"},"spec":{"volumeMode":"Block","volumeMode":"Filesystem"}}
{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"PersistentVolume","metadata":{"name":"a","name":"b"}},
 {"apiVersion":"v1","kind":"PersistentVolume","metadata":{"name":"c"}}]}
{"apiVersion":"v1","kind":"PersistentVolume","metadata":{"name":"d"},"metadata":{"name":"d"}}`},
		want: []string{"pv/c"},
		wantErr: []string{`dup.json: document 1: PersistentVolumeClaim db: duplicate field "spec.volumeMode"`,
			`dup.json: document 2: items[0]: PersistentVolume b: duplicate field "metadata.name"`,
			`dup.json: document 3: PersistentVolume d: duplicate field "metadata"`},
	}, {
		name:  "a key that overrides a merged one is no repeat",
		files: map[string]string{"merge.yaml": "apiVersion: v1\nkind: PersistentVolume\nmetadata:\n  name: merged\n  labels:\n    <<: {a: x, b: w}\n    a: z\n"},
		want:  []string{"pv/merged"},
	}, {
		name: "a List as kubectl prints it (items before kind) and objects with kind last",
		files: map[string]string{"k.json": `{"apiVersion":"v1","items":[{"metadata":{"name":"x"},"spec":{},"kind":"PersistentVolume","apiVersion":"v1"},
 {"metadata":{"name":"c","namespace":"n"},"kind":"PersistentVolumeClaim","apiVersion":"v1"}],"kind":"List","metadata":{"resourceVersion":""}}`},
		want: []string{"pv/x", "pvc/n/c"},
	}, {
		name:    "a document that is not an object, or whose kind is not a string",
		files:   map[string]string{"n.yaml": "[1, 2]\n---\napiVersion: v1\nkind: 7\nmetadata: {name: x}\n"},
		wantErr: []string{"n.yaml: document 1: reading apiVersion and kind: an array, not an object", "n.yaml: document 2: reading apiVersion and kind: kind is a number, not a string"},
	}, {
		name: "a bad item of a List is named and the other items load",
		files: map[string]string{"l.yaml": "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Node, metadata: {name: n1}}\n" +
			"- {apiVersion: v1, kind: Node, metadata: {name: n2}, spec: {unschedulable: maybe}}\n"},
		want: []string{"node/n1"}, wantErr: []string{"l.yaml: document 1: items[1]: Node n2:"},
	}, {
		name:    "an unknown field is refused, not dropped",
		files:   map[string]string{"u.yaml": "apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: u}\nspec:\n  claimRefs: {name: x}\n"},
		wantErr: []string{`u.yaml: document 1: PersistentVolume u: unknown field "spec.claimRefs"`},
	}, {
		name:    "field names are case-sensitive, as in the apiserver",
		files:   map[string]string{"c.yaml": "apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: c}\nSpec: {capacity: {storage: 1Gi}}\n"},
		wantErr: []string{`PersistentVolume c: unknown field "Spec"`},
	}, {
		name:    "a duplicate field is refused",
		files:   map[string]string{"d.json": `{"apiVersion":"v1","kind":"PersistentVolume","metadata":{"name":"d"},"spec":{"storageClassName":"a","storageClassName":"b"}}`},
		wantErr: []string{`PersistentVolume d: duplicate field "spec.storageClassName"`},
	}, {
		name: "a bad value is named by its field path",
		files: map[string]string{"v.yaml": "apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: q}\nspec: {capacity: {storage: lots}}\n---\n" +
			"apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: m}\nspec: {accessModes: [ReadWriteOnce, 5]}\n"},
		wantErr: []string{"v.yaml: document 1: PersistentVolume q: spec.capacity.storage: quantities must match",
			"v.yaml: document 2: PersistentVolumeClaim m: spec.accessModes[1]: a JSON number where"},
	}, {
		name:    "no kind, no name",
		files:   map[string]string{"k.yaml": "apiVersion: v1\nmetadata: {name: x}\n---\napiVersion: v1\nkind: PersistentVolume\nmetadata: {}\n"},
		wantErr: []string{"k.yaml: document 1: no kind", "k.yaml: document 2: PersistentVolume without metadata.name"},
	}, {
		name: "an audited kind in another version of its group, or with no apiVersion, is refused, not skipped",
		files: map[string]string{"o.yaml": "apiVersion: v2\nkind: PersistentVolume\nmetadata: {name: p}\n---\n" +
			"kind: PersistentVolumeClaim\nmetadata: {name: c}\n---\n" +
			"apiVersion: storage.k8s.io/v1beta1\nkind: StorageClass\nmetadata: {name: s}\n---\n" +
			"apiVersion: a/b/c\nkind: Node\nmetadata: {name: node-1}\n---\n" +
			"apiVersion: example.com/v1\nkind: PersistentVolume\nmetadata: {name: other-group}\n---\n" +
			"apiVersion: v1\nkind: StorageClass\nmetadata: {name: core-group}\n---\n" + pvYAML("kept")},
		want: []string{"pv/kept"},
		wantErr: []string{`o.yaml: document 1: PersistentVolume p: apiVersion "v2" is not read by pvguard (want v1)`,
			`o.yaml: document 2: PersistentVolumeClaim c: no apiVersion (want v1)`,
			`o.yaml: document 3: StorageClass s: apiVersion "storage.k8s.io/v1beta1" is not read by pvguard (want storage.k8s.io/v1)`,
			`o.yaml: document 4: Node node-1: apiVersion "a/b/c" is not read by pvguard (want v1)`,
			`o.yaml: document 6: StorageClass core-group: apiVersion "v1" is not read by pvguard (want storage.k8s.io/v1)`},
	}, {
		name: "other kinds, empty documents and other files are skipped",
		files: map[string]string{"a.yaml": "---\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n---\n" + pvYAML("kept"),
			"notes.txt": "not: [yaml", "b.json": "null"},
		want: []string{"pv/kept"},
	}, {
		name: "files load in walk order whatever the decoding order",
		files: func() map[string]string {
			m := map[string]string{}
			for i := range 40 {
				m[fmt.Sprintf("d%d/f%02d.yaml", i%3, i)] = pvYAML(fmt.Sprintf("v%02d", i))
			}
			return m
		}(),
		want: func() []string {
			var w []string
			for d := range 3 {
				for i := range 40 {
					if i%3 == d {
						w = append(w, fmt.Sprintf("pv/v%02d", i))
					}
				}
			}
			return w
		}(),
	}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := testobj.WriteFiles(t, tc.files)
			st, objects, errs := manifests.Load([]string{dir})
			got := manifests.ObjectNames(st)
			if !slices.Equal(got, tc.want) || objects != len(tc.want) {
				t.Errorf("loaded %d: %v, want %v", objects, got, tc.want)
			}
			if len(errs) != len(tc.wantErr) {
				t.Fatalf("errors %v, want %d matching %q", errs, len(tc.wantErr), tc.wantErr)
			}
			for i, e := range errs {
				if !strings.Contains(e.Error(), tc.wantErr[i]) || !strings.Contains(e.Error(), dir) {
					t.Errorf("error %d: %q, want the path and %q", i, e, tc.wantErr[i])
				}
			}
		})
	}
}

func TestLoadNamedFileAndMissingPath(t *testing.T) {
	dir := testobj.WriteFiles(t, map[string]string{"volumes.txt": pvYAML("named")})
	st, _, errs := manifests.Load([]string{filepath.Join(dir, "volumes.txt"), filepath.Join(dir, "absent")})
	if got := manifests.ObjectNames(st); !slices.Equal(got, []string{"pv/named"}) {
		t.Errorf("a file named directly is read whatever its extension: got %v", got)
	}
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "absent") {
		t.Errorf("errors %v, want one naming the missing path", errs)
	}
}

// TestLoadReadsTheReadableKinds: a document of a kind of clusterstate.Readables is read into the
// state's ListKind, one of another version of it is refused, and files without one give an empty
// list of it (the files are the whole truth), not a failure.
func TestLoadReadsTheReadableKinds(t *testing.T) {
	dir := testobj.WriteFiles(t, map[string]string{
		"a.yaml": "apiVersion: storage.k8s.io/v1\nkind: VolumeAttributesClass\nmetadata: {name: gold}\ndriverName: csi.example.com\n---\n" +
			"apiVersion: storage.k8s.io/v1beta1\nkind: VolumeAttributesClass\nmetadata: {name: beta}\ndriverName: csi.example.com\n",
		"b.yaml": pvYAML("one"),
	})
	st, objects, errs := manifests.Load([]string{dir})
	got, err := st.ListKind("VolumeAttributesClass")
	if err != nil || len(got) != 1 || got[0].(*storagev1.VolumeAttributesClass).Name != "gold" || objects != 2 {
		t.Errorf("VolumeAttributesClasses %v (%v) among %d objects, want gold among 2", got, err, objects)
	}
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), `apiVersion "storage.k8s.io/v1beta1" is not read by pvguard (want storage.k8s.io/v1)`) {
		t.Errorf("errors %v, want the v1beta1 class refused", errs)
	}
	st, _, _ = manifests.Load([]string{filepath.Join(dir, "b.yaml")})
	if got, err := st.ListKind("VolumeAttributesClass"); err != nil || len(got) != 0 {
		t.Errorf("files without a VolumeAttributesClass: %v (%v), want an empty list", got, err)
	}
}
