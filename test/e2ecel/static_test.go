// Package e2ecel runs the rules' CEL forms in a real kube-apiserver, with no pvguard at all: the
// ValidatingAdmissionPolicies `pvguard admission-policies --static-dir` writes, loaded by the
// apiserver's manifest-based admission config (Kubernetes 1.37, ManifestBasedAdmissionControlConfig)
// at start. They are what still guards a cluster after every pvguard object was deleted: each
// destructive write is refused with the rule's message, the binding controllers' writes pass, and
// the API cannot delete the policies. TestAdmissionPoliciesFollowTheConfig runs the chart's
// policies, which read the config from their parameter object, with pvguard keeping that object
// current across a hot reload, and then without pvguard.
package e2ecel

import (
	"context"
	"io"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/pvguard/pvguard/internal/cli"
	"github.com/pvguard/pvguard/internal/devcluster"
	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/storage"
	"github.com/pvguard/pvguard/test/harness"
)

func TestStaticGuardsHoldWithoutPVGuard(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if err := cli.WriteStaticAdmissionPolicies(dir, policy.AdmissionPolicies(policy.DefaultConfig(), policy.AdmissionPolicyOptions{Static: true}), io.Discard); err != nil {
		t.Fatal(err)
	}
	assets, err := devcluster.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	cp, err := devcluster.StartWith(assets, devcluster.Options{LogDir: t.TempDir(), APIServerFlags: map[string]string{
		"admission-control-config-file": cli.StaticAdmissionConfig(dir),
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	admin := kubernetes.NewForConfigOrDie(cp.Config)

	// A bound pair, as the PV controller leaves it (no controller runs here: the test writes it).
	ns := "team-a"
	claim, pv := boundPair(ctx, t, admin, ns)

	pvs, pvcs := admin.CoreV1().PersistentVolumes(), admin.CoreV1().PersistentVolumeClaims(ns)
	refused := []struct {
		name, rule string
		write      func() error
	}{
		{"clearing a Bound volume's claimRef", "PVG002", func() error {
			v := pv.DeepCopy()
			v.Spec.ClaimRef = nil
			_, err := pvs.Update(ctx, v, metav1.UpdateOptions{})
			return err
		}},
		{"re-pointing a Bound volume at another claim", "PVG002", func() error {
			v := pv.DeepCopy()
			v.Spec.ClaimRef.Name, v.Spec.ClaimRef.UID = "thief", "0f5c3f5e-6b0a-4c47-9d43-7c2f2b1e9a10"
			_, err := pvs.Update(ctx, v, metav1.UpdateOptions{})
			return err
		}},
		{"Retain to Delete without the confirmation", "PVG011", func() error {
			v := pv.DeepCopy()
			v.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimDelete
			_, err := pvs.Update(ctx, v, metav1.UpdateOptions{})
			return err
		}},
		{"removing bind-completed from a bound claim", "PVG003", func() error {
			c := claim.DeepCopy()
			delete(c.Annotations, storage.AnnBindCompleted)
			_, err := pvcs.Update(ctx, c, metav1.UpdateOptions{})
			return err
		}},
		{"stripping pvc-protection from a bound claim", "PVG012", func() error {
			c := claim.DeepCopy()
			c.Finalizers = nil
			_, err := pvcs.Update(ctx, c, metav1.UpdateOptions{})
			return err
		}},
		{"stripping pv-protection from a Bound volume", "PVG012", func() error {
			v := pv.DeepCopy()
			v.Finalizers = nil
			_, err := pvs.Update(ctx, v, metav1.UpdateOptions{})
			return err
		}},
		// The status strategies keep metadata changes: the same removals through /status.
		{"removing bind-completed from a bound claim through /status", "PVG003", func() error {
			c := claim.DeepCopy()
			delete(c.Annotations, storage.AnnBindCompleted)
			_, err := pvcs.UpdateStatus(ctx, c, metav1.UpdateOptions{})
			return err
		}},
		{"stripping pvc-protection from a bound claim through /status", "PVG012", func() error {
			c := claim.DeepCopy()
			c.Finalizers = nil
			_, err := pvcs.UpdateStatus(ctx, c, metav1.UpdateOptions{})
			return err
		}},
		{"stripping pv-protection from a Bound volume through /status", "PVG012", func() error {
			v := pv.DeepCopy()
			v.Finalizers = nil
			_, err := pvs.UpdateStatus(ctx, v, metav1.UpdateOptions{})
			return err
		}},
	}
	if len(claim.Finalizers) == 0 || len(pv.Finalizers) == 0 {
		t.Fatalf("the apiserver added no protection finalizers (claim %v, volume %v): the PVG012 cases test nothing", claim.Finalizers, pv.Finalizers)
	}
	for _, tc := range refused {
		err := tc.write()
		if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "["+tc.rule+" ") {
			t.Errorf("%s: err = %v, want a refusal naming %s", tc.name, err, tc.rule)
		}
	}

	// What the guards let through: status writes that keep the metadata, whoever makes them (a
	// spec change through /status is dropped by the strategy, not refused), the confirmed
	// downgrade, and the PV controller unbinding.
	checkStatusWritesAdmitted(ctx, t, cp.Config, ns)
	pv, err = pvs.Get(ctx, "pv-1", metav1.GetOptions{})
	harness.Must(t, err, "reading the volume")
	v := pv.DeepCopy()
	v.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimDelete
	v.Annotations[policy.DefaultReclaimConfirmAnnotation] = "Delete"
	if _, err := pvs.Update(ctx, v, metav1.UpdateOptions{}); err != nil {
		t.Errorf("a confirmed Retain to Delete: %v", err)
	}
	cfg := rest.CopyConfig(cp.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:kube-system:persistent-volume-binder",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"}}
	binder := kubernetes.NewForConfigOrDie(cfg)
	latest, err := pvs.Get(ctx, "pv-1", metav1.GetOptions{})
	harness.Must(t, err, "reading the volume")
	latest.Spec.ClaimRef = nil
	if _, err := binder.CoreV1().PersistentVolumes().Update(ctx, latest, metav1.UpdateOptions{}); err != nil {
		t.Errorf("the PV controller's unbind: %v", err)
	}

	// The API can neither remove nor change them.
	vaps := admin.AdmissionregistrationV1().ValidatingAdmissionPolicies()
	for _, ap := range policy.AdmissionPolicies(policy.DefaultConfig(), policy.AdmissionPolicyOptions{Static: true}) {
		if err := vaps.Delete(ctx, ap.Policy.Name, metav1.DeleteOptions{}); err == nil {
			t.Errorf("deleting %s through the API succeeded", ap.Policy.Name)
		}
	}
}

func create[T any](ctx context.Context, c interface {
	Create(context.Context, T, metav1.CreateOptions) (T, error)
}, obj T) error {
	_, err := c.Create(ctx, obj, metav1.CreateOptions{})
	return err
}

// checkStatusWritesAdmitted makes the status writes of the controllers that write the status of
// a bound pair (the PV controller, the resizer: an unlisted ServiceAccount of a default install)
// and one of a person that also tries to change spec through /status: all are admitted, and the
// spec change is dropped by the strategy, so the policies need not judge spec there.
func checkStatusWritesAdmitted(ctx context.Context, t *testing.T, admin *rest.Config, ns string) {
	t.Helper()
	as := func(user string, groups ...string) *kubernetes.Clientset {
		cfg := rest.CopyConfig(admin)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: append(groups, "system:authenticated")}
		return kubernetes.NewForConfigOrDie(cfg)
	}
	binder := as("system:serviceaccount:kube-system:persistent-volume-binder", "system:serviceaccounts", "system:serviceaccounts:kube-system")
	// The resizer's ServiceAccount has no RBAC here; system:masters gives it the write, and
	// exempts it from nothing.
	resizer := as("system:serviceaccount:csi:csi-resizer", "system:serviceaccounts", "system:serviceaccounts:csi", "system:masters")
	person := kubernetes.NewForConfigOrDie(admin)

	c, err := binder.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data", metav1.GetOptions{})
	harness.Must(t, err, "reading the claim")
	c.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
	c.Status.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	if c, err = binder.CoreV1().PersistentVolumeClaims(ns).UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Errorf("the PV controller's claim status write: %v", err)
		return
	}
	c.Status.Conditions = []corev1.PersistentVolumeClaimCondition{{Type: corev1.PersistentVolumeClaimResizing, Status: corev1.ConditionTrue}}
	if _, err := resizer.CoreV1().PersistentVolumeClaims(ns).UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Errorf("the resizer's claim status write: %v", err)
	}
	v, err := binder.CoreV1().PersistentVolumes().Get(ctx, "pv-1", metav1.GetOptions{})
	harness.Must(t, err, "reading the volume")
	v.Status.Message = "checked"
	if _, err := binder.CoreV1().PersistentVolumes().UpdateStatus(ctx, v, metav1.UpdateOptions{}); err != nil {
		t.Errorf("the PV controller's volume status write: %v", err)
	}
	v, err = person.CoreV1().PersistentVolumes().Get(ctx, "pv-1", metav1.GetOptions{})
	harness.Must(t, err, "reading the volume")
	v.Spec.ClaimRef, v.Spec.PersistentVolumeReclaimPolicy = nil, corev1.PersistentVolumeReclaimDelete
	if _, err := person.CoreV1().PersistentVolumes().UpdateStatus(ctx, v, metav1.UpdateOptions{}); err != nil {
		t.Errorf("a status write carrying spec changes: %v", err)
	}
	v, err = person.CoreV1().PersistentVolumes().Get(ctx, "pv-1", metav1.GetOptions{})
	harness.Must(t, err, "reading the volume")
	if v.Spec.ClaimRef == nil || v.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimRetain {
		t.Errorf("a spec change through /status was kept (claimRef %v, reclaim %s): the policies must judge spec on /status too", v.Spec.ClaimRef, v.Spec.PersistentVolumeReclaimPolicy)
	}
}
