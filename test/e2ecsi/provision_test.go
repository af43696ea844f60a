package e2ecsi

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/internal/devcluster"
	"github.com/pvguard/pvguard/test/csiplugin"
	"github.com/pvguard/pvguard/test/csisidecars"
	"github.com/pvguard/pvguard/test/harness"
)

const (
	provisionerFinalizer  = "external-provisioner.volume.kubernetes.io/finalizer"
	annProvisionedBy      = "pv.kubernetes.io/provisioned-by"
	annStorageProvisioner = "volume.kubernetes.io/storage-provisioner"
)

// TestImmediateProvisionExpandDelete follows one claim of an Immediate class through its life,
// every step written by the component that writes it in a real cluster:
//
//  1. created by a user (pvguard admits it without a warning); pvguard's binder finds no volume
//     and hands the claim to the external provisioner (storage-provisioner annotation);
//  2. the real external-provisioner asks the plugin for a volume with the topology of every
//     node (CSINode keys, Node labels) and saves the PersistentVolume, pre-bound to the claim,
//     with its finalizer and the node affinity the plugin's answer gives: pvguard admits the
//     save without a warning, although the provisioner's ServiceAccount is not in its config;
//  3. pvguard's binder binds the pair;
//  4. the user raises the request; the real external-resizer calls ControllerExpandVolume and
//     grows the volume and the claim's status (the plugin needs no node step: nothing is left
//     for a kubelet);
//  5. the user deletes the claim; kube-controller-manager's pvc-protection controller lets it
//     go; pvguard's binder releases the volume; the provisioner calls DeleteVolume, deletes the
//     PersistentVolume and removes its finalizer; the pv-protection controller removes its own;
//     the volume is gone and nothing stays Terminating.
//
// No sidecar, nor kube-controller-manager, is sent a warning or a denial at any step, and pvguard
// counts no finding (warn or deny) over the whole flow.
func TestImmediateProvisionExpandDelete(t *testing.T) {
	f := newFlow(t)
	class := f.class("immediate", nil)
	pvc, pv, vol := f.provision(class, "10Mi")

	// 4: expansion by the external-resizer, finished in the controller.
	f.expand(pvc, "20Mi")
	want := resource.MustParse("20Mi")
	harness.WaitFor(t, 2*time.Minute, "the volume and the claim grown to 20Mi", func(context.Context) (bool, error) {
		gotPV, gotPVC, err := f.pair(pvc.Namespace, pvc.Name, pv.Name)
		return err == nil && gotPV.Spec.Capacity.Storage().Cmp(want) == 0 && gotPVC.Status.Capacity.Storage().Cmp(want) == 0, err
	})
	f.checkExpanded(vol, want)
	pvc = harness.GetPVC(t, f.user, pvc.Namespace, pvc.Name)
	for _, c := range pvc.Status.Conditions {
		if c.Type == corev1.PersistentVolumeClaimResizing || c.Type == corev1.PersistentVolumeClaimFileSystemResizePending {
			t.Errorf("claim condition %s left after an expansion that needs no node step", c.Type)
		}
	}
	if s := pvc.Status.AllocatedResourceStatuses[corev1.ResourceStorage]; s != "" {
		t.Errorf("claim's storage resize status %q left after the expansion finished", s)
	}
	hasEvents(t, f.user, pvc.Namespace, pvc.Name, "Resizing", "VolumeResizeSuccessful")

	f.delete(pvc, pv.Name, vol)
	f.noFindings()
}

// TestExpansionWaitingForTheNode: a volume whose expansion needs a node step (a filesystem to
// grow, as on a block device). The external-resizer grows the volume in the controller, then
// hands the rest to the kubelet: it records NodeResizePending and leaves the claim's
// status.capacity at the old size. No kubelet runs here, so the claim stays so: this is where a
// real cluster's kubelet would grow the filesystem of the mounted volume and set the claim's
// capacity. pvguard admits every write of it, and the claim and volume are still deleted cleanly
// in that state.
func TestExpansionWaitingForTheNode(t *testing.T) {
	f := newFlow(t)
	class := f.class("node-expansion", map[string]string{csiplugin.ParamNodeExpansionRequired: "true"})
	pvc, pv, vol := f.provision(class, "10Mi")

	f.expand(pvc, "20Mi")
	want, old := resource.MustParse("20Mi"), resource.MustParse("10Mi")
	harness.WaitFor(t, 2*time.Minute, "the volume grown to 20Mi and the claim waiting for the node", func(context.Context) (bool, error) {
		gotPV, gotPVC, err := f.pair(pvc.Namespace, pvc.Name, pv.Name)
		return err == nil && gotPV.Spec.Capacity.Storage().Cmp(want) == 0 &&
			gotPVC.Status.AllocatedResourceStatuses[corev1.ResourceStorage] == corev1.PersistentVolumeClaimNodeResizePending, err
	})
	f.checkExpanded(vol, want)
	pvc = harness.GetPVC(t, f.user, pvc.Namespace, pvc.Name)
	if got := pvc.Status.Capacity.Storage(); got.Cmp(old) != 0 {
		t.Errorf("claim status capacity %s: only the kubelet's node step may raise it from %s", got, &old)
	}
	if got := pvc.Status.AllocatedResources.Storage(); got.Cmp(want) != 0 {
		t.Errorf("claim allocatedResources %s, want %s", got, &want)
	}
	hasEvents(t, f.user, pvc.Namespace, pvc.Name, "Resizing", "FileSystemResizeRequired")

	f.delete(pvc, pv.Name, vol)
	f.noFindings()
}

// flow is one test's view of the suite: a user (the admin, its warnings recorded) in a fresh
// namespace, and the counters the end checks compare with.
type flow struct {
	t        *testing.T
	ctx      context.Context
	user     client.Client
	warnings *devcluster.Warnings
	ns       string
	calls    map[string]int
}

func newFlow(t *testing.T) *flow {
	t.Cleanup(func() { dumpOnFailure(t) })
	f := &flow{t: t, ctx: context.Background(), warnings: &devcluster.Warnings{}}
	var err error
	f.user, err = devcluster.NewClient(w.h.Config, f.warnings, "")
	harness.Must(t, err, "user client")
	f.ns = harness.Namespace(t, f.user, "")
	f.calls = w.plugin.AllCalls()
	return f
}

// newCalls is how many times the plugin's method was called since the flow began.
func (f *flow) newCalls(method string) int { return w.plugin.Calls(method) - f.calls[method] }

// class creates an Immediate, expandable class of the plugin with a Delete reclaim policy.
func (f *flow) class(suffix string, params map[string]string) *storagev1.StorageClass {
	f.t.Helper()
	p := map[string]string{"tier": "test"}
	maps.Copy(p, params)
	class := &storagev1.StorageClass{
		ObjectMeta:           metav1.ObjectMeta{Name: f.ns + "-" + suffix},
		Provisioner:          w.plugin.Name(),
		Parameters:           p,
		ReclaimPolicy:        ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode:    ptr.To(storagev1.VolumeBindingImmediate),
		AllowVolumeExpansion: ptr.To(true),
	}
	harness.Must(f.t, f.user.Create(f.ctx, class), "creating class "+class.Name)
	f.t.Cleanup(func() { _ = f.user.Delete(context.Background(), class) })
	f.noWarnings("creating class " + class.Name)
	return class
}

// provision creates a claim of the class and waits until the external-provisioner has made its
// volume and pvguard's binder has bound the pair (steps 1-3); it checks what each wrote.
func (f *flow) provision(class *storagev1.StorageClass, size string) (*corev1.PersistentVolumeClaim, *corev1.PersistentVolume, csiplugin.Volume) {
	t := f.t
	t.Helper()
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: ptr.To(class.Name),
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
		},
	}
	harness.Must(t, f.user.Create(f.ctx, claim), "creating the claim")
	f.noWarnings("creating the claim")
	pvName := "pvc-" + string(claim.UID)
	harness.WaitFor(t, 2*time.Minute, "the claim provisioned and bound to "+pvName, func(context.Context) (bool, error) {
		return harness.BoundTo(f.user, f.ns, claim.Name, pvName)(f.ctx)
	})
	pvc, pv := harness.GetPVC(t, f.user, f.ns, claim.Name), harness.GetPV(t, f.user, pvName)
	if pvc.Annotations[annStorageProvisioner] != w.plugin.Name() {
		t.Errorf("claim annotations %v: pvguard's binder did not hand it to %s", pvc.Annotations, w.plugin.Name())
	}
	vol, ok, err := w.plugin.Volume(pv.Spec.CSI.VolumeHandle)
	if err != nil || !ok {
		t.Fatalf("the plugin has no volume %q behind %s (%v)", pv.Spec.CSI.VolumeHandle, pvName, err)
	}
	checkProvisioned(t, pv, pvc, class, vol)
	if got := f.newCalls("CreateVolume"); got < 1 {
		t.Errorf("CreateVolume called %d times", got)
	}
	hasEvents(t, f.user, f.ns, claim.Name, "ExternalProvisioning", "Provisioning", "ProvisioningSucceeded")
	return pvc, pv, vol
}

// expand raises the claim's request, as a user does.
func (f *flow) expand(pvc *corev1.PersistentVolumeClaim, size string) {
	f.t.Helper()
	harness.Must(f.t, devcluster.PatchPVC(f.ctx, f.user, pvc.Namespace, pvc.Name, func(c *corev1.PersistentVolumeClaim) {
		c.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse(size)
	}), "raising the claim's request")
	f.noWarnings("raising the claim's request")
}

// checkExpanded checks that the plugin was asked to grow the volume and recorded the size.
func (f *flow) checkExpanded(vol csiplugin.Volume, want resource.Quantity) {
	f.t.Helper()
	if got, _, err := w.plugin.Volume(vol.ID); err != nil || got.CapacityBytes != want.Value() {
		f.t.Errorf("the plugin records %d bytes for %s (%v), want %d", got.CapacityBytes, vol.ID, err, want.Value())
	}
	if got := f.newCalls("ControllerExpandVolume"); got < 1 {
		f.t.Errorf("ControllerExpandVolume called %d times", got)
	}
}

// delete deletes the claim as a user does and waits for the claim and the volume to be gone
// (step 5): released by the binder, deleted by the provisioner through the plugin, nothing left
// Terminating.
func (f *flow) delete(pvc *corev1.PersistentVolumeClaim, pvName string, vol csiplugin.Volume) {
	t := f.t
	t.Helper()
	// All of it takes well under a second, so the volume's phases are followed with a watch
	// rather than by polling.
	phases := watchPhases(t, pvName)
	harness.Must(t, f.user.Delete(f.ctx, pvc), "deleting the claim")
	f.noWarnings("deleting the claim")
	harness.WaitFor(t, 2*time.Minute, "the claim and the volume gone", func(context.Context) (bool, error) {
		pvErr := f.user.Get(f.ctx, client.ObjectKey{Name: pvName}, &corev1.PersistentVolume{})
		claimErr := f.user.Get(f.ctx, client.ObjectKeyFromObject(pvc), &corev1.PersistentVolumeClaim{})
		return apierrors.IsNotFound(pvErr) && apierrors.IsNotFound(claimErr), nil
	})
	// Only pvguard's binder runs as a binder here, so the Released write is its own.
	if seen := phases(); !slices.Contains(seen, corev1.VolumeReleased) {
		t.Errorf("volume phases seen %v: never Released by the binder", seen)
	}
	if got := f.newCalls("DeleteVolume"); got < 1 {
		t.Errorf("DeleteVolume called %d times", got)
	}
	if _, err := os.Stat(w.plugin.Dir(vol.ID)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("volume directory %s still there (%v)", w.plugin.Dir(vol.ID), err)
	}
	if reasons := harness.EventReasons(t, f.user, "default", pvName); slices.Contains(reasons, "VolumeFailedDelete") {
		t.Errorf("volume events %v: a binder tried to delete a volume its provisioner deletes", reasons)
	}
}

// pair reads a claim and a volume.
func (f *flow) pair(ns, claim, volume string) (*corev1.PersistentVolume, *corev1.PersistentVolumeClaim, error) {
	pv, pvc := &corev1.PersistentVolume{}, &corev1.PersistentVolumeClaim{}
	if err := f.user.Get(f.ctx, client.ObjectKey{Name: volume}, pv); err != nil {
		return nil, nil, err
	}
	if err := f.user.Get(f.ctx, client.ObjectKey{Namespace: ns, Name: claim}, pvc); err != nil {
		return nil, nil, err
	}
	return pv, pvc, nil
}

func (f *flow) noWarnings(what string) {
	f.t.Helper()
	if got := f.warnings.Take(); len(got) > 0 {
		f.t.Errorf("%s drew warnings: %q", what, got)
	}
}

// noFindings checks that nobody was warned or refused anything: no sidecar and no
// kube-controller-manager controller logged an apiserver warning or a denial (over the suite so
// far), and pvguard counted no warn or deny finding during the flow.
func (f *flow) noFindings() {
	f.t.Helper()
	for _, p := range []*csisidecars.Process{w.provisioner.Process, w.resizer.Process, w.kcm} {
		if found := csisidecars.APIFindings(p.Logs()); len(found) > 0 {
			f.t.Errorf("%s was sent warnings or denials:\n%s", p.Name, strings.Join(found, "\n"))
		}
	}
	// pvguard's own binder is a writer of the flow too; its log records each write refused.
	if found := csisidecars.APIFindings(w.pvguard.Log.String()); len(found) > 0 {
		f.t.Errorf("pvguard's binder was sent warnings or denials:\n%s", strings.Join(found, "\n"))
	}
	// pvguard's findings metric is not compared: it also counts reviews whose answer no one
	// received. The apiserver judges an update first against its watch cache's copy of the
	// object and, when admission refuses that attempt, judges it again on the stored object
	// (k8s.io/apiserver storage/etcd3 GuaranteedUpdate); a refusal of a stale copy (a volume
	// whose deletion the cache had not yet seen) is thus counted, then replaced by an admission.
	// What the writers were answered is what the flow checks.
}

// checkProvisioned checks the volume as the provisioner saved it.
func checkProvisioned(t *testing.T, pv *corev1.PersistentVolume, pvc *corev1.PersistentVolumeClaim, class *storagev1.StorageClass, vol csiplugin.Volume) {
	t.Helper()
	if pv.Annotations[annProvisionedBy] != w.plugin.Name() {
		t.Errorf("volume annotations %v: want %s=%s", pv.Annotations, annProvisionedBy, w.plugin.Name())
	}
	if !slices.Contains(pv.Finalizers, provisionerFinalizer) {
		t.Errorf("volume finalizers %v: want %s", pv.Finalizers, provisionerFinalizer)
	}
	if ref := pv.Spec.ClaimRef; ref == nil || ref.UID != pvc.UID || ref.Name != pvc.Name || ref.Namespace != pvc.Namespace {
		t.Errorf("volume claimRef %+v: want the claim with uid %s", pv.Spec.ClaimRef, pvc.UID)
	}
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != w.plugin.Name() {
		t.Errorf("volume source %+v: want CSI driver %s", pv.Spec.PersistentVolumeSource, w.plugin.Name())
	}
	if pv.Spec.StorageClassName != class.Name || pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
		t.Errorf("volume class %q, reclaim %q: want %s, Delete", pv.Spec.StorageClassName, pv.Spec.PersistentVolumeReclaimPolicy, class.Name)
	}
	if got := pv.Spec.Capacity.Storage(); got.Value() != vol.CapacityBytes {
		t.Errorf("volume capacity %s, the plugin made %d bytes", got, vol.CapacityBytes)
	}
	if !slices.Contains(nodes, vol.Node) {
		t.Errorf("the plugin put the volume on %q, not one of the nodes %v", vol.Node, nodes)
	}
	wantAffinity := fmt.Sprintf("%s In [%s]", w.plugin.TopologyKey(), vol.Node)
	if got := affinity(pv); got != wantAffinity {
		t.Errorf("volume node affinity %q, want %q (the plugin's accessible topology)", got, wantAffinity)
	}
	if vol.Parameters["tier"] != "test" || vol.Parameters["csi.storage.k8s.io/pvc/name"] != pvc.Name || vol.Parameters["csi.storage.k8s.io/pvc/namespace"] != pvc.Namespace {
		t.Errorf("CreateVolume parameters %v: want the class's and the claim's name and namespace (--extra-create-metadata)", vol.Parameters)
	}
}

// affinity renders a volume's required node affinity as "key In [values]" terms.
func affinity(pv *corev1.PersistentVolume) string {
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return ""
	}
	var terms []string
	for _, term := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
		for _, e := range term.MatchExpressions {
			terms = append(terms, fmt.Sprintf("%s %s [%s]", e.Key, e.Operator, strings.Join(e.Values, " ")))
		}
	}
	return strings.Join(terms, "; ")
}

// watchPhases watches a volume and returns a function that gives the phases it went through
// (consecutive repeats folded) until the watch is read, at most ten seconds after deletion.
func watchPhases(t *testing.T, name string) func() []corev1.PersistentVolumePhase {
	t.Helper()
	c, err := client.NewWithWatch(w.h.Config, client.Options{})
	harness.Must(t, err, "watch client")
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	wi, err := c.Watch(ctx, &corev1.PersistentVolumeList{}, client.MatchingFields{"metadata.name": name})
	harness.Must(t, err, "watching volume "+name)
	var (
		phases []corev1.PersistentVolumePhase
		done   = make(chan struct{})
	)
	go func() {
		defer close(done)
		defer wi.Stop()
		for ev := range wi.ResultChan() {
			pv, ok := ev.Object.(*corev1.PersistentVolume)
			if !ok {
				continue
			}
			if len(phases) == 0 || phases[len(phases)-1] != pv.Status.Phase {
				phases = append(phases, pv.Status.Phase)
			}
			if ev.Type == watch.Deleted {
				return
			}
		}
	}()
	return func() []corev1.PersistentVolumePhase {
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cancel()
			<-done
		}
		return phases
	}
}

// hasEvents waits briefly for each reason among the object's events (events are written
// asynchronously by their recorders).
func hasEvents(t *testing.T, c client.Client, ns, name string, reasons ...string) {
	t.Helper()
	harness.WaitFor(t, 30*time.Second, fmt.Sprintf("events %v on %s/%s", reasons, ns, name), func(context.Context) (bool, error) {
		got := harness.EventReasons(t, c, ns, name)
		for _, r := range reasons {
			if !slices.Contains(got, r) {
				return false, fmt.Errorf("events so far: %v", got)
			}
		}
		return true, nil
	})
}

// findings is pvguard's count of admission findings that warn or deny.

// dumpOnFailure puts the end of each component's log, and the plugin's call counts, in a failed
// test's output; the whole logs stay in w.dir.
func dumpOnFailure(t *testing.T) {
	if !t.Failed() {
		return
	}
	for _, p := range []*csisidecars.Process{w.provisioner.Process, w.resizer.Process, w.kcm} {
		t.Logf("--- %s (%s), last lines:\n%s", p.Name, p.LogPath, p.Tail(30))
	}
	t.Logf("CSI calls: %v", w.plugin.AllCalls())
}
