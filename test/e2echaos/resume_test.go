package e2echaos

import (
	"context"
	"testing"
	"time"

	"github.com/pvguard/pvguard/internal/cli"
	"github.com/pvguard/pvguard/test/harness"
	"github.com/pvguard/pvguard/test/testobj"
)

// TestCrashedBindResumesOnItsVolume: a binder died after the first bind write (the volume holds
// the claim's uid, phase still Available); a fresh binder must complete that binding rather than
// give the claim a second volume.
func TestCrashedBindResumesOnItsVolume(t *testing.T) {
	h := cluster(t)
	ctx := context.Background()
	ns := harness.Namespace(t, admin(t), "")
	c := admin(t)
	class := ns
	claim := harness.FreshPVC(testobj.PVC(ns, "data", testobj.ClaimClass(class)))
	harness.Must(t, c.Create(ctx, claim), "creating claim")
	held, smaller := ns+"-held", ns+"-smaller"
	harness.Must(t, c.Create(ctx, testobj.PV(smaller, testobj.Class(class), testobj.Capacity("1Gi"))), "creating volume")
	v := testobj.PV(held, testobj.Class(class), testobj.Capacity("2Gi"), testobj.ClaimRef(ns, "data", string(claim.UID)),
		testobj.PVMeta(testobj.Annotation(annBoundByController, "yes")))
	harness.Must(t, seed(t).Create(ctx, v), "creating the half-bound volume")
	v.Status.Phase = "Available"
	harness.Must(t, seed(t).Status().Update(ctx, v), "marking it Available")
	inst, err := h.Serve(func(o *cli.ServeFlags) {
		o.Binder.Mode, o.Binder.Resync, o.Audit.Interval, o.LeaderElection.Elect = "active", time.Second, 0, false
	})
	harness.Must(t, err, "starting binder")
	t.Cleanup(func() { _ = inst.Stop() })
	harness.WaitFor(t, time.Minute, "the claim bound to the volume that holds it", harness.BoundTo(admin(t), ns, "data", held))
}
