package policy_test

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvguard/pvguard/clusterstate"
	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/test/testobj"
)

// nobody may read nothing: every reference is rendered as what it is, never by name.
type nobody struct{}

func (nobody) Names(policy.ObjectRef) bool                 { return false }
func (nobody) Reads(policy.ObjectRef) bool                 { return false }
func (nobody) UID(policy.ObjectRef, types.UID) bool        { return false }
func (n nobody) String(fs []policy.Finding) (out []string) { return render(fs, n) }

func render(fs []policy.Finding, a policy.Audience) []string {
	out := make([]string, 0, len(fs))
	for _, f := range fs {
		out = append(out, f.For(a))
	}
	return out
}

// checkRedaction is the property every finding's text must have: rendered for a reader who may
// read nothing, it does not depend on the names, namespaces or uids of the claims and volumes
// involved. The review is judged again over the same objects renamed (every claim's and volume's
// name and uid, every namespace but the reviewed claim's own); when the same rules find the same
// fields, their texts for nobody must be the same, word for word. A rule that puts a name in a
// Word, or in a Text's wording, fails here.
func checkRedaction(t *testing.T, e *policy.Engine, r *policy.Review, v *testobj.View) {
	t.Helper()
	if v == nil || v.State == nil {
		v = testobj.NewView()
	}
	d, err := e.Admit(r, v)
	if err != nil {
		return
	}
	found := allFindings(d)
	if len(found) == 0 {
		return
	}
	own := ""
	if r.PVC != nil {
		own = r.PVC.Namespace
	} else if r.OldPVC != nil {
		own = r.OldPVC.Namespace
	}
	rn := renamer(own, r, v.State)
	r2 := &policy.Review{Kind: r.Kind, Operation: r.Operation, SubResource: r.SubResource, User: r.User, DryRun: r.DryRun,
		PV: rename(rn, r.PV), OldPV: rename(rn, r.OldPV), PVC: rename(rn, r.PVC), OldPVC: rename(rn, r.OldPVC), SC: r.SC, OldSC: r.OldSC}
	var claims []*corev1.PersistentVolumeClaim
	var volumes []*corev1.PersistentVolume
	for _, c := range v.Claims() {
		claims = append(claims, rename(rn, c))
	}
	for _, pv := range v.Volumes() {
		volumes = append(volumes, rename(rn, pv))
	}
	d2, err := e.Admit(r2, &testobj.View{State: clusterstate.New(claims, volumes, v.Classes(), v.Nodes())})
	if err != nil {
		return
	}
	again := allFindings(d2)
	if !slices.EqualFunc(found, again, func(a, b policy.Finding) bool { return a.Rule == b.Rule && a.Field == b.Field }) {
		return // the names decide something (a grant that lists namespaces): not comparable
	}
	if a, b := (nobody{}).String(found), (nobody{}).String(again); !slices.Equal(a, b) {
		t.Errorf("a finding's text for a reader of nothing names an object:\n%s\n%s", strings.Join(a, "\n"), strings.Join(b, "\n"))
	}
}

// renamer maps each claim's and volume's name, each namespace but own and each uid of the review
// and the state to another.
func renamer(own string, r *policy.Review, s *clusterstate.State) map[string]string {
	m := map[string]string{}
	add := func(s string) {
		if s != "" && s != own {
			m[s] = s + "-renamed"
		}
	}
	meta := func(name, ns string, uid types.UID) {
		add(name)
		add(ns)
		add(string(uid))
	}
	ref := func(ref *corev1.ObjectReference) {
		if ref != nil {
			meta(ref.Name, ref.Namespace, ref.UID)
		}
	}
	// A name that is also a class's (or a node's) is left alone: renaming the class with it would
	// change what the rules find.
	keep := map[string]bool{}
	for _, pv := range append(slices.Clone(s.Volumes()), r.PV, r.OldPV) {
		if pv != nil {
			meta(pv.Name, "", pv.UID)
			ref(pv.Spec.ClaimRef)
			keep[pv.Spec.StorageClassName] = true
			if pv.Spec.VolumeAttributesClassName != nil {
				keep[*pv.Spec.VolumeAttributesClassName] = true
			}
		}
	}
	for _, c := range append(slices.Clone(s.Claims()), r.PVC, r.OldPVC) {
		if c != nil {
			meta(c.Name, c.Namespace, c.UID)
			add(c.Spec.VolumeName)
			if c.Spec.StorageClassName != nil {
				keep[*c.Spec.StorageClassName] = true
			}
			if c.Spec.VolumeAttributesClassName != nil {
				keep[*c.Spec.VolumeAttributesClassName] = true
			}
		}
	}
	for _, sc := range s.Classes() {
		keep[sc.Name] = true
	}
	for _, n := range s.Nodes() {
		keep[n.Name] = true
	}
	for k := range keep {
		delete(m, k)
	}
	return m
}

// rename is o with every JSON string value that m maps replaced.
func rename[T any](m map[string]string, o *T) *T {
	if o == nil {
		return nil
	}
	data, err := json.Marshal(o)
	if err != nil {
		panic(err)
	}
	var tree any
	if err := json.Unmarshal(data, &tree); err != nil {
		panic(err)
	}
	tree = renameTree(m, tree)
	if data, err = json.Marshal(tree); err != nil {
		panic(err)
	}
	out := new(T)
	if err := json.Unmarshal(data, out); err != nil {
		panic(err)
	}
	return out
}

func renameTree(m map[string]string, v any) any {
	switch t := v.(type) {
	case string:
		if s, ok := m[t]; ok {
			return s
		}
	case []any:
		for i := range t {
			t[i] = renameTree(m, t[i])
		}
	case map[string]any:
		for k, x := range t {
			t[k] = renameTree(m, x)
		}
	}
	return v
}

// TestTextRendersReferencesPerReader: a Text names a claim, a volume and a uid to a reader who may
// read them, and says what kind of object is in the way to one who may not.
func TestTextRendersReferencesPerReader(t *testing.T) {
	claim := policy.ObjectRef{Kind: policy.KindPersistentVolumeClaim, Namespace: "team-b", Name: "x"}
	vol := policy.ObjectRef{Kind: policy.KindPersistentVolume, Name: "pv-b"}
	txt := policy.Textf("%s is claimed by %s; not %s", vol, policy.WithUID(claim, "1234"), policy.UID(claim, "5678"))
	if got, want := txt.String(), "PersistentVolume pv-b is claimed by PersistentVolumeClaim team-b/x (uid 1234); not 5678"; got != want {
		t.Errorf("for everyone: %q, want %q", got, want)
	}
	if got, want := txt.For(nobody{}), "a volume you cannot read is claimed by a claim in another namespace; not a uid you cannot read"; got != want {
		t.Errorf("for nobody: %q, want %q", got, want)
	}
	either := policy.Textf("%s", policy.Either(claim, policy.Plain("it exists"), policy.Plain("it may exist")))
	if either.String() != "it exists" || either.For(nobody{}) != "it may exist" {
		t.Errorf("Either: %q for everyone, %q for nobody", either.String(), either.For(nobody{}))
	}
	if got := policy.Plain("100% sure").String(); got != "100% sure" {
		t.Errorf("Plain: %q", got)
	}
	data, err := json.Marshal(struct{ M policy.Text }{txt.Rendered(nobody{})})
	if err != nil || strings.Contains(string(data), "team-b") || strings.Contains(string(data), "1234") {
		t.Errorf("a Text rendered for nobody marshals as %s (%v)", data, err)
	}
}

// TestRedactRendersEveryText: Redact reaches Texts and ObjectRefs in nested structs, slices,
// maps and pointers.
func TestRedactRendersEveryText(t *testing.T) {
	claim := policy.ObjectRef{Kind: policy.KindPersistentVolumeClaim, Namespace: "team-b", Name: "x"}
	type inner struct {
		T   policy.Text
		Ref policy.ObjectRef
	}
	type answer struct {
		T     policy.Text
		P     *inner
		S     []inner
		M     map[string]inner
		F     []policy.Finding
		plain string
	}
	txt := policy.Textf("see %s", claim)
	a := answer{T: txt, P: &inner{T: txt, Ref: claim}, S: []inner{{T: txt}}, M: map[string]inner{"k": {T: txt, Ref: claim}},
		F: []policy.Finding{{Object: claim, Message: txt, Hint: txt}}, plain: "unexported"}
	policy.Redact(&a, nobody{})
	data, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "team-b") {
		t.Errorf("Redact left a name: %s", data)
	}
	if !reflect.DeepEqual(a.P.Ref, policy.ObjectRef{Kind: policy.KindPersistentVolumeClaim}) {
		t.Errorf("Redact left the reference %+v", a.P.Ref)
	}
}

// TestFindingsCarryReferencesOnlyAsTexts: a finding's fields that are not Texts or ObjectRefs
// carry no reference (the rule's identity, its action, a field path).
func TestFindingsCarryReferencesOnlyAsTexts(t *testing.T) {
	want := []string{"Finding.Rule", "Finding.Name", "Finding.Action", "Finding.Field"}
	if got := policy.PlainFields(reflect.TypeFor[policy.Finding]()); !slices.Equal(got, want) {
		t.Errorf("the plain fields of a Finding are %q, want the reviewed %q: a field that may name an object must be a policy.Text", got, want)
	}
}
