package binder

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/storage"
	"github.com/pvguard/pvguard/test/testobj"
)

// TestReservationEndsWhenItsClaimGoesElsewhere: a bind whose claim write fails (another writer
// changed the claim: a leader that woke from a freeze, an admin) keeps its reservation of the
// volume until the cache shows the pair. When that writer bound the claim to another volume
// instead, the pair never shows, and the reservation must still end: else no plan ever gives the
// volume to another claim, and it stays free while claims it fits wait.
func TestReservationEndsWhenItsClaimGoesElsewhere(t *testing.T) {
	ctx := context.Background()
	manual := class("manual", storage.NoProvisioner, storagev1.VolumeBindingImmediate)
	claim := testobj.PVC("ns", "c", testobj.ClaimClass("manual"), testobj.Request("1Gi"), testobj.ClaimUID("u-c"))
	pv1 := testobj.PV("pv-1", testobj.Class("manual"), testobj.Capacity("1Gi"), testobj.Phase(corev1.VolumeAvailable))
	pv2 := testobj.PV("pv-2", testobj.Class("manual"), testobj.Capacity("1Gi"), testobj.Phase(corev1.VolumeAvailable))
	cases := []struct {
		name string
		// elsewhere is what the other writer does to the claim after the failed bind.
		elsewhere func(t *testing.T, c client.Client)
	}{
		{"bound to another volume", func(t *testing.T, c client.Client) {
			bound := testobj.PVCWith(get(t, c, &corev1.PersistentVolumeClaim{}, "ns", "c"), testobj.ClaimBoundTo("pv-2"))
			if err := c.Update(ctx, bound); err != nil {
				t.Fatal(err)
			}
			v := testobj.PVWith(get(t, c, &corev1.PersistentVolume{}, "", "pv-2"), testobj.BoundTo(bound))
			if err := c.Update(ctx, v); err != nil {
				t.Fatal(err)
			}
		}},
		{"deleted", func(t *testing.T, c client.Client) {
			if err := c.Delete(ctx, get(t, c, &corev1.PersistentVolumeClaim{}, "ns", "c")); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bd, c := liveBinder(t, manual, claim.DeepCopy(), pv1.DeepCopy(), pv2.DeepCopy())
			conflict := errors.New("the claim changed under the bind")
			bd.o.BeforeWrite = func(op string, _ client.Object) error {
				if op == "bind-3-claim-spec" {
					return conflict
				}
				return nil
			}
			if err := bd.bind(ctx, get(t, c, &corev1.PersistentVolume{}, "", "pv-1"), get(t, c, &corev1.PersistentVolumeClaim{}, "ns", "c")); !errors.Is(err, conflict) {
				t.Fatalf("bind = %v, want the claim write to fail", err)
			}
			if _, ok := bd.ledger.snapshot(time.Now()).Reserved["pv-1"]; !ok {
				t.Fatal("the failed bind left no reservation: the test no longer sets up the case")
			}
			bd.o.BeforeWrite = nil
			tc.elsewhere(t, c)
			// The syncs that follow, as the cache's events bring them.
			for range 2 {
				if err := bd.syncClaim(ctx, "ns", "c"); err != nil {
					t.Fatal(err)
				}
				if err := bd.syncVolume(ctx, "pv-1"); err != nil {
					t.Fatal(err)
				}
			}
			if owner, ok := bd.ledger.snapshot(time.Now()).Reserved["pv-1"]; ok {
				t.Errorf("pv-1 is still reserved for %s, whose claim went elsewhere", owner)
			}
		})
	}
}

func get[T client.Object](t *testing.T, c client.Client, obj T, namespace, name string) T {
	t.Helper()
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, obj); err != nil {
		t.Fatal(err)
	}
	return obj
}

// TestPlanEntryEndsWhenItsClaimGoesElsewhere: the plan gave the only volume to one claim and
// none to the other, which waits for the next plan. When another writer binds the first claim to
// a volume of its own, or deletes it, the planned volume is free for the waiting claim: the
// binder must drop the stale entry and plan again, or the volume stays free while the other
// claim, planned on none, waits for a plan nothing asks for.
func TestPlanEntryEndsWhenItsClaimGoesElsewhere(t *testing.T) {
	ctx := context.Background()
	manual := class("manual", storage.NoProvisioner, storagev1.VolumeBindingImmediate)
	claims := []*corev1.PersistentVolumeClaim{
		testobj.PVC("ns", "a", testobj.ClaimClass("manual"), testobj.Request("1Gi"), testobj.ClaimUID("u-a")),
		testobj.PVC("ns", "b", testobj.ClaimClass("manual"), testobj.Request("1Gi"), testobj.ClaimUID("u-b")),
	}
	pv1 := testobj.PV("pv-1", testobj.Class("manual"), testobj.Capacity("1Gi"), testobj.Phase(corev1.VolumeAvailable))
	for _, elsewhere := range []string{"bound to another volume", "deleted"} {
		t.Run(elsewhere, func(t *testing.T) {
			bd, c := liveBinder(t, manual, claims[0].DeepCopy(), claims[1].DeepCopy(), pv1.DeepCopy())
			if err := bd.runPlan(ctx); err != nil {
				t.Fatal(err)
			}
			var taker, waiter *corev1.PersistentVolumeClaim
			for _, cl := range claims {
				if v, _ := bd.ledger.planned(cl.UID); v == "pv-1" {
					taker = cl
				} else {
					waiter = cl
				}
			}
			if taker == nil || waiter == nil {
				t.Fatal("the plan did not give pv-1 to one claim and none to the other: the test no longer sets up the case")
			}
			drainPlans(bd)
			switch elsewhere {
			case "bound to another volume":
				bound := testobj.PVCWith(get(t, c, &corev1.PersistentVolumeClaim{}, "ns", taker.Name), testobj.ClaimBoundTo("pv-2"))
				if err := c.Update(ctx, bound); err != nil {
					t.Fatal(err)
				}
				if err := c.Create(ctx, testobj.PV("pv-2", testobj.Class("manual"), testobj.Capacity("1Gi"), testobj.BoundTo(bound))); err != nil {
					t.Fatal(err)
				}
			case "deleted":
				if err := c.Delete(ctx, get(t, c, &corev1.PersistentVolumeClaim{}, "ns", taker.Name)); err != nil {
					t.Fatal(err)
				}
			}
			// The syncs the cache's events bring: the claim that went elsewhere, and the
			// waiting claim's resync.
			for _, name := range []string{taker.Name, waiter.Name} {
				if err := bd.syncClaim(ctx, "ns", name); err != nil {
					t.Fatal(err)
				}
			}
			if v, _ := bd.ledger.planned(taker.UID); v == "pv-1" {
				t.Errorf("the plan still gives pv-1 to %s, which went elsewhere", taker.Name)
			}
			time.Sleep(100 * time.Millisecond) // requestPlan enqueues after a short delay
			if bd.plans.Len() == 0 {
				t.Errorf("no plan was asked for: pv-1 stays free while %s, planned on none, waits", waiter.Name)
			}
		})
	}
}

// drainPlans empties the plan queue of what earlier steps asked for.
func drainPlans(b *Binder) {
	time.Sleep(100 * time.Millisecond)
	for b.plans.Len() > 0 {
		k, _ := b.plans.Get()
		b.plans.Done(k)
		b.plans.Forget(k)
	}
}
