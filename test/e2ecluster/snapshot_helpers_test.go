package e2ecluster

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/test/harness"
)

// What the snapshot components and the provisioner write on the claims a snapshot or a clone
// is taken of.
const (
	// finalizerSnapshotSource is the snapshot-controller's, on a claim while a snapshot of it
	// is being taken.
	finalizerSnapshotSource = "snapshot.storage.kubernetes.io/pvc-as-source-protection"
	// finalizerCloneSource is the external-provisioner's, on a claim while a clone of it is
	// being provisioned.
	finalizerCloneSource = "provisioner.storage.kubernetes.io/cloning-protection"
)

// snapshotGroup is the VolumeSnapshot API group; the tests read its objects unstructured, so
// pvguard's module needs no snapshot client.
const snapshotGroup = "snapshot.storage.k8s.io"

func snapshotGVK(kind string) schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: snapshotGroup, Version: "v1", Kind: kind}
}

func newSnapshotObject(kind, ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(snapshotGVK(kind))
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// snapshotClass creates a VolumeSnapshotClass of the CSI driver whose contents are deleted with
// their snapshots, and deletes it at the test's end.
func snapshotClass(t *testing.T, name string) {
	t.Helper()
	c := newSnapshotObject("VolumeSnapshotClass", "", name)
	c.Object["driver"] = cl.CSI.Driver()
	c.Object["deletionPolicy"] = "Delete"
	create(t, c)
	t.Cleanup(func() { _ = cl.Client.Delete(context.Background(), c) })
}

// volumeSnapshot is a VolumeSnapshot of a claim, as a user writes it.
func volumeSnapshot(ns, name, class, claim string) *unstructured.Unstructured {
	s := newSnapshotObject("VolumeSnapshot", ns, name)
	s.Object["spec"] = map[string]any{
		"volumeSnapshotClassName": class,
		"source":                  map[string]any{"persistentVolumeClaimName": claim},
	}
	return s
}

// getSnapshotObject reads a snapshot API object; ok is false when it does not exist.
func getSnapshotObject(ctx context.Context, kind, ns, name string) (*unstructured.Unstructured, bool, error) {
	u := newSnapshotObject(kind, ns, name)
	err := cl.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u)
	if err != nil {
		return nil, false, client.IgnoreNotFound(err)
	}
	return u, true, nil
}

// snapshotReady waits until the VolumeSnapshot is bound to a content and ready to use, and
// returns its content.
func snapshotReady(t *testing.T, ns, name string) (snap, content *unstructured.Unstructured) {
	t.Helper()
	harness.WaitFor(t, 2*time.Minute, "VolumeSnapshot "+name+" bound to its content and ready to use", func(ctx context.Context) (bool, error) {
		s, ok, err := getSnapshotObject(ctx, "VolumeSnapshot", ns, name)
		if !ok || err != nil {
			return false, err
		}
		ready, _, _ := unstructured.NestedBool(s.Object, "status", "readyToUse")
		bound, _, _ := unstructured.NestedString(s.Object, "status", "boundVolumeSnapshotContentName")
		if !ready || bound == "" {
			return false, fmt.Errorf("status %v", s.Object["status"])
		}
		c, ok, err := getSnapshotObject(ctx, "VolumeSnapshotContent", "", bound)
		if !ok || err != nil {
			return false, fmt.Errorf("content %s: %v", bound, err)
		}
		snap, content = s, c
		return true, nil
	})
	return snap, content
}

// snapshotObjectGone waits until a snapshot API object no longer exists: its finalizers were
// all removed, nothing is left Terminating.
func snapshotObjectGone(t *testing.T, kind, ns, name string) {
	t.Helper()
	harness.WaitFor(t, 2*time.Minute, kind+" "+name+" deleted", func(ctx context.Context) (bool, error) {
		u, ok, err := getSnapshotObject(ctx, kind, ns, name)
		if ok {
			return false, fmt.Errorf("still there: deletionTimestamp %v finalizers %v", u.GetDeletionTimestamp(), u.GetFinalizers())
		}
		return err == nil, err
	})
}

// withDataSource sets a claim's dataSource (or, with ref, its dataSourceRef) to an object of
// group's kind.
func withDataSource(c *corev1.PersistentVolumeClaim, group, kind, name string, ref bool) *corev1.PersistentVolumeClaim {
	var g *string
	if group != "" {
		g = &group
	}
	if ref {
		c.Spec.DataSourceRef = &corev1.TypedObjectReference{APIGroup: g, Kind: kind, Name: name}
	} else {
		c.Spec.DataSource = &corev1.TypedLocalObjectReference{APIGroup: g, Kind: kind, Name: name}
	}
	return c
}

// volumeData is the data directory of a CSI volume in the plugin's store: what a pod using the
// claim would see.
func volumeData(pv *corev1.PersistentVolume) string {
	return filepath.Join(cl.CSI.Plugin.Dir(pv.Spec.CSI.VolumeHandle), "data")
}

// writeVolumeData writes file in a volume's data, as a pod using it would.
func writeVolumeData(t *testing.T, pv *corev1.PersistentVolume, file, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(volumeData(pv), file), []byte(content), 0o644); err != nil {
		t.Fatalf("writing into volume %s: %v", pv.Name, err)
	}
}

// readData reads file from a volume's data ("" when it is missing).
func readData(t *testing.T, pv *corev1.PersistentVolume, file string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(volumeData(pv), file))
	if err != nil && !os.IsNotExist(err) {
		t.Fatalf("reading volume %s: %v", pv.Name, err)
	}
	return string(data)
}

// finalizerWatch records every finalizer each claim of a namespace has carried, and in which
// order they came and went, from a watch started before the writes it observes: a finalizer a
// component adds and removes within a second is still seen.
type finalizerWatch struct {
	mu      sync.Mutex
	seen    map[string]map[string]bool
	history map[string][]string
}

func watchFinalizers(t *testing.T, ns string) *finalizerWatch {
	t.Helper()
	w, err := cl.Clientset.CoreV1().PersistentVolumeClaims(ns).Watch(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("watching claims: %v", err)
	}
	fw := &finalizerWatch{seen: map[string]map[string]bool{}, history: map[string][]string{}}
	go func() {
		for ev := range w.ResultChan() {
			pvc, ok := ev.Object.(*corev1.PersistentVolumeClaim)
			if !ok || ev.Type == watch.Bookmark {
				continue
			}
			fw.mu.Lock()
			if fw.seen[pvc.Name] == nil {
				fw.seen[pvc.Name] = map[string]bool{}
			}
			for _, f := range pvc.Finalizers {
				fw.seen[pvc.Name][f] = true
			}
			h := fw.history[pvc.Name]
			now := fmt.Sprint(pvc.Finalizers)
			if len(h) == 0 || h[len(h)-1] != now {
				fw.history[pvc.Name] = append(h, now)
			}
			fw.mu.Unlock()
		}
	}()
	t.Cleanup(w.Stop)
	return fw
}

// saw reports whether claim has ever carried finalizer.
func (fw *finalizerWatch) saw(claim, finalizer string) bool {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	return fw.seen[claim][finalizer]
}

// History is the claim's finalizer lists in the order they were seen, for failure messages.
func (fw *finalizerWatch) History(claim string) string {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	return strings.Join(fw.history[claim], " -> ")
}

// finalizerGone waits until a claim no longer carries finalizer.
func finalizerGone(t *testing.T, ns, claim, finalizer string) {
	t.Helper()
	harness.WaitFor(t, 2*time.Minute, finalizer+" removed from claim "+claim, func(ctx context.Context) (bool, error) {
		pvc := &corev1.PersistentVolumeClaim{}
		if err := cl.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: claim}, pvc); err != nil {
			return false, err
		}
		return !slices.Contains(pvc.Finalizers, finalizer), fmt.Errorf("finalizers %v", pvc.Finalizers)
	})
}

// noSnapshotLeak checks that the plugin's store holds no snapshot: every one was deleted with
// its content.
func noSnapshotLeak(t *testing.T) {
	t.Helper()
	snaps, err := cl.CSI.Plugin.Snapshots()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range snaps {
		t.Errorf("the backend holds snapshot %s of volume %s after its VolumeSnapshot was deleted: a leaked snapshot", s.ID, s.SourceVolumeID)
	}
}

// annotationKeys are a map's keys, sorted, for end-state facts.
func annotationKeys(m map[string]string) string {
	return strings.Join(slices.Sorted(maps.Keys(m)), ",")
}

// waitBound waits until a claim is Bound.
func waitBound(t *testing.T, ns, name string) {
	t.Helper()
	harness.WaitFor(t, 2*time.Minute, "claim "+name+" Bound", func(ctx context.Context) (bool, error) {
		pvc := &corev1.PersistentVolumeClaim{}
		if err := cl.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pvc); err != nil {
			return false, err
		}
		return pvc.Status.Phase == corev1.ClaimBound, fmt.Errorf("phase %q", pvc.Status.Phase)
	})
}

// provisionedFrom checks a claim bound to a volume the provisioner made for it, which the plugin
// created from the content source kind/id, and returns the volume.
func provisionedFrom(t *testing.T, s *endState, pvc *corev1.PersistentVolumeClaim, kind, id string) *corev1.PersistentVolume {
	t.Helper()
	pv := expectBoundPair(t, pvc)
	if pv == nil {
		return nil
	}
	if pv.Annotations[annProvisionedBy] != cl.CSI.Driver() || pv.Name != "pvc-"+string(pvc.UID) || pv.Spec.CSI == nil {
		t.Errorf("claim %s bound to %s (provisioned-by %q), want the volume the provisioner made for it", pvc.Name, pv.Name, pv.Annotations[annProvisionedBy])
		return nil
	}
	v, ok, err := cl.CSI.Plugin.Volume(pv.Spec.CSI.VolumeHandle)
	switch {
	case err != nil || !ok:
		t.Errorf("claim %s: volume %s is not in the backend (%v)", pvc.Name, pv.Spec.CSI.VolumeHandle, err)
	case v.Source == nil || v.Source.Kind != kind || v.Source.ID != id:
		t.Errorf("claim %s: the backend made volume %s from %+v, want the %s %s", pvc.Name, v.ID, v.Source, kind, id)
	default:
		s.add(fmt.Sprintf("claim with a %s as its data source provisioned from it and Bound", kind), 1)
	}
	shape(s, pvc, pv)
	return pv
}

// contentFacts adds what both modes must agree on about a ready snapshot and its content, and
// checks the content is the driver's, deleted with its snapshot.
func contentFacts(t *testing.T, s *endState, snap, content *unstructured.Unstructured) {
	t.Helper()
	driver, _, _ := unstructured.NestedString(content.Object, "spec", "driver")
	policy, _, _ := unstructured.NestedString(content.Object, "spec", "deletionPolicy")
	mode, _, _ := unstructured.NestedString(content.Object, "spec", "sourceVolumeMode")
	if driver != cl.CSI.Driver() {
		t.Errorf("content %s is of driver %q, want %s", content.GetName(), driver, cl.CSI.Driver())
	}
	s.add(fmt.Sprintf("ready snapshot: finalizers %v; its content: deletionPolicy %s, sourceVolumeMode %s, annotations [%s], finalizers %v",
		snap.GetFinalizers(), policy, mode, annotationKeys(content.GetAnnotations()), content.GetFinalizers()), 1)
}
