package audit

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/test/testobj"
)

// TestBindingRows: a volume's binding row, as the runner keeps it (its fields) and makes it
// again, names the claim of its claimRef, whatever is known of it: a claimRef that names no
// claim, a claim without a phase yet, a claim re-created under the same name, none at all.
func TestBindingRows(t *testing.T) {
	fresh := testobj.PVC("team-a", "fresh", testobj.ClaimUID("u-fresh"), testobj.ClaimPhase(""))
	bound := testobj.PVC("team-a", "bound", testobj.ClaimUID("u-bound"), testobj.ClaimPhase(corev1.ClaimBound))
	v := testobj.NewView(fresh, bound)
	ref := func(ns, name string) *policy.ObjectRef {
		return &policy.ObjectRef{Kind: policy.KindPersistentVolumeClaim, Namespace: ns, Name: name}
	}
	for _, tc := range []struct {
		pv        *corev1.PersistentVolume
		ref       *policy.ObjectRef
		claim     string
		claimWord string // the claim's phase, as its readers read it
	}{
		{pv: testobj.PV("pv-free", testobj.Capacity("5Gi"))},
		{pv: testobj.PV("pv-noname", testobj.ClaimRef("team-a", "", "u-1")), ref: ref("team-a", ""), claim: "team-a/", claimWord: "missing"},
		{pv: testobj.PV("pv-nothing", testobj.ClaimRef("", "", "")), ref: ref("", ""), claim: "", claimWord: "missing"},
		{pv: testobj.PV("pv-fresh", testobj.ClaimRef("team-a", "fresh", "u-fresh")), ref: ref("team-a", "fresh"), claim: "team-a/fresh", claimWord: ""},
		{pv: testobj.PV("pv-bound", testobj.ClaimRef("team-a", "bound", "u-bound")), ref: ref("team-a", "bound"), claim: "team-a/bound", claimWord: "Bound"},
		{pv: testobj.PV("pv-recreated", testobj.ClaimRef("team-a", "bound", "u-old")), ref: ref("team-a", "bound"), claim: "team-a/bound", claimWord: "missing"},
	} {
		r, err := volumeRow(tc.pv, v)
		if err != nil {
			t.Fatalf("%s: %v", tc.pv.Name, err)
		}
		b := r.binding(tc.pv.Name)
		if b.Volume != tc.pv.Name || b.VolumePhase != string(tc.pv.Status.Phase) || b.ReclaimPolicy != string(tc.pv.Spec.PersistentVolumeReclaimPolicy) {
			t.Errorf("%s: row %+v", tc.pv.Name, b)
		}
		if q := tc.pv.Spec.Capacity[corev1.ResourceStorage]; b.Capacity != q.String() {
			t.Errorf("%s: capacity %q, want %q", tc.pv.Name, b.Capacity, q.String())
		}
		if !reflect.DeepEqual(b.ClaimRef, tc.ref) || b.Claim.String() != tc.claim || b.ClaimPhase.String() != tc.claimWord {
			t.Errorf("%s: claim %v %q in phase %q, want %v %q in phase %q", tc.pv.Name, b.ClaimRef, b.Claim.String(), b.ClaimPhase.String(), tc.ref, tc.claim, tc.claimWord)
		}
	}
}
