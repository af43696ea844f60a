package manifests

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pvguard/pvguard/clusterstate"
)

// plainItems decodes a List's items as they were decoded before values were shared: each on
// its own, strictly, into its own maps and slices. Kinds the audit does not read are left out.
func plainItems(t testing.TB, js []byte) []metav1.Object {
	t.Helper()
	var list struct {
		Items []jsontext.Value `json:"items"`
	}
	// Only the first value: the readers are handed one document, and what follows is the next.
	if err := json.UnmarshalDecode(jsontext.NewDecoder(bytes.NewReader(js)), &list); err != nil {
		t.Fatalf("reading the List: %v", err)
	}
	var objs []metav1.Object
	for i, item := range list.Items {
		var tm metav1.TypeMeta
		if err := json.Unmarshal(item, &tm); err != nil {
			t.Fatalf("items[%d]: %v", i, err)
		}
		obj := newObject(tm.APIVersion, tm.Kind)
		if obj == nil {
			continue
		}
		if err := json.Unmarshal(item, obj, strict); err != nil {
			t.Fatalf("items[%d]: %v", i, err)
		}
		if c, ok := obj.(*corev1.PersistentVolumeClaim); ok && c.Namespace == "" {
			c.Namespace = "default"
		}
		objs = append(objs, obj)
	}
	return objs
}

// stateObjects lists a state's objects: classes, nodes, volumes, claims.
func stateObjects(s *clusterstate.State) []metav1.Object {
	var objs []metav1.Object
	for _, o := range s.Classes() {
		objs = append(objs, o)
	}
	for _, o := range s.Nodes() {
		objs = append(objs, o)
	}
	for _, o := range s.Volumes() {
		objs = append(objs, o)
	}
	for _, o := range s.Claims() {
		objs = append(objs, o)
	}
	return objs
}

// objectNames names a state's objects (pv/NAME, pvc/NAMESPACE/NAME, sc/NAME, node/NAME) in the
// order the audit sees them: volumes, claims, classes, nodes.
func objectNames(s *clusterstate.State) []string {
	var out []string
	for _, v := range s.Volumes() {
		out = append(out, "pv/"+v.Name)
	}
	for _, c := range s.Claims() {
		out = append(out, "pvc/"+c.Namespace+"/"+c.Name)
	}
	for _, sc := range s.Classes() {
		out = append(out, "sc/"+sc.Name)
	}
	for _, n := range s.Nodes() {
		out = append(out, "node/"+n.Name)
	}
	return out
}

// readList reads a JSON List with d, as Load reads each of its items.
func readList(t testing.TB, d *decoder, js string) *clusterstate.State {
	t.Helper()
	objs, err := d.readAll(item{js: []byte(js)})
	if err != nil {
		t.Fatal(err)
	}
	var read lists
	read.keep(objs)
	return read.state()
}

// byKind orders objects as the state holds them (classes, nodes, volumes, claims), each kind in
// the List's order.
func byKind(objs []metav1.Object) []metav1.Object {
	var out []metav1.Object
	for _, want := range []string{"*v1.StorageClass", "*v1.Node", "*v1.PersistentVolume", "*v1.PersistentVolumeClaim"} {
		for _, o := range objs {
			if fmt.Sprintf("%T", o) == want {
				out = append(out, o)
			}
		}
	}
	return out
}

// TestSharedValuesDecodeAsWithout holds the shared decode to the plain one: every object the
// List readers make, with repeats shared, equals the object decoded on its own. The documents
// are the generator's Lists and Lists whose shared values are odd (null, empty, reordered, deep).
func TestSharedValuesDecodeAsWithout(t *testing.T) {
	pv := func(name, extra string) string {
		return `{"apiVersion":"v1","kind":"PersistentVolume","metadata":{"name":"` + name + `"` + extra + `}}`
	}
	claim := func(name, spec string) string {
		return `{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":"` + name + `"},"spec":` + spec + `}`
	}
	list := func(items ...string) string {
		return `{"apiVersion":"v1","kind":"List","items":[` + strings.Join(items, ",") + `]}`
	}
	affinity := `{"required":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"k","operator":"In","values":["a","b"]}]}]}}`
	docs := []string{
		list(
			pv("a", `,"labels":{"x":"1","y":"2"}`), pv("b", `,"labels":{"x":"1","y":"2"}`), pv("c", `,"labels":{"y":"2","x":"1"}`),
			pv("d", `,"labels":null`), pv("e", `,"labels":{}`), pv("f", `,"labels":{}`), pv("g", `,"labels":null`),
			pv("h", `,"annotations":{"x":"1","y":"2"}`), pv("i", `,"finalizers":["f"],"labels":{"f":"f"}`),
		),
		list(
			claim("a", `{"resources":{"requests":{"storage":"1Gi"}},"accessModes":["ReadWriteOnce"]}`),
			claim("b", `{"resources":{"requests":{"storage":"1Gi"}},"accessModes":["ReadWriteOnce"]}`),
			claim("c", `{"resources":{"requests":{"storage":"1024Mi"}},"accessModes":["ReadWriteOnce","ReadOnlyMany"]}`),
			claim("d", `{"resources":{"requests":null,"limits":{}},"accessModes":null}`),
			claim("e", `{"resources":{"requests":{}},"accessModes":[]}`),
			claim("f", `{"resources":{"requests":{"storage":"1e3"}},"accessModes":[]}`),
		),
		list(
			`{"apiVersion":"v1","kind":"PersistentVolume","metadata":{"name":"l1"},"spec":{"capacity":{"storage":"1Gi"},"nodeAffinity":`+affinity+`,"csi":{"driver":"d","volumeHandle":"h","volumeAttributes":{"a":"b"}}}}`,
			`{"apiVersion":"v1","kind":"PersistentVolume","metadata":{"name":"l2"},"spec":{"capacity":{"storage":"1Gi"},"nodeAffinity":`+affinity+`,"csi":{"driver":"d","volumeHandle":"i","volumeAttributes":{"a":"b"}}}}`,
			`{"apiVersion":"v1","kind":"PersistentVolume","metadata":{"name":"l3"},"spec":{"nodeAffinity":null}}`,
			`{"apiVersion":"storage.k8s.io/v1","kind":"StorageClass","metadata":{"name":"s","labels":{"a":"b"}},"provisioner":"p","parameters":{"a":"b"},"mountOptions":["f"]}`,
		),
	}
	for _, d := range listDocuments(t) {
		if d.want == nil {
			docs = append(docs, d.js) // the generator's
		}
	}
	// One decoder for all, as one goroutine's is for every document it reads.
	d := new(decoder)
	for i, js := range docs {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			want := byKind(plainItems(t, []byte(js)))
			got := stateObjects(readList(t, d, js))
			if len(got) != len(want) {
				t.Fatalf("%d objects, want %d", len(got), len(want))
			}
			for j := range got {
				if !reflect.DeepEqual(got[j], want[j]) {
					t.Errorf("%s decodes to\n%+v\nwithout sharing to\n%+v", want[j].GetName(), got[j], want[j])
				}
			}
		})
	}
}

// TestRepeatsAreShared checks that sharing happens: values repeated byte for byte are one copy,
// values that differ are not.
func TestRepeatsAreShared(t *testing.T) {
	item := func(name, labels, size, modes string) string {
		return `{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":"` + name + `","labels":` + labels +
			`},"spec":{"accessModes":` + modes + `,"resources":{"requests":{"storage":"` + size + `"}}}}`
	}
	js := `{"kind":"List","items":[` + strings.Join([]string{
		item("a", `{"app":"db"}`, "1Gi", `["ReadWriteOnce"]`),
		item("b", `{"app":"db"}`, "1Gi", `["ReadWriteOnce"]`),
		item("c", `{"app":"web"}`, "2Gi", `["ReadWriteMany"]`),
	}, ",") + `]}`
	st := readList(t, new(decoder), js)
	if len(st.Claims()) != 3 {
		t.Fatalf("%d claims, want 3", len(st.Claims()))
	}
	a, b, c := st.Claims()[0], st.Claims()[1], st.Claims()[2]
	same := func(x, y any) bool { return reflect.ValueOf(x).UnsafePointer() == reflect.ValueOf(y).UnsafePointer() }
	for _, tc := range []struct {
		what    string
		ab, ac  bool
		x, y, z any
	}{
		{"labels", true, false, a.Labels, b.Labels, c.Labels},
		{"requests", true, false, a.Spec.Resources.Requests, b.Spec.Resources.Requests, c.Spec.Resources.Requests},
		{"access modes", true, false, a.Spec.AccessModes, b.Spec.AccessModes, c.Spec.AccessModes},
	} {
		if got := same(tc.x, tc.y); got != tc.ab {
			t.Errorf("%s of a and b shared: %v, want %v", tc.what, got, tc.ab)
		}
		if got := same(tc.x, tc.z); got != tc.ac {
			t.Errorf("%s of a and c shared: %v, want %v", tc.what, got, tc.ac)
		}
	}
}

// TestSharedValueErrorsNameTheField: an error inside a value that would be shared names the
// object's field, as it did before values were shared.
func TestSharedValueErrorsNameTheField(t *testing.T) {
	for _, tc := range []struct {
		name, js, want string
	}{
		{"a number label", `{"apiVersion":"v1","kind":"PersistentVolume","metadata":{"name":"a","labels":{"x":1}}}`,
			`PersistentVolume a: metadata.labels.x: a JSON number where string was expected`},
		{"a duplicate label", `{"apiVersion":"v1","kind":"PersistentVolume","metadata":{"name":"a","labels":{"x":"1","x":"2"}}}`,
			`PersistentVolume a: duplicate field "metadata.labels.x"`},
		{"a bad size", `{"apiVersion":"v1","kind":"PersistentVolume","metadata":{"name":"a"},"spec":{"capacity":{"storage":"lots"}}}`,
			`PersistentVolume a: spec.capacity.storage: quantities must match the regular expression`},
		{"access modes not a list", `{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":"a"},"spec":{"accessModes":"ReadWriteOnce"}}`,
			`PersistentVolumeClaim a: spec.accessModes: a JSON string where []v1.PersistentVolumeAccessMode was expected`},
		{"an unknown field in node affinity", `{"apiVersion":"v1","kind":"PersistentVolume","metadata":{"name":"a"},"spec":{"nodeAffinity":{"requird":{}}}}`,
			`PersistentVolume a: unknown field "spec.nodeAffinity.requird"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := new(decoder)
			_, err := d.readAll(item{js: []byte(tc.js)})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
			// The same item again, after a clean one has filled the tables.
			clean := strings.NewReplacer(`"x":1`, `"x":"1"`, `,"x":"2"`, ``, `"lots"`, `"1Gi"`, `"ReadWriteOnce"`, `["ReadWriteOnce"]`, `"requird"`, `"required"`).Replace(tc.js)
			if _, err := d.readAll(item{js: []byte(clean)}); err != nil {
				t.Fatalf("the clean item: %v", err)
			}
			if _, err := d.readAll(item{js: []byte(tc.js)}); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("after a clean item, error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// TestSharedTablesStayWithinBudget: unique values do not grow a table past its budget, and a
// table that started over still decodes repeats as before.
func TestSharedTablesStayWithinBudget(t *testing.T) {
	d := new(decoder)
	volume := func(i int) item {
		return item{js: fmt.Appendf(nil, `{"apiVersion":"v1","kind":"PersistentVolume","metadata":{"name":"v%d","labels":{"unique":"%0100d"}}}`, i, i)}
	}
	const n = 2 * sharedBudget / 100
	var objs []metav1.Object
	for i := range n + 1 {
		got, err := d.readAll(volume(i % n))
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, got...)
		if got := len(d.shared.strings); got*100 > sharedBudget {
			t.Fatalf("after %d unique label sets the table holds %d (%d bytes and more)", i+1, got, got*100)
		}
	}
	first, again := objs[0], objs[n]
	if !reflect.DeepEqual(first, again) {
		t.Fatalf("the first item decoded again, after the table started over, differs:\n%+v\n%+v", first, again)
	}
}
