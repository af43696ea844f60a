package e2ecluster

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/internal/devcluster"
	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/test/cluster"
	"github.com/pvguard/pvguard/test/harness"
	"github.com/pvguard/pvguard/test/populators"
)

// veleroPolicy is the smallest policy config that admits Velero's data-mover restore: its last
// write sets the reclaim policy of the volume it has just handed to the restored claim back from
// Retain to Delete, which PVG011 (reclaim-downgrade) refuses as it refuses anyone's, since it
// cannot be told apart from a mistake or misuse; the exemption names Velero's ServiceAccount for
// that rule alone.
func veleroPolicy(values map[string]any) {
	values["policy"] = map[string]any{"rules": map[string]any{"PVG011": map[string]any{
		"exemptions": map[string]any{"serviceAccounts": []any{populators.VeleroNamespace + "/" + populators.VeleroServiceAccount}},
	}}}
}

// TestVeleroDataMoverRestore runs Velero's data-mover restore of one volume
// (test/populators.Velero, as velero/velero, bound to cluster-admin as `velero install` binds
// it) beside pvguard installed with veleroPolicy: the restored claim, left unbound by its
// velero.io/dynamic-pv-restore selector; the restore pod and claim in the velero namespace (the
// real external-provisioner provisions the claim, the test writes the restored data on the
// volume); then RebindVolume: the volume set Retain, the restore pod and claim deleted, the
// target claim patched with volumeName, the volume's claimRef patched to the target (no uid)
// with the selector's label, the volume Bound by the mode's binder, its reclaim policy restored
// to Delete. The target ends Bound to the restored volume, reclaim Delete; Velero gets no
// warning and no refusal; once the claim is deleted, the provisioner deletes the volume and
// nothing leaks.
func TestVeleroDataMoverRestore(t *testing.T) {
	installHandOffCRDs(t)
	prev := cl.ChartValues()
	if err := cl.SetChartValues(func(v map[string]any) {
		if prev != nil {
			prev(v)
		}
		veleroPolicy(v)
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cl.SetChartValues(prev); err != nil {
			t.Errorf("reinstalling pvguard with the default policy: %v", err)
		}
	})
	forEachMode(t, func(t *testing.T, m cluster.Mode) *endState { return veleroRestore(t, m, true) })
}

// TestVeleroRestoreDefaultInstall runs the same restore on a default install, in the current
// mode only: every write of Velero's is admitted but the last, restoring Delete on the volume now
// Bound to the restored claim, which PVG011 refuses (Velero only logs that failure: the volume
// stays Retain). The administrator then confirms the change as PVG011 asks
// (pvguard.io/confirm-reclaim-policy), and the volume goes with its claim.
func TestVeleroRestoreDefaultInstall(t *testing.T) {
	installHandOffCRDs(t)
	m := cl.Mode()
	if m == "" {
		m = cluster.ModePVGuard
	}
	if err := cl.Use(m); err != nil {
		t.Fatal(err)
	}
	veleroRestore(t, m, false)
}

// veleroRestore is one data-mover restore; exempt says pvguard runs with veleroPolicy, else with
// the default policy, where the last write must be refused by PVG011.
func veleroRestore(t *testing.T, m cluster.Mode, exempt bool) *endState {
	before := readCounters(t)
	f := newCSIFlow(t, "velero", m)
	ns := f.ns
	class := "velero-imm-" + string(m)
	csiClass(t, class, storagev1.VolumeBindingImmediate)
	const file, contents = "restored.txt", "data from the backup repository"

	clearOnFailure(t, populators.VeleroNamespace)
	ctx := standInContext(t)
	v, err := populators.ConnectVelero(ctx, cl.Admin, cl.LogDir)
	if err != nil {
		t.Fatal(err)
	}
	// No kubelet: the restore pod is deleted while it runs; the stand-in confirms it.
	startKubelet(t, &populators.Kubelet{Namespaces: []string{populators.VeleroNamespace}})

	target, err := v.RestoreTargetClaim(ctx, claim(ns, "data", class, "10Mi"))
	if err != nil {
		t.Fatalf("Velero creating the restored claim: %v", err)
	}
	dd := createCR(t, schema.GroupVersionResource{Group: "velero.io", Version: "v2alpha1", Resource: "datadownloads"}, "DataDownload",
		populators.VeleroNamespace, ns+"-data", map[string]any{"targetVolume": map[string]any{"pvc": "data", "namespace": ns}})
	t.Cleanup(func() { _ = cl.Client.Delete(context.Background(), dd) })
	owner := corev1.ObjectReference{APIVersion: "velero.io/v2alpha1", Kind: "DataDownload", Namespace: dd.GetNamespace(), Name: dd.GetName(), UID: dd.GetUID()}
	if err := v.Expose(ctx, owner, ns, target.Name, time.Minute); err != nil {
		t.Fatalf("Velero exposing the restore: %v", err)
	}
	harness.WaitFor(t, 2*time.Minute, "the restore claim Bound and the restore pod scheduled", func(ctx context.Context) (bool, error) {
		pvc, p := &corev1.PersistentVolumeClaim{}, &corev1.Pod{}
		if err := cl.Client.Get(ctx, client.ObjectKey{Namespace: owner.Namespace, Name: owner.Name}, pvc); err != nil || pvc.Status.Phase != corev1.ClaimBound {
			return false, err
		}
		err := cl.Client.Get(ctx, client.ObjectKey{Namespace: owner.Namespace, Name: owner.Name}, p)
		return err == nil && p.Spec.NodeName != "", err
	})
	if pvc := harness.GetPVC(t, cl.Client, ns, "data"); pvc.Spec.VolumeName != "" || pvc.Status.Phase != corev1.ClaimPending {
		t.Errorf("the restored claim got volume %q (%s) before the restore: its selector must keep it unbound", pvc.Spec.VolumeName, pvc.Status.Phase)
	}
	// The data path: the node-agent writes the backup's data on the restore volume.
	if err := writeData(context.Background(), owner.Namespace, owner.Name, file, contents); err != nil {
		t.Fatal(err)
	}
	rebindErr := v.RebindVolume(ctx, owner, "data", ns, 2*time.Minute)
	binderRefused(t, ns)
	switch {
	case exempt && rebindErr != nil:
		t.Errorf("Velero's RebindVolume: %v", rebindErr)
	// The refusal comes from the apiserver's admission policy for PVG011 (it runs before the
	// webhook), or from the webhook when the policies are not installed.
	case !exempt && (rebindErr == nil || !strings.Contains(rebindErr.Error(), "denied") || !strings.Contains(rebindErr.Error(), "[PVG011 ")):
		t.Errorf("Velero's RebindVolume on a default install: %v, want its last write refused by PVG011", rebindErr)
	case !exempt:
		t.Logf("on a default install, Velero's last write: %v", rebindErr)
		// The administrator confirms the change, as PVG011's message asks.
		pvc := harness.GetPVC(t, cl.Client, ns, "data")
		if err := devcluster.PatchPV(context.Background(), cl.Client, pvc.Spec.VolumeName, func(pv *corev1.PersistentVolume) {
			pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimDelete
			if pv.Annotations == nil {
				pv.Annotations = map[string]string{}
			}
			pv.Annotations[policy.DefaultReclaimConfirmAnnotation] = string(corev1.PersistentVolumeReclaimDelete)
		}); err != nil {
			t.Fatalf("confirming Delete on volume %s: %v", pvc.Spec.VolumeName, err)
		}
	}

	// The external-provisioner took its finalizer off the volume while it was Retain; it puts it
	// back once the volume is Delete again (its guard against deleting the volume object before
	// the disk).
	harness.WaitFor(t, time.Minute, "the provisioner's finalizer back on the restored volume", func(ctx context.Context) (bool, error) {
		pvc := &corev1.PersistentVolumeClaim{}
		if err := cl.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "data"}, pvc); err != nil || pvc.Spec.VolumeName == "" {
			return false, err
		}
		pv := &corev1.PersistentVolume{}
		if err := cl.Client.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, pv); err != nil {
			return false, err
		}
		return slices.Contains(pv.Finalizers, provisionerFinalizer), nil
	})
	s := newEndState()
	pvc := harness.GetPVC(t, cl.Client, ns, "data")
	var provisioned []string
	if pv := expectBoundPair(t, pvc); pv != nil {
		provisioned = append(provisioned, pv.Name)
		if pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
			t.Errorf("volume %s: reclaim policy %s, want Delete restored", pv.Name, pv.Spec.PersistentVolumeReclaimPolicy)
		} else {
			s.add("restored volume Bound with reclaim Delete", 1)
		}
		if want := target.Spec.Selector.MatchLabels[populators.DynamicPVRestoreLabel]; pv.Labels[populators.DynamicPVRestoreLabel] != want {
			t.Errorf("volume %s: label %s = %q, want the claim's selector's %q", pv.Name, populators.DynamicPVRestoreLabel, pv.Labels[populators.DynamicPVRestoreLabel], want)
		}
		if checkData(t, ns, "data", file, contents) {
			s.add("target holds the restored data", 1)
		}
		shape(s, pvc, pv)
	}
	f.volumes = append(f.volumes, provisioned...)
	if ok, err := claimsGone(context.Background(), client.ObjectKey{Namespace: owner.Namespace, Name: owner.Name}); !ok {
		t.Errorf("the restore claim: %v", err)
	}
	settleUnused(t, s, ns)
	s.reasons = kindReasons(t, ns, f.volumes)
	f.deleteAll(provisioned)
	if exempt {
		checkStandIn(t, "Velero", v.Conn)
	} else if w := v.Conn.Warnings(); len(w) > 0 {
		t.Errorf("Velero was sent warnings: %q", w)
	}
	if exempt {
		checkAdmission(t, before, readCounters(t))
	}
	return s
}
