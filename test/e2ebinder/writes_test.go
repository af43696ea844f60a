package e2ebinder

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/internal/cli"
	"github.com/pvguard/pvguard/test/harness"
	"github.com/pvguard/pvguard/test/testobj"
)

// TestNewVolumesMarkedAvailable: volumes created while no binder ran are Pending, and the binder
// marks each free one Available at once, as upstream's syncVolume does: kube-scheduler's volume
// binding considers Available volumes only, so a volume left Pending is invisible to
// WaitForFirstConsumer claims. The planner also counts Pending volumes, so a claim created with
// its volume is bound without a "no persistent volumes available" event, and a volume whose bind
// is already in flight is written Bound directly.
func TestNewVolumesMarkedAvailable(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t, admin(t), "")
	c := admin(t)
	const pairs = 5
	for i := range pairs {
		size := fmt.Sprintf("%dMi", i+1)
		harness.Must(t, c.Create(ctx, fresh(ns, testobj.PV(fmt.Sprintf("%s-pv-%d", ns, i), testobj.Capacity(size)))), "creating volume")
		harness.Must(t, c.Create(ctx, freshClaim(testobj.PVC(ns, fmt.Sprintf("c-%d", i), testobj.Request(size)))), "creating claim")
	}
	// The spare is in another class: no claim can take it.
	spare := ns + "-spare"
	sparePV := fresh(ns, testobj.PV(spare))
	sparePV.Spec.StorageClassName = ns + "-other"
	harness.Must(t, c.Create(ctx, sparePV), "creating the spare volume")
	// The blocked volume is given to a claim whose binding cannot be written (its first write is
	// refused): it must be Available all the same, not held Pending for as long as a plan gives
	// it to a claim.
	blocked := ns + "-blocked"
	blockedPV := fresh(ns, testobj.PV(blocked))
	blockedPV.Spec.StorageClassName = ns + "-blocked"
	harness.Must(t, c.Create(ctx, blockedPV), "creating the blocked volume")
	blockedClaim := freshClaim(testobj.PVC(ns, "blocked"))
	class := ns + "-blocked"
	blockedClaim.Spec.StorageClassName = &class
	harness.Must(t, c.Create(ctx, blockedClaim), "creating the blocked claim")
	if pv := harness.GetPV(t, admin(t), spare); !isPendingPhase(pv.Status.Phase) {
		t.Fatalf("a new volume is %q before any binder ran; the test needs Pending", pv.Status.Phase)
	}

	var log writeLog
	record := log.hook("a")
	startBinderWith(t, "active", cli.BinderHooks{
		BeforeWrite: func(op string, obj client.Object) error {
			if err := record(op, obj); err != nil {
				return err
			}
			if op == "bind-1-volume-spec" && obj.GetName() == blocked {
				return errors.New("refused by the test")
			}
			return nil
		},
	}, nil)
	for i := range pairs {
		pv := fmt.Sprintf("%s-pv-%d", ns, i)
		harness.WaitFor(t, time.Minute, "claim bound", harness.BoundTo(admin(t), ns, fmt.Sprintf("c-%d", i), pv))
	}
	for _, name := range []string{spare, blocked} {
		harness.WaitFor(t, time.Minute, name+" Available", func(context.Context) (bool, error) {
			return harness.GetPV(t, admin(t), name).Status.Phase == corev1.VolumeAvailable, nil
		})
	}
	if log.count("bind-1-volume-spec /"+blocked) == 0 {
		t.Errorf("the blocked volume was never given to its claim; the test needs the plan to give it")
	}
	for i := range pairs {
		pv, claim := fmt.Sprintf("/%s-pv-%d", ns, i), fmt.Sprintf("%s/c-%d", ns, i)
		for _, w := range []string{"bind-1-volume-spec " + pv, "bind-2-volume-status " + pv, "bind-3-claim-spec " + claim, "bind-4-claim-status " + claim} {
			if n := log.count(w); n != 1 {
				t.Errorf("%s: %d writes, want 1", w, n)
			}
		}
		if n := log.count("volume-status " + pv); n > 1 {
			t.Errorf("volume %s was marked Available %d times", pv, n)
		}
		if reasons := harness.EventReasons(t, admin(t), ns, fmt.Sprintf("c-%d", i)); slices.Contains(reasons, "FailedBinding") {
			t.Errorf("claim c-%d got FailedBinding events although a volume was waiting for it: %v", i, reasons)
		}
	}
	for _, name := range []string{spare, blocked} {
		if n := log.count("volume-status /" + name); n != 1 {
			t.Errorf("%s: %d Available writes, want 1", name, n)
		}
	}
}

func isPendingPhase(p corev1.PersistentVolumePhase) bool {
	return p == "" || p == corev1.VolumePending
}

// TestPreboundClaimBindNotRacedByVolumeSync: a claim that names a free volume (spec.volumeName)
// is bound with the four writes and nothing else. Found by test/e2ecluster: the bind's first
// write (the volume's claimRef) wakes the volume's own sync, which sees a claim already naming
// the volume and writes the volume's status Bound itself, racing the bind's second write of the
// same status on the same object; one of the two lost with a 409 (a wasted request and a retry).
// The bind is slowed between its first and second write here so that the volume sync always
// runs in between.
func TestPreboundClaimBindNotRacedByVolumeSync(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t, admin(t), "")
	c := admin(t)
	name := ns + "-named"
	var log writeLog
	record := log.hook("a")
	inst := startBinderWith(t, "active", cli.BinderHooks{
		BeforeWrite: func(op string, obj client.Object) error {
			if err := record(op, obj); err != nil {
				return err
			}
			if op == "bind-2-volume-status" && obj.GetName() == name {
				time.Sleep(time.Second)
			}
			return nil
		},
	}, nil)
	harness.Must(t, c.Create(ctx, fresh(ns, testobj.PV(name, testobj.PVMeta(testobj.Annotation("pvguard.io/allowed-namespaces", ns))))), "creating volume")
	harness.WaitFor(t, time.Minute, name+" Available", func(context.Context) (bool, error) {
		return harness.GetPV(t, admin(t), name).Status.Phase == corev1.VolumeAvailable, nil
	})
	errorsBefore := metricValue(t, inst, "pvguard_binder_errors_total")
	harness.Must(t, c.Create(ctx, freshClaim(testobj.PVC(ns, "wants-named", testobj.VolumeName(name)))), "creating claim naming the volume")
	harness.WaitFor(t, time.Minute, "named volume bound", harness.BoundTo(admin(t), ns, "wants-named", name))
	if n := log.count("volume-status /" + name); n != 1 {
		t.Errorf("volume %s: %d status writes outside the bind, want 1 (Available)", name, n)
	}
	if n := log.count("bind-2-volume-status /" + name); n != 1 {
		t.Errorf("volume %s: %d bind status writes, want 1", name, n)
	}
	if d := metricValue(t, inst, "pvguard_binder_errors_total") - errorsBefore; d != 0 {
		t.Errorf("%g binder errors while binding a pre-bound claim, want none", d)
	}
}
