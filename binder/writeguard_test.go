package binder

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/storage"
	"github.com/pvguard/pvguard/test/testobj"
)

// TestNoWriteWithoutTheLease: with the write guard failing (the Lease no longer provably held),
// a sync that would bind writes nothing, and says why.
func TestNoWriteWithoutTheLease(t *testing.T) {
	ctx := context.Background()
	manual := class("manual", storage.NoProvisioner, storagev1.VolumeBindingImmediate)
	claim := testobj.PVC("ns", "c", testobj.ClaimClass("manual"), testobj.Request("1Gi"), testobj.ClaimUID("u-c"), testobj.VolumeName("pv-1"))
	pv := testobj.PV("pv-1", testobj.Class("manual"), testobj.Capacity("1Gi"), testobj.Phase(corev1.VolumeAvailable))
	bd, c := liveBinder(t, manual, claim, pv)
	lost := errors.New("lease lost")
	asked := 0
	bd.o.WriteGuard = func() error { asked++; return lost }
	if err := bd.syncClaim(ctx, "ns", "c"); !errors.Is(err, lost) {
		t.Fatalf("syncClaim = %v, want the guard's error", err)
	}
	if asked == 0 {
		t.Fatal("the guard was not asked")
	}
	if got := get(t, c, &corev1.PersistentVolume{}, "", "pv-1"); got.Spec.ClaimRef != nil {
		t.Errorf("pv-1 was linked to %s/%s without the Lease", got.Spec.ClaimRef.Namespace, got.Spec.ClaimRef.Name)
	}
	if got := get(t, c, &corev1.PersistentVolumeClaim{}, "ns", "c"); got.Annotations[storage.AnnBindCompleted] != "" {
		t.Error("the claim was marked bind-completed without the Lease")
	}
	bd.o.WriteGuard = func() error { return nil }
	if err := bd.syncClaim(ctx, "ns", "c"); err != nil {
		t.Fatalf("syncClaim with the Lease: %v", err)
	}
	if got := get(t, c, &corev1.PersistentVolume{}, "", "pv-1"); got.Spec.ClaimRef == nil {
		t.Error("with the Lease held, the bind made no write")
	}
}

// TestDeniedPreBoundVolumeIsNotRetriedAtOnce: a volume pointed at a WaitForFirstConsumer claim
// that policy denies it is not bound again while the denial stands, plans in between included.
// Before, each sync tried the bind again and each denial woke the volume and then the claim, a
// loop that posted PolicyForbidsBinding about ten thousand times a second.
func TestDeniedPreBoundVolumeIsNotRetriedAtOnce(t *testing.T) {
	ctx := context.Background()
	local := class("local", storage.NoProvisioner, storagev1.VolumeBindingWaitForFirstConsumer)
	// The claim's pod went to node-a; the volume pointed at it lives on node-b (PVG009 denies).
	claim := testobj.PVC("ns", "c", testobj.ClaimClass("local"), testobj.Request("1Gi"), testobj.ClaimUID("u-c"),
		testobj.ClaimMeta(testobj.Annotation(storage.AnnSelectedNode, "node-a")))
	pv := testobj.PV("pv-1", testobj.Class("local"), testobj.Capacity("1Gi"), testobj.ClaimRef("ns", "c", "u-c"),
		testobj.NodeAffinity("kubernetes.io/hostname", "node-b"), testobj.Phase(corev1.VolumeAvailable))
	bd, _ := liveBinder(t, local, claim, pv)
	writes := 0
	bd.o.BeforeWrite = func(op string, _ client.Object) error {
		if strings.HasPrefix(op, "bind-") {
			writes++
		}
		return nil
	}
	for range 3 {
		if err := bd.syncClaim(ctx, "ns", "c"); err != nil {
			t.Fatal(err)
		}
		if err := bd.runPlan(ctx); err != nil {
			t.Fatal(err)
		}
	}
	denials := 0
	for len(bd.o.Recorder.(*record.FakeRecorder).Events) > 0 {
		if e := <-bd.o.Recorder.(*record.FakeRecorder).Events; strings.Contains(e, ReasonPolicyForbidsBinding) {
			denials++
		}
	}
	if denials != 1 || writes != 0 {
		t.Errorf("three syncs of a claim whose pre-bound volume policy denies: %d denials, %d bind writes; want 1 and 0", denials, writes)
	}
}
