package e2echaos

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/internal/cli"
	"github.com/pvguard/pvguard/test/harness"
	"github.com/pvguard/pvguard/test/testobj"
)

// TestVolumeGrabDenyStillBindsPoolClaims is the regression test for the first bug the chaos test
// found: with volume-grab (PVG010) set to deny, as this suite's policy has it, the binder judged
// the claim half of a binding it chose itself against the volume as the cache had it (no
// claimRef yet), so PVG010 refused every binding of an unbound claim to a free volume
// (PolicyForbidsBinding), although the webhook admits each of the binder's four writes. A claim
// naming a volume it may not take must still be refused.
func TestVolumeGrabDenyStillBindsPoolClaims(t *testing.T) {
	h := cluster(t)
	ctx := context.Background()
	ns := harness.Namespace(t, admin(t), "")
	inst, err := h.Serve(func(o *cli.ServeFlags) {
		o.Binder.Mode, o.Binder.Resync, o.Audit.Interval, o.LeaderElection.Elect = "active", time.Second, 0, false
	})
	harness.Must(t, err, "starting binder")
	t.Cleanup(func() { _ = inst.Stop() })
	c := admin(t)
	class := ns
	pool, theirs := ns+"-pool", ns+"-theirs"
	harness.Must(t, c.Create(ctx, testobj.PV(pool, testobj.Class(class))), "creating a free volume")
	harness.Must(t, c.Create(ctx, harness.FreshPVC(testobj.PVC(ns, "wants-any", testobj.ClaimClass(class)))), "creating a claim")
	harness.Must(t, c.Create(ctx, testobj.PV(theirs, testobj.Class(class+"-other"))), "creating a volume nobody granted")
	harness.Must(t, seed(t).Create(ctx, harness.FreshPVC(testobj.PVC(ns, "grabs", testobj.ClaimClass(class+"-other"), testobj.VolumeName(theirs)))), "seeding a grabbing claim")

	harness.WaitFor(t, time.Minute, "the unbound claim bound to the free volume", func(context.Context) (bool, error) {
		pvc := &corev1.PersistentVolumeClaim{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "wants-any"}, pvc); err != nil {
			return false, err
		}
		if pvc.Spec.VolumeName == pool && pvc.Status.Phase == corev1.ClaimBound {
			return true, nil
		}
		if reasons := eventMessages(t, ns, "wants-any", "PolicyForbidsBinding"); len(reasons) > 0 {
			t.Fatalf("the binder refused a binding it chose itself: %s", reasons[0])
		}
		return false, nil
	})
	harness.WaitFor(t, time.Minute, "the grab refused", func(context.Context) (bool, error) {
		return len(eventMessages(t, ns, "grabs", "PolicyForbidsBinding")) > 0, nil
	})
	pv := &corev1.PersistentVolume{}
	harness.Must(t, c.Get(ctx, client.ObjectKey{Name: theirs}, pv), "reading the grabbed volume")
	if pv.Spec.ClaimRef != nil {
		t.Fatalf("the binder bound a claim to a volume it may not take: %v", pv.Spec.ClaimRef)
	}
}

// eventMessages lists the messages of the events of one reason recorded on an object.
func eventMessages(t *testing.T, ns, name, reason string) []string {
	t.Helper()
	var list corev1.EventList
	harness.Must(t, admin(t).List(context.Background(), &list, client.InNamespace(ns)), "listing events")
	var out []string
	for _, e := range list.Items {
		if e.InvolvedObject.Name == name && e.Reason == reason {
			out = append(out, strings.TrimSpace(e.Message))
		}
	}
	return out
}
