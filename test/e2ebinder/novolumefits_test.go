package e2ebinder

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/binder"
	"github.com/pvguard/pvguard/internal/cli"
	"github.com/pvguard/pvguard/test/harness"
	"github.com/pvguard/pvguard/test/testobj"
)

// TestNoVolumeFits keeps a claim Pending on a kubernetes.io/no-provisioner class whose only
// volume is Filesystem while the claim asks for Block, with the event's delay at 1s, in active
// and shadow mode: exactly one NoVolumeFits warning appears, naming the volume and
// `Filesystem != Block`; over the next plans it stays one Event whose count grows; once a Block
// volume too small replaces it the message changes (a new Event), and in active mode a volume
// that fits ends the series.
func TestNoVolumeFits(t *testing.T) {
	for _, mode := range []binder.Mode{binder.ModeActive, binder.ModeShadow} {
		t.Run(string(mode), func(t *testing.T) { noVolumeFitsFlow(t, mode) })
	}
}

func noVolumeFitsFlow(t *testing.T, mode binder.Mode) {
	startBinder(t, mode, func(o *cli.ServeFlags) { o.Binder.NoVolumeFitsAfter = time.Second })
	ctx := context.Background()
	ns := harness.Namespace(t, admin(t), "")
	c := admin(t)
	harness.Must(t, c.Create(ctx, testobj.StorageClass(ns, "kubernetes.io/no-provisioner")), "creating class "+ns)
	t.Cleanup(func() { _ = c.Delete(ctx, testobj.StorageClass(ns, "")) })
	addVolume := func(name string, mods ...testobj.PVMod) {
		harness.Must(t, c.Create(ctx, fresh(ns, testobj.PV(name, mods...))), "creating volume "+name)
		t.Cleanup(func() { _ = c.Delete(ctx, testobj.PV(name)) })
		if mode == "shadow" {
			// No cluster binder runs here; in a cluster it would have marked the volume Available.
			pv := harness.GetPV(t, admin(t), name)
			pv.Status.Phase = corev1.VolumeAvailable
			harness.Must(t, c.Status().Update(ctx, pv), "marking volume "+name+" Available")
		}
	}
	// The volumes other tests leave behind are of other classes, and those being deleted (the
	// pv-protection finalizer stays: no kube-controller-manager) are not Available either: each
	// fails two checks or more, so ours, failing one, is the closest. 7Gi keeps leftovers that
	// fail only the class check rare.
	volume := ns + "-fs"
	addVolume(volume, testobj.Capacity("7Gi"))
	harness.Must(t, c.Create(ctx, freshClaim(testobj.PVC(ns, "data", testobj.ClaimVolumeMode(corev1.PersistentVolumeBlock), testobj.Request("7Gi")))), "creating claim data")

	// The first event: one Warning, naming the volume and what it lacks.
	var first corev1.Event
	var evs []corev1.Event
	harness.WaitFor(t, 30*time.Second, "a NoVolumeFits event on claim data", func(context.Context) (bool, error) {
		evs = noVolumeFitsEvents(t, ns, "data")
		return len(evs) > 0, nil
	})
	if len(evs) != 1 {
		t.Fatalf("NoVolumeFits events %v, want one", harness.DescribeEvents(evs))
	}
	first = evs[0]
	if first.Type != corev1.EventTypeWarning || first.Source.Component != "pvguard-binder" ||
		!strings.Contains(first.Message, "closest volume a volume you cannot read: ") || !strings.Contains(first.Message, "volumeMode Filesystem != Block") {
		t.Fatalf("NoVolumeFits %s from %q: %q; want a Warning from pvguard-binder saying the closest volume (%s, not the namespace's) is one it cannot read, and volumeMode Filesystem != Block", first.Type, first.Source.Component, first.Message, volume)
	}
	t.Logf("NoVolumeFits: %s", first.Message)

	// Further plans refresh it: still one Event, its count growing.
	harness.WaitFor(t, time.Minute, "the NoVolumeFits event's count to reach 3", func(context.Context) (bool, error) {
		evs = noVolumeFitsEvents(t, ns, "data")
		return len(evs) != 1 || evs[0].Name != first.Name || evs[0].Message != first.Message || evs[0].Count >= 3, nil
	})
	if len(evs) != 1 || evs[0].Name != first.Name || evs[0].Message != first.Message {
		t.Fatalf("NoVolumeFits events %v, want only %s, refreshed", harness.DescribeEvents(evs), first.Name)
	}
	t.Logf("refreshed: %s", harness.DescribeEvents(evs))

	// Another reason: the Filesystem volume gives way to a Block one that is too small (a
	// volume's mode cannot change). The message changes (a new Event); the old one keeps its
	// count.
	harness.Must(t, c.Delete(ctx, testobj.PV(volume)), "deleting volume "+volume)
	small := ns + "-small"
	addVolume(small, testobj.Capacity("5Gi"), testobj.VolumeMode(corev1.PersistentVolumeBlock))
	var second corev1.Event
	harness.WaitFor(t, 30*time.Second, "a NoVolumeFits event with the new reason", func(context.Context) (bool, error) {
		for _, e := range noVolumeFitsEvents(t, ns, "data") {
			if e.Name != first.Name {
				second = e
				return true, nil
			}
		}
		return false, nil
	})
	if !strings.Contains(second.Message, "closest volume a volume you cannot read: capacity 5Gi < 7Gi") {
		t.Fatalf("NoVolumeFits after the volume was replaced: %q; want %s: capacity 5Gi < 7Gi", second.Message, small)
	}
	t.Logf("NoVolumeFits: %s", second.Message)
	if mode != "active" {
		return
	}

	// A volume that fits: the claim binds and the series ends.
	fits := ns + "-block"
	addVolume(fits, testobj.Capacity("7Gi"), testobj.VolumeMode(corev1.PersistentVolumeBlock))
	harness.WaitFor(t, 30*time.Second, "claim data bound to "+fits, harness.BoundTo(admin(t), ns, "data", fits))
	count := func() int32 {
		var n int32
		for _, e := range noVolumeFitsEvents(t, ns, "data") {
			n += e.Count
		}
		return n
	}
	before := count()
	time.Sleep(3 * time.Second) // three delays, and plans at least every second (resync)
	if after := count(); after != before {
		t.Errorf("NoVolumeFits counts went from %d to %d after the claim was bound", before, after)
	}
}

// noVolumeFitsEvents lists the NoVolumeFits events on claim ns/name.
func noVolumeFitsEvents(t *testing.T, ns, name string) []corev1.Event {
	t.Helper()
	var list corev1.EventList
	harness.Must(t, admin(t).List(context.Background(), &list, client.InNamespace(ns)), "listing events")
	var out []corev1.Event
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == "PersistentVolumeClaim" && e.InvolvedObject.Name == name && e.Reason == "NoVolumeFits" {
			out = append(out, e)
		}
	}
	return out
}
