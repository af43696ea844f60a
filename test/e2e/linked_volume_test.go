package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/internal/devcluster"
	"github.com/pvguard/pvguard/test/harness"
	"github.com/pvguard/pvguard/test/testobj"
)

// TestClaimNamingALinkedVolumeIsWarned: on the real apiserver, a tenant (a ServiceAccount that may
// create and list claims in its namespace) re-creating its claim under its old name, naming the
// Released volume that still carries the deleted claim's uid, is admitted with PVG010's warning:
// the volume belongs to an earlier claim of this name and an admin frees it by clearing
// spec.claimRef.uid, without the deleted claim's uid, which the tenant never sent. The admin's
// write the warning names is admitted. A tenant's claim dressed as a restore's (Velero's
// selector label) is warned all the same. A restore's hand-over (Velero's RebindPVC: the restored
// claim names the volume its deleted restore claim, of another name, left Released) is quiet,
// and so is the restore pointing the volume at the claim.
func TestClaimNamingALinkedVolumeIsWarned(t *testing.T) {
	ctx := context.Background()
	a := admin(t)
	ns := harness.PrefixedNamespace(t, a, "linked")
	token := tenantToken(t, ns)
	allowCreate(t, ns)
	tw := &devcluster.Warnings{}
	cfg := rest.AnonymousClientConfig(suite.cfg)
	cfg.BearerToken, cfg.WarningHandler = token, tw
	tenant, err := client.New(cfg, client.Options{})
	harness.Must(t, err, "building the tenant's client")

	// released is a volume bound to a claim that was then deleted, as the PV controller leaves it:
	// its claimRef keeps the deleted claim's uid, its phase Released.
	released := func(name, claimNS, claimName string) string {
		t.Helper()
		pv := harness.FreshPV(testobj.PV(name, testobj.Reclaim(corev1.PersistentVolumeReclaimRetain)))
		pv.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: claimNS, Name: claimName}
		harness.Must(t, a.Create(ctx, pv), "creating "+name)
		pvc := harness.FreshPVC(testobj.PVC(claimNS, claimName))
		harness.Must(t, a.Create(ctx, pvc), "creating the claim of "+name)
		harness.Must(t, patchPV(ctx, a.Client, name, func(pv *corev1.PersistentVolume) { pv.Spec.ClaimRef.UID = pvc.UID }), "binding "+name)
		harness.Must(t, patchPVC(ctx, a.Client, claimNS, claimName, func(c *corev1.PersistentVolumeClaim) { c.Finalizers = nil }), "dropping the claim's finalizers")
		harness.Must(t, a.Delete(ctx, pvc), "deleting the claim of "+name)
		harness.Eventually(t, time.Minute, "the claim of "+name+" gone", func(ctx context.Context) error {
			return client.IgnoreNotFound(a.Get(ctx, client.ObjectKeyFromObject(pvc), &corev1.PersistentVolumeClaim{}))
		})
		got := &corev1.PersistentVolume{}
		harness.Must(t, a.Get(ctx, client.ObjectKey{Name: name}, got), "reading "+name)
		got.Status.Phase = corev1.VolumeReleased
		harness.Must(t, a.Status().Update(ctx, got), "marking "+name+" Released")
		return string(pvc.UID)
	}

	earlier := uniq(t, "pv-earlier")
	deadUID := released(earlier, ns, "data")
	tw.Take()
	harness.Must(t, tenant.Create(ctx, harness.FreshPVC(testobj.PVC(ns, "data", testobj.VolumeName(earlier)))), "the tenant re-creating its claim")
	ws := tw.Take()
	if !hasWarning(ws, "PVG010") {
		t.Fatalf("the tenant was not warned; warnings %q", ws)
	}
	w := strings.Join(ws, "\n")
	for _, want := range []string{"still belongs to an earlier claim of this name", "is Released", "an admin frees PersistentVolume " + earlier + " for this claim by clearing its spec.claimRef.uid"} {
		if !strings.Contains(w, want) {
			t.Errorf("the tenant's warning %q does not say %q", w, want)
		}
	}
	if strings.Contains(w, deadUID) {
		t.Errorf("the tenant's warning shows the deleted claim's uid, which its request did not carry: %q", w)
	}

	// A tenant dressed up as the restore (its selector label, no binder annotations) is warned
	// all the same: only the volume's claimRef decides.
	other := uniq(t, "pv-earlier-2")
	released(other, ns, "data-2")
	dressed := harness.FreshPVC(testobj.PVC(ns, "data-2", testobj.VolumeName(other)))
	dressed.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"velero.io/dynamic-pv-restore": ns + ".data-2.x1"}}
	harness.Must(t, tenant.Create(ctx, dressed), "the tenant's claim dressed as a restore's")
	if ws := tw.Take(); !hasWarning(ws, "PVG010") {
		t.Errorf("the tenant dressed as a restore was not warned; warnings %q", ws)
	}

	// The way out the warning names: an admin clears the uid, pre-binding the volume by name.
	a.warnings.Take()
	harness.Must(t, patchPV(ctx, a.Client, earlier, func(pv *corev1.PersistentVolume) {
		pv.Spec.ClaimRef.UID, pv.Spec.ClaimRef.ResourceVersion = "", ""
	}), "clearing the volume's claimRef.uid as the warning says")
	if ws := a.warnings.Take(); len(ws) > 0 {
		t.Errorf("the admin's write the warning names was warned: %q", ws)
	}

	// A restore's hand-over: the volume's claimRef names the restore's own claim, deleted, in
	// another namespace; the restored claim (created by the restore without volumeName) is
	// pointed at the volume, then the volume at the claim.
	restored := uniq(t, "pv-restored")
	released(restored, harness.PrefixedNamespace(t, a, "restore"), "dd-restore")
	harness.Must(t, a.Create(ctx, harness.FreshPVC(testobj.PVC(ns, "db"))), "creating the restored claim")
	a.warnings.Take()
	harness.Must(t, patchPVC(ctx, a.Client, ns, "db", func(pvc *corev1.PersistentVolumeClaim) { pvc.Spec.VolumeName = restored }),
		"RebindPVC: the restored claim names the volume")
	harness.Must(t, patchPV(ctx, a.Client, restored, func(pv *corev1.PersistentVolume) {
		pv.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: ns, Name: "db"}
	}), "ResetPVBinding: the volume points at the restored claim")
	if ws := a.warnings.Take(); len(ws) > 0 {
		t.Errorf("the restore's hand-over was warned: %q", ws)
	}
}
