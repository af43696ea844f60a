package e2ecluster

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/pvguard/pvguard/test/cluster"
	"github.com/pvguard/pvguard/test/csiplugin"
	"github.com/pvguard/pvguard/test/harness"
)

// TestSnapshotRestoreAndClone is the snapshot flow: a claim provisioned by the real
// external-provisioner, used by a pod, with data written into its volume; a VolumeSnapshot of
// it, for which the real snapshot-controller makes the VolumeSnapshotContent and the real
// csi-snapshotter takes the snapshot in the plugin (the claim carries the snapshot-controller's
// source-protection finalizer meanwhile); a claim restored from the snapshot (dataSourceRef)
// and a clone of the first claim (dataSource), each provisioned and bound with its source's
// data (the source claim then carries the provisioner's cloning-protection finalizer, which the
// provisioner removes when the claim is deleted and no clone of it is Pending); then the
// snapshot, its content and the claims deleted: nothing left Terminating, no volume and no
// snapshot left in the backend. pvguard must refuse and warn nothing, to the user or to any
// component.
func TestSnapshotRestoreAndClone(t *testing.T) {
	forEachMode(t, func(t *testing.T, m cluster.Mode) *endState {
		if cl.CSI == nil || cl.CSI.Snapshotter == nil {
			t.Skip("the cluster runs without the snapshot components")
		}
		ctx := context.Background()
		before := readCounters(t)
		_ = cl.AdminWarnings.Take()
		f := newCSIFlow(t, "snapshot", m)
		ns := f.ns
		class, snapClass := "csi-snap-"+string(m), "csi-snap-"+string(m)
		csiClass(t, class, storagev1.VolumeBindingImmediate)
		snapshotClass(t, snapClass)
		fw := watchFinalizers(t, ns)
		s := newEndState()

		// The source claim, provisioned and bound, used by a pod that writes into it.
		create(t, claim(ns, "source", class, "10Mi"))
		waitBound(t, ns, "source")
		source := expectBoundPair(t, harness.GetPVC(t, cl.Client, ns, "source"))
		if source == nil {
			t.FailNow()
		}
		create(t, pod(ns, "app", "source"))
		harness.WaitFor(t, time.Minute, "pod app scheduled", func(ctx context.Context) (bool, error) {
			return allBoundAndScheduled(ctx, ns)
		})
		const file = "data.txt"
		taken, later := "written before the snapshot in "+ns, "written after the snapshot in "+ns
		writeVolumeData(t, source, file, taken)

		// The snapshot: the snapshot-controller makes its content, the csi-snapshotter takes it.
		create(t, volumeSnapshot(ns, "snap", snapClass, "source"))
		snap, content := snapshotReady(t, ns, "snap")
		handle, _, _ := unstructured.NestedString(content.Object, "status", "snapshotHandle")
		if stored, err := cl.CSI.Plugin.Snapshots(); err != nil || !slices.ContainsFunc(stored, func(p csiplugin.Snapshot) bool {
			return p.ID == handle && p.SourceVolumeID == source.Spec.CSI.VolumeHandle
		}) {
			t.Errorf("content %s names snapshot %q; the backend holds %+v (%v), want it, of volume %s", content.GetName(), handle, stored, err, source.Spec.CSI.VolumeHandle)
		}
		finalizerGone(t, ns, "source", finalizerSnapshotSource)
		if !fw.saw("source", finalizerSnapshotSource) {
			t.Errorf("claim source never carried %s while its snapshot was taken; finalizers seen: %s", finalizerSnapshotSource, fw.History("source"))
		} else {
			s.add("source claim protected by the snapshot-controller while its snapshot was taken, then released", 1)
		}
		writeVolumeData(t, source, file, later)

		// A claim restored from the snapshot (dataSourceRef), and a clone of the source claim
		// (dataSource): each provisioned with its source's data.
		create(t,
			withDataSource(claim(ns, "restored", class, "10Mi"), snapshotGroup, "VolumeSnapshot", "snap", true),
			withDataSource(claim(ns, "clone", class, "10Mi"), "", "PersistentVolumeClaim", "source", false))
		waitBound(t, ns, "restored")
		waitBound(t, ns, "clone")
		// The provisioner's guard stays on a cloned claim until the claim is deleted, and
		// holds the deletion only while a clone of it is still Pending.
		if !slices.Contains(harness.GetPVC(t, cl.Client, ns, "source").Finalizers, finalizerCloneSource) {
			t.Errorf("claim source lacks %s once cloned; finalizers seen: %s", finalizerCloneSource, fw.History("source"))
		} else {
			s.add("cloned claim guarded by the provisioner's cloning-protection finalizer", 1)
		}
		provisioned := []string{source.Name}
		for _, c := range []struct{ name, want, kind, from string }{
			{"restored", taken, "snapshot", handle},
			{"clone", later, "volume", source.Spec.CSI.VolumeHandle},
		} {
			pvc := harness.GetPVC(t, cl.Client, ns, c.name)
			pv := provisionedFrom(t, s, pvc, c.kind, c.from)
			if pv == nil {
				continue
			}
			provisioned = append(provisioned, pv.Name)
			if got := readData(t, pv, file); got != c.want {
				t.Errorf("claim %s (%s of %s): %s holds %q, want %q", c.name, c.kind, c.from, file, got, c.want)
			} else {
				s.add(fmt.Sprintf("claim provisioned from a %s holds its data", c.kind), 1)
			}
		}
		shape(s, harness.GetPVC(t, cl.Client, ns, "source"), source)
		// The snapshot and its content as they stand once restored from: read now, after the
		// controllers' updates that follow readiness have settled.
		snap, content = snapshotReady(t, ns, "snap")
		contentFacts(t, s, snap, content)
		f.volumes = append(f.volumes, provisioned...)
		for _, call := range []string{"CreateSnapshot", "CreateVolume"} {
			if f.newCalls(call) == 0 {
				t.Errorf("%s never called", call)
			}
		}
		settleUnused(t, s, ns)
		s.reasons = kindReasons(t, ns, f.volumes)

		// Deletion: the snapshot, then (its content deleted by the snapshot-controller and the
		// snapshot in the backend by the csi-snapshotter) the pods and claims.
		if err := cl.Client.Delete(ctx, snap); err != nil {
			t.Fatalf("deleting VolumeSnapshot snap: %v", err)
		}
		snapshotObjectGone(t, "VolumeSnapshot", ns, "snap")
		snapshotObjectGone(t, "VolumeSnapshotContent", "", content.GetName())
		if f.newCalls("DeleteSnapshot") == 0 {
			t.Error("DeleteSnapshot never called")
		}
		noSnapshotLeak(t)
		f.deleteAll(provisioned)
		if _, err := cl.Clientset.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "source", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("claim source still there (%v) after its volume was deleted; finalizers seen: %s", err, fw.History("source"))
		}
		if w := cl.AdminWarnings.Take(); len(w) > 0 {
			t.Errorf("the user's writes were warned: %q", w)
		}
		checkAdmission(t, before, readCounters(t))
		return s
	})
}
