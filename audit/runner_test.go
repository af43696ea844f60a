package audit_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/pvguard/pvguard/audit"
	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/test/testobj"
)

// TestMissingObjectsAreConfirmedLive: the cache lacks a claim and a volume that exist in the
// apiserver; the audit must not report them as gone. Objects missing from both are reported.
func TestMissingObjectsAreConfirmedLive(t *testing.T) {
	late := testobj.PVC("team-a", "late", testobj.ClaimUID("u-late"))
	gone := testobj.PV("pv-gone-claim", testobj.ClaimRef("team-a", "gone", "u-gone"), testobj.Phase(corev1.VolumeBound))
	stale := testobj.PV("pv-stale", testobj.ClaimRef("team-a", "late", "u-late"), testobj.Phase(corev1.VolumeBound))
	boundToLate := testobj.PVC("team-b", "c", testobj.ClaimBoundTo("pv-late"))
	boundToGone := testobj.PVC("team-b", "d", testobj.ClaimBoundTo("pv-nowhere"))
	lateVolume := testobj.PV("pv-late", testobj.BoundTo(boundToLate))

	cached := fake.NewClientBuilder().WithObjects(gone.DeepCopy(), stale.DeepCopy(), boundToLate.DeepCopy(), boundToGone.DeepCopy()).Build()
	live := fake.NewClientBuilder().WithObjects(gone.DeepCopy(), stale.DeepCopy(), boundToLate.DeepCopy(), boundToGone.DeepCopy(), late.DeepCopy(), lateVolume.DeepCopy()).Build()

	r := audit.NewRunner(audit.Options{
		Cache: cached, Live: live, Engine: func() *policy.Engine { return policy.NewEngine(nil) },
		Log: logr.Discard(), Now: func() time.Time { return time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC) },
	})
	if err := r.RunOnce(context.Background()); err != nil {
		t.Fatalf("RunOnce: %v", err)
	}
	got := map[string]bool{}
	for _, f := range r.Latest().Findings {
		if f.Rule == "PVG020" || f.Rule == "PVG021" {
			got[f.Rule+" "+f.Namespace+"/"+f.Object] = true
		}
	}
	want := map[string]bool{"PVG020 /pv-gone-claim": true, "PVG021 team-b/d": true}
	for k := range want {
		if !got[k] {
			t.Errorf("missing finding %s (got %v)", k, got)
		}
	}
	for k := range got {
		if !want[k] {
			t.Errorf("reported %s on the cache's word alone", k)
		}
	}
}

// TestIncrementalAudit: between full audits only the objects reported as changed, and their
// neighbours, are judged again; a full audit picks up everything.
func TestIncrementalAudit(t *testing.T) {
	ctx := context.Background()
	claim := testobj.PVC("team-a", "data", testobj.ClaimUID("u-data"), testobj.ClaimBoundTo("pv-data"), testobj.ClaimPhase(corev1.ClaimBound))
	volume := testobj.PV("pv-data", testobj.BoundTo(claim), testobj.Phase(corev1.VolumeBound))
	c := fake.NewClientBuilder().WithObjects(claim.DeepCopy(), volume.DeepCopy()).WithStatusSubresource(&corev1.PersistentVolumeClaim{}, &corev1.PersistentVolume{}).Build()
	r := audit.NewRunner(audit.Options{Cache: c, Live: c, Engine: func() *policy.Engine { return policy.NewEngine(nil) }, Log: logr.Discard()})
	if err := r.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if f := r.Latest().Findings; len(f) != 0 || r.Latest().Summary.Objects != 2 {
		t.Fatalf("clean pair: %d objects, findings %+v", r.Latest().Summary.Objects, f)
	}

	// A change nobody reported is not seen by an incremental audit...
	unseen := testobj.PV("pv-unseen", testobj.Phase(corev1.VolumeFailed))
	if err := c.Create(ctx, unseen); err != nil {
		t.Fatal(err)
	}
	// ...while a reported one is, with its neighbour's binding row.
	lost := &corev1.PersistentVolumeClaim{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "data"}, lost); err != nil {
		t.Fatal(err)
	}
	lost.Status.Phase = corev1.ClaimLost
	if err := c.Status().Update(ctx, lost); err != nil {
		t.Fatal(err)
	}
	r.Changed(claim, lost)
	if err := r.RunPending(ctx); err != nil {
		t.Fatal(err)
	}
	rules := func() map[string]bool {
		got := map[string]bool{}
		for _, f := range r.Latest().Findings {
			got[f.Rule+" "+f.Object] = true
		}
		return got
	}
	if got := rules(); !got["PVG021 data"] || got["PVG024 pv-unseen"] || len(got) != 1 {
		t.Fatalf("after the claim changed: %v", got)
	}
	if b := r.Bindings(); len(b) != 1 || b[0].ClaimPhase != "Lost" {
		t.Fatalf("binding row of the neighbour not refreshed: %+v", b)
	}

	// Deleting the claim drops its findings and makes its volume's claimRef dangle.
	if err := c.Delete(ctx, lost); err != nil {
		t.Fatal(err)
	}
	r.Changed(lost)
	if err := r.RunPending(ctx); err != nil {
		t.Fatal(err)
	}
	if got := rules(); got["PVG021 data"] || !got["PVG020 pv-data"] || r.Latest().Summary.Objects != 1 {
		t.Fatalf("after the claim was deleted: %v over %d objects", got, r.Latest().Summary.Objects)
	}

	r.Trigger()
	if err := r.RunPending(ctx); err != nil {
		t.Fatal(err)
	}
	if got := rules(); !got["PVG024 pv-unseen"] || !got["PVG020 pv-data"] {
		t.Fatalf("the full audit missed something: %v", got)
	}
}
