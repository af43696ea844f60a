package binder

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/test/testobj"
)

// TestPlanInstallKeepsBindsBegunWhileItRan: a plan runs without the ledger's lock, so a bind can
// begin between the plan's snapshot and its install. Here an earlier plan gave claim b the small
// volume and b's bind of it begins while a new plan, blind to that bind, gives the small volume to
// claim a and the large one to b. Installed as computed, a would be turned away from its volume
// and b, planned on a second volume while binding the first, could bind both if the first bind
// failed halfway. The install leaves both unplanned, their syncs write nothing and ask for a
// plan, and that plan, which sees the bind, gives b its volume and a the other.
func TestPlanInstallKeepsBindsBegunWhileItRan(t *testing.T) {
	ctx := context.Background()
	fast := class("fast", "csi.example.com", storagev1.VolumeBindingImmediate)
	a := testobj.PVC("ns", "a", testobj.ClaimClass("fast"), testobj.Request("1Gi"))
	b := testobj.PVC("ns", "b", testobj.ClaimClass("fast"), testobj.Request("1Gi"))
	small := testobj.PV("pv-small", testobj.Class("fast"), testobj.Capacity("1Gi"), testobj.Phase(corev1.VolumeAvailable))
	large := testobj.PV("pv-large", testobj.Class("fast"), testobj.Capacity("2Gi"), testobj.Phase(corev1.VolumeAvailable))
	bd, c := liveBinder(t, fast, a, b, small, large)

	// runPlan's steps, with b's bind beginning between the snapshot and the install.
	in, err := bd.planInput(ctx)
	if err != nil {
		t.Fatal(err)
	}
	reserve(bd, small.Name, b.UID)
	plan := Plan(in)
	if plan.Volumes[a.UID] != small.Name || plan.Volumes[b.UID] != large.Name {
		t.Fatalf("the plan blind to b's bind is %v: the test needs a on the small volume, b on the large", plan.Volumes)
	}
	if n := bd.ledger.install(plan.Volumes, in.InFlight, time.Now()); n != 2 {
		t.Errorf("install left %d claims unplanned, want 2", n)
	}
	for _, claim := range []*corev1.PersistentVolumeClaim{a, b} {
		if v, ok := bd.ledger.planned(claim.UID); ok {
			t.Errorf("claim %s planned on %q, against b's bind of the small volume", claim.Name, v)
		}
	}

	// Synced now, neither claim writes anything: each asks for a plan.
	versions := func() map[string]string {
		out := map[string]string{}
		for _, o := range []client.Object{a, b, small, large} {
			got := o.DeepCopyObject().(client.Object)
			if err := c.Get(ctx, client.ObjectKeyFromObject(o), got); err != nil {
				t.Fatal(err)
			}
			out[o.GetName()] = got.GetResourceVersion()
		}
		return out
	}
	before := versions()
	for _, claim := range []*corev1.PersistentVolumeClaim{a, b} {
		if err := bd.syncClaim(ctx, claim.Namespace, claim.Name); err != nil {
			t.Fatal(err)
		}
	}
	if after := versions(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("unplanned claims' syncs wrote: resourceVersions %v, were %v", after, before)
	}

	// The next plan sees the bind.
	if err := bd.runPlan(ctx); err != nil {
		t.Fatal(err)
	}
	if got := planned(bd, b.UID); got != small.Name {
		t.Errorf("claim b planned on %q, want the volume its bind is writing, %s", got, small.Name)
	}
	if got := planned(bd, a.UID); got != large.Name {
		t.Errorf("claim a planned on %q, want %s", got, large.Name)
	}
}

// TestConcurrentPlansAndBinds runs plans back to back while two workers sync claims, as the
// binder's workers do, so that binds begin and end while plans run (run it with -race). Every
// claim ends bound to a volume of its own.
func TestConcurrentPlansAndBinds(t *testing.T) {
	const n = 12
	var objs []client.Object
	for i := range n {
		objs = append(objs,
			testobj.PVC("ns", fmt.Sprintf("c-%02d", i), testobj.Request(fmt.Sprintf("%dGi", 1+i%3))),
			testobj.PV(fmt.Sprintf("pv-%02d", i), testobj.Capacity(fmt.Sprintf("%dGi", 1+i%3)), testobj.Phase(corev1.VolumeAvailable)))
	}
	b, c := liveBinder(t, objs...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := b.runPlan(ctx); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	bound := func(name string) bool {
		pvc := &corev1.PersistentVolumeClaim{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: name}, pvc); err != nil {
			t.Error(err)
			return true
		}
		return pvc.Spec.VolumeName != "" && pvc.Status.Phase == corev1.ClaimBound
	}
	var workers sync.WaitGroup
	for w := range 2 {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for i := w; i < n; i += 2 {
				name := fmt.Sprintf("c-%02d", i)
				for !bound(name) && ctx.Err() == nil {
					if err := b.syncClaim(ctx, "ns", name); err != nil && ctx.Err() == nil {
						t.Logf("claim sync: %v", err) // a conflict with a volume sync's write: retried
					}
					// The volumes' syncs settle reservations, as the informer's events would.
					for v := range n {
						if err := b.syncVolume(ctx, fmt.Sprintf("pv-%02d", v)); err != nil && ctx.Err() == nil {
							t.Logf("volume sync: %v", err) // a conflict with a bind's write: retried
						}
					}
				}
			}
		}()
	}
	workers.Wait()
	close(stop)
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatal("claims not bound in time")
	}

	holders := map[string]string{}
	for i := range n {
		pvc := getClaim(t, c, "ns", fmt.Sprintf("c-%02d", i))
		pv := getVolume(t, c, pvc.Spec.VolumeName)
		if ref := pv.Spec.ClaimRef; ref == nil || ref.Name != pvc.Name || ref.UID != pvc.UID {
			t.Errorf("claim %s bound to %s, whose claimRef is %v", pvc.Name, pv.Name, pv.Spec.ClaimRef)
		}
		if other, taken := holders[pv.Name]; taken {
			t.Errorf("volume %s bound to %s and %s", pv.Name, other, pvc.Name)
		}
		holders[pv.Name] = pvc.Name
	}
}
