package e2ebinder

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/pvguard/pvguard/cmd/pvguard/app"
	"github.com/pvguard/pvguard/test/testobj"
)

// TestPendingVolumesBoundWithoutAvailableWrite: volumes created while no binder ran are Pending.
// The binder gives the ones its plan assigns straight to their claims (Pending → Bound, four
// writes a pair, no "no volumes available" event), and marks only the rest Available.
func TestPendingVolumesBoundWithoutAvailableWrite(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	c := admin(t)
	const pairs = 5
	for i := range pairs {
		size := fmt.Sprintf("%dMi", i+1)
		must(t, c.Create(ctx, fresh(ns, testobj.PV(fmt.Sprintf("%s-pv-%d", ns, i), testobj.Capacity(size)))), "creating volume")
		must(t, c.Create(ctx, freshClaim(testobj.PVC(ns, fmt.Sprintf("c-%d", i), testobj.Request(size)))), "creating claim")
	}
	// The spare is in another class: no claim can take it.
	spare := ns + "-spare"
	sparePV := fresh(ns, testobj.PV(spare))
	sparePV.Spec.StorageClassName = ns + "-other"
	must(t, c.Create(ctx, sparePV), "creating the spare volume")
	if pv := getPV(t, spare); !isPendingPhase(pv.Status.Phase) {
		t.Fatalf("a new volume is %q before any binder ran; the test needs Pending", pv.Status.Phase)
	}

	var log writeLog
	startBinder(t, "active", func(o *app.ServeOptions) { o.BinderHooks.BeforeWrite = log.hook("a") })
	for i := range pairs {
		pv := fmt.Sprintf("%s-pv-%d", ns, i)
		waitFor(t, time.Minute, "claim bound", boundTo(ns, fmt.Sprintf("c-%d", i), pv))
	}
	waitFor(t, time.Minute, "the spare volume Available", func() (bool, error) {
		return getPV(t, spare).Status.Phase == corev1.VolumeAvailable, nil
	})
	for i := range pairs {
		pv, claim := fmt.Sprintf("/%s-pv-%d", ns, i), fmt.Sprintf("%s/c-%d", ns, i)
		for _, w := range []string{"bind-1-volume-spec " + pv, "bind-2-volume-status " + pv, "bind-3-claim-spec " + claim, "bind-4-claim-status " + claim} {
			if n := log.count(w); n != 1 {
				t.Errorf("%s: %d writes, want 1", w, n)
			}
		}
		if n := log.count("volume-status " + pv); n != 0 {
			t.Errorf("volume %s was marked Available before its bind (%d status writes)", pv, n)
		}
		if reasons := eventReasons(t, ns, fmt.Sprintf("c-%d", i)); slices.Contains(reasons, "FailedBinding") {
			t.Errorf("claim c-%d got FailedBinding events although a volume was waiting for it: %v", i, reasons)
		}
	}
	if n := log.count("volume-status /" + spare); n != 1 {
		t.Errorf("spare volume: %d Available writes, want 1", n)
	}
}

func isPendingPhase(p corev1.PersistentVolumePhase) bool {
	return p == "" || p == corev1.VolumePending
}
