package binder

import (
	"context"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/storage"
	"github.com/pvguard/pvguard/test/testobj"
)

// TestSyncsNeverChangeTheCachedObjects: the binder reads the cache's own objects (cachelist: the
// informers' stores, not even a copy of the top-level struct), so every change it makes must be
// to a copy of its own. Over a cluster that takes each kind of
// write (default class, provisioner annotation, bind, claim and volume status, unbind of a
// volume whose claim is gone, finalizers), every object the cache handed out must be as it was.
// A write made in place, even of a top-level field, would change the cache's object.
func TestSyncsNeverChangeTheCachedObjects(t *testing.T) {
	ctx := context.Background()
	fast := class("fast", "csi.example.com", storagev1.VolumeBindingImmediate)
	manual := class("manual", storage.NoProvisioner, storagev1.VolumeBindingImmediate)
	def := testobj.StorageClass("standard", "csi.example.com", testobj.DefaultClass)
	// Every object has an annotation, so that its map exists and is shared with what the cache
	// hands out (a nil map written to becomes the copy's own).
	note := testobj.Annotation("example.com/owner", "team-a")
	bound := testobj.PVC("ns", "bound", testobj.ClaimClass("manual"), testobj.Request("1Gi"), testobj.ClaimUID("u-bound"), testobj.ClaimMeta(note))
	objs := []client.Object{fast, manual, def,
		testobj.PVC("ns", "no-class", testobj.ClaimNoClass, testobj.Request("1Gi"), testobj.ClaimMeta(note)),
		testobj.PVC("ns", "provision", testobj.ClaimClass("fast"), testobj.Request("5Gi"), testobj.ClaimMeta(note)),
		testobj.PVC("ns", "static", testobj.ClaimClass("manual"), testobj.Request("1Gi"), testobj.ClaimUID("u-static"), testobj.ClaimMeta(note)),
		testobj.PV("pv-free", testobj.Class("manual"), testobj.Capacity("1Gi"), testobj.PVMeta(note)),
		bound,
		testobj.PV("pv-bound", testobj.Class("manual"), testobj.Capacity("1Gi"), testobj.ClaimRef("ns", "bound", "u-bound"), testobj.PVMeta(note)),
		testobj.PV("pv-orphan", testobj.Class("manual"), testobj.Capacity("1Gi"), testobj.Reclaim(corev1.PersistentVolumeReclaimRetain),
			testobj.ClaimRef("ns", "gone", "u-gone"), testobj.Phase(corev1.VolumeBound), testobj.PVMeta(note)),
	}
	bd, c := liveBinder(t, objs...)
	// The cache holds what the apiserver (here the fake) holds, resourceVersions included, so
	// that the writes go through rather than conflict.
	var held []client.Object
	for _, o := range objs {
		got := o.DeepCopyObject().(client.Object)
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), got); err != nil {
			t.Fatal(err)
		}
		held = append(held, got)
	}
	cache, err := newMemInformers(held...)
	if err != nil {
		t.Fatal(err)
	}
	bd.o.Cache = cache
	before := make([]runtime.Object, len(held))
	for i, o := range held {
		before[i] = o.DeepCopyObject()
	}

	writes := 0
	bd.o.BeforeWrite = func(string, client.Object) error { writes++; return nil }
	for range 3 {
		if err := bd.runPlan(ctx); err != nil {
			t.Fatal(err)
		}
		for _, o := range held {
			switch o.(type) {
			case *corev1.PersistentVolumeClaim:
				_ = bd.syncClaim(ctx, o.GetNamespace(), o.GetName()) // conflicts after the first write are expected
			case *corev1.PersistentVolume:
				_ = bd.syncVolume(ctx, o.GetName())
			}
		}
	}
	if writes < 5 {
		t.Fatalf("the syncs made %d writes: the cluster no longer exercises the binder's writes", writes)
	}
	for i, o := range held {
		if !reflect.DeepEqual(o, before[i]) {
			t.Errorf("%T %s changed in the cache:\nnow  %+v\nwas  %+v", o, o.GetName(), o, before[i])
		}
	}
}

// TestSyncOfABoundPairReservesNothing: every sync of a bound claim decides its bind again; with
// nothing to write, the volume must not be reserved, or plans and explanations see a bind in
// flight long after it ended (an explanation would say RESERVED about a volume bound long ago).
func TestSyncOfABoundPairReservesNothing(t *testing.T) {
	ctx := context.Background()
	manual := class("manual", storage.NoProvisioner, storagev1.VolumeBindingImmediate)
	claim := testobj.PVC("ns", "c", testobj.ClaimClass("manual"), testobj.Request("1Gi"), testobj.ClaimUID("u-c"), testobj.ClaimBoundTo("pv-1"))
	pv := testobj.PV("pv-1", testobj.Class("manual"), testobj.Capacity("1Gi"), testobj.BoundTo(claim))
	testobj.ClaimBoundStatus(pv)(claim)
	bd, _ := liveBinder(t, manual, claim, pv)
	writes := 0
	bd.o.BeforeWrite = func(string, client.Object) error { writes++; return nil }
	if err := bd.syncClaim(ctx, "ns", "c"); err != nil {
		t.Fatal(err)
	}
	if writes != 0 {
		t.Fatalf("the sync of a bound pair wrote %d times", writes)
	}
	if owner, ok := bd.ledger.snapshot(time.Now()).Reserved["pv-1"]; ok {
		t.Errorf("pv-1 is reserved for %s after a sync of its bound claim", owner)
	}
}
