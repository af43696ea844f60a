package binder

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/pvguard/pvguard/test/testobj"
)

// TestNoWriteWithoutTheLease: with the write guard failing (the Lease no longer provably held),
// a sync that would bind writes nothing, and says why.
func TestNoWriteWithoutTheLease(t *testing.T) {
	ctx := context.Background()
	manual := class("manual", noProvisioner, storagev1.VolumeBindingImmediate)
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
	if got := get(t, c, &corev1.PersistentVolumeClaim{}, "ns", "c"); got.Annotations[annBindCompleted] != "" {
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
