package audit_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
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
