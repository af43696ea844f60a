package e2ebinder

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/pvguard/pvguard/storage"
	"github.com/pvguard/pvguard/test/harness"
	"github.com/pvguard/pvguard/test/testobj"
)

// TestBindKeepsWhatTheCacheDrops: the binder caches volumes and claims without the last-applied
// annotation and the status fields it does not read (storage.CacheShape), and its writes leave
// them on the server: after a bind (four writes from cached objects) the volume and the claim
// still carry the annotation, and the claim its condition.
func TestBindKeepsWhatTheCacheDrops(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t, admin(t), "")
	c := admin(t)
	applied := testobj.PVMeta(testobj.Annotation(storage.AnnLastApplied, `{"kind":"PersistentVolume","applied":"by kubectl"}`))
	pv := fresh(ns, testobj.PV(ns+"-pv", testobj.Capacity("1Gi"), applied))
	harness.Must(t, c.Create(ctx, pv), "creating volume")
	pvc := freshClaim(testobj.PVC(ns, "c", testobj.ClaimMeta(testobj.Annotation(storage.AnnLastApplied, `{"kind":"PersistentVolumeClaim"}`))))
	harness.Must(t, c.Create(ctx, pvc), "creating claim")
	pvc.Status.Conditions = []corev1.PersistentVolumeClaimCondition{{Type: "Unused", Status: corev1.ConditionTrue, Reason: "NoPodsUsingPVC"}}
	harness.Must(t, c.Status().Update(ctx, pvc), "writing the claim's condition")
	startBinder(t, "active", nil)
	harness.WaitFor(t, time.Minute, "claim bound", harness.BoundTo(admin(t), ns, "c", pv.Name))
	harness.WaitFor(t, time.Minute, "claim status Bound", func(context.Context) (bool, error) {
		return harness.GetPVC(t, admin(t), ns, "c").Status.Phase == corev1.ClaimBound, nil
	})
	gotPV, gotPVC := harness.GetPV(t, admin(t), pv.Name), harness.GetPVC(t, admin(t), ns, "c")
	if gotPV.Annotations[storage.AnnLastApplied] == "" || gotPVC.Annotations[storage.AnnLastApplied] == "" {
		t.Errorf("the bind erased the last-applied annotation: volume %v, claim %v", gotPV.Annotations, gotPVC.Annotations)
	}
	if len(gotPVC.Status.Conditions) != 1 || gotPVC.Status.Conditions[0].Type != "Unused" {
		t.Errorf("the bind erased the claim's conditions: %+v", gotPVC.Status.Conditions)
	}
	if gotPV.Status.Phase != corev1.VolumeBound {
		t.Errorf("volume phase %s, want Bound", gotPV.Status.Phase)
	}
}
