package e2ecel

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/charts"
	"github.com/pvguard/pvguard/internal/cli"
	"github.com/pvguard/pvguard/internal/devcluster"
	"github.com/pvguard/pvguard/storage"
	"github.com/pvguard/pvguard/test/harness"
)

// Who the test writes as: ops is a person the reloaded config exempts from PVG012, pat one it
// never exempts. Both are impersonated with system:masters for RBAC, which exempts them from
// nothing.
const (
	opsUser = "ops@example.com"
	patUser = "pat@example.com"
)

// TestAdmissionPoliciesFollowTheConfig installs the chart's admission policies and their
// parameter object on a real kube-apiserver and runs two pvguard replicas with the chart's
// --admission-policy-params, the first elected:
//
//   - the elected replica keeps the parameter object equal to its config: it re-creates it when
//     deleted and puts it back when edited by hand;
//   - the other replica, whose config file differs (a mounted ConfigMap that lags), reports the
//     drift (pvguard_admission_policy_params_in_sync 0) until its config is the same;
//   - a person's removal of a claim's pvc-protection through /status is refused by the policy;
//     after a hot reload of the config that exempts the person from PVG012 (no new policy, no
//     helm upgrade) the same removal is admitted, by the policies and the webhook;
//   - with pvguard stopped and its webhooks gone, the policies alone still refuse the destructive
//     writes through /status (a protection finalizer, bind-completed) of a person the config does
//     not exempt, admit the controllers' status writes, and admit the exempt person's removal.
func TestAdmissionPoliciesFollowTheConfig(t *testing.T) {
	ctx := context.Background()
	h, err := harness.Start("{}\n")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Stop() })
	admin, err := client.New(h.Config, client.Options{})
	harness.Must(t, err, "admin client")

	ns := devcluster.ChartNamespace
	harness.Must(t, admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}), "pvguard's namespace")
	manifests, err := charts.Render(devcluster.ChartRelease, ns, nil)
	harness.Must(t, err, "rendering the chart")
	var paramsName string
	var policies int
	for _, m := range manifests {
		switch m.Object.GetKind() {
		case "ConfigMap":
			if strings.HasSuffix(m.Object.GetName(), "-admission-policy-params") {
				paramsName = m.Object.GetName()
				harness.Must(t, admin.Create(ctx, m.Object), "the parameter object")
			}
		case "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
			policies++
			harness.Must(t, admin.Create(ctx, m.Object), m.Object.GetName())
		}
	}
	if paramsName == "" || policies == 0 {
		t.Fatalf("the chart rendered no parameter object or no policies (%d)", policies)
	}
	paramsKey := client.ObjectKey{Namespace: ns, Name: paramsName}

	// A bound pair, as the PV controller leaves it, with its protection finalizers.
	tenantNS := "team-a"
	claim, pv := boundPair(ctx, t, kubernetes.NewForConfigOrDie(h.Config), tenantNS)

	serve := func(configFile string) *harness.Instance {
		t.Helper()
		inst, err := h.Serve(func(o *cli.ServeFlags) {
			o.AdmissionPolicyParams, o.Namespace, o.LeaderElection.Namespace = paramsName, ns, ns
			o.Audit.Interval = 0
			if configFile != "" {
				o.ConfigFile = configFile
			}
		})
		harness.Must(t, err, "starting pvguard")
		t.Cleanup(func() { _ = inst.Stop() })
		return inst
	}
	hc := h.HTTPSClient()
	inSync := func(inst *harness.Instance, want float64) func(context.Context) (bool, error) {
		return func(context.Context) (bool, error) {
			v, err := harness.MetricSum(hc, inst.BaseURL, "pvguard_admission_policy_params_in_sync", nil)
			return v == want, err
		}
	}
	params := func(ctx context.Context) (*corev1.ConfigMap, error) {
		cm := &corev1.ConfigMap{}
		return cm, admin.Get(ctx, paramsKey, cm)
	}
	exemptOps := "rules:\n  PVG012:\n    exemptions: {users: [" + opsUser + "]}\n"

	leader := serve("")
	harness.Must(t, h.InstallWebhooks(leader), "installing the webhooks")
	harness.WaitFor(t, time.Minute, "the first replica elected", func(ctx context.Context) (bool, error) {
		l := &coordinationv1.Lease{}
		err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: cli.DefaultServeFlags().LeaderElection.ID}, l)
		return err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "", client.IgnoreNotFound(err)
	})
	harness.WaitFor(t, time.Minute, "the elected replica to report the parameters in sync", inSync(leader, 1))
	ahead := filepath.Join(t.TempDir(), "policy.yaml")
	harness.Must(t, os.WriteFile(ahead, []byte(exemptOps), 0o600), "the second replica's config")
	follower := serve(ahead)
	harness.WaitFor(t, time.Minute, "the replica with another config to report the drift", inSync(follower, 0))

	// The elected replica repairs the object: edited by hand, then deleted.
	cm, err := params(ctx)
	harness.Must(t, err, "reading the parameter object")
	cm.Data["PVG012.exemptions.users"] = patUser
	harness.Must(t, admin.Update(ctx, cm), "editing the parameter object")
	harness.WaitFor(t, time.Minute, "the edit undone", func(ctx context.Context) (bool, error) {
		cm, err := params(ctx)
		return err == nil && cm.Data["PVG012.exemptions.users"] == "", err
	})
	harness.Must(t, admin.Delete(ctx, cm), "deleting the parameter object")
	harness.WaitFor(t, time.Minute, "the parameter object re-created", func(ctx context.Context) (bool, error) {
		cm, err := params(ctx)
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil && len(cm.Data) > 0, err
	})
	harness.WaitFor(t, time.Minute, "the elected replica in sync again", inSync(leader, 1))

	ops, pat := impersonate(h.Config, opsUser), impersonate(h.Config, patUser)
	dropProtection := func(cs *kubernetes.Clientset) error {
		c, err := cs.CoreV1().PersistentVolumeClaims(tenantNS).Get(ctx, claim.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		c.Finalizers = nil
		_, err = cs.CoreV1().PersistentVolumeClaims(tenantNS).UpdateStatus(ctx, c, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}
	// The apiserver's admission policies read the parameter object through an informer of
	// their own: a re-created object reaches it a moment after pvguard reports it in sync.
	recreated := time.Now()
	harness.Eventually(t, time.Minute, "the policies reading the re-created parameter object", func(context.Context) error {
		if err := dropProtection(ops); !refusedByPolicy(err, "PVG012") {
			return fmt.Errorf("before the reload, ops's removal of pvc-protection through /status: %v, want the PVG012 policy's refusal", err)
		}
		return nil
	})
	t.Logf("the policies read the re-created parameter object %v after pvguard reported it in sync", time.Since(recreated).Round(time.Millisecond))

	// The hot reload: the file pvguard watches now exempts ops from PVG012.
	harness.Must(t, h.SetPolicy(exemptOps), "changing the policy config")
	harness.WaitFor(t, time.Minute, "the reloaded config in the parameter object", func(ctx context.Context) (bool, error) {
		cm, err := params(ctx)
		return err == nil && cm.Data["PVG012.exemptions.users"] == opsUser, err
	})
	harness.WaitFor(t, time.Minute, "both replicas in sync", func(ctx context.Context) (bool, error) {
		a, err := inSync(leader, 1)(ctx)
		if err != nil || !a {
			return false, err
		}
		return inSync(follower, 1)(ctx)
	})
	harness.Eventually(t, time.Minute, "ops's removal admitted by the policies and the webhook", func(context.Context) error {
		return dropProtection(ops)
	})
	if err := dropProtection(pat); !refusedByPolicy(err, "PVG012") {
		t.Errorf("after the reload, pat's removal of pvc-protection through /status: %v, want the PVG012 policy's refusal", err)
	}

	// pvguard down, and its webhooks gone: the policies alone.
	for _, inst := range []*harness.Instance{follower, leader} {
		harness.Must(t, inst.Stop(), "stopping pvguard")
	}
	for _, obj := range []client.Object{&admissionregistrationv1.ValidatingWebhookConfiguration{}, &admissionregistrationv1.MutatingWebhookConfiguration{}} {
		obj.SetName(devcluster.ChartRelease)
		harness.Must(t, client.IgnoreNotFound(admin.Delete(ctx, obj)), "removing pvguard's webhooks")
	}
	refused := []struct {
		what, rule string
		write      func() error
	}{
		{"pat's removal of pvc-protection through /status", "PVG012", func() error { return dropProtection(pat) }},
		{"pat's removal of pv-protection through /status", "PVG012", func() error {
			v, err := pat.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			v.Finalizers = nil
			_, err = pat.CoreV1().PersistentVolumes().UpdateStatus(ctx, v, metav1.UpdateOptions{})
			return err
		}},
		{"pat's removal of bind-completed through /status", "PVG003", func() error {
			c, err := pat.CoreV1().PersistentVolumeClaims(tenantNS).Get(ctx, claim.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			delete(c.Annotations, storage.AnnBindCompleted)
			_, err = pat.CoreV1().PersistentVolumeClaims(tenantNS).UpdateStatus(ctx, c, metav1.UpdateOptions{})
			return err
		}},
	}
	for _, r := range refused {
		if err := r.write(); !refusedByPolicy(err, r.rule) {
			t.Errorf("pvguard down: %s: %v, want the %s policy's refusal", r.what, err, r.rule)
		}
	}
	checkStatusWritesAdmitted(ctx, t, h.Config, tenantNS)
	if err := dropProtection(ops); err != nil {
		t.Errorf("pvguard down: ops's removal of pvc-protection through /status, which the reloaded config exempts: %v", err)
	}
}

// refusedByPolicy reports whether err is the refusal of a rule's admission policy.
func refusedByPolicy(err error, rule string) bool {
	return err != nil && strings.Contains(err.Error(), "ValidatingAdmissionPolicy") && strings.Contains(err.Error(), "["+rule+" ")
}

func impersonate(cfg *rest.Config, user string) *kubernetes.Clientset {
	cfg = rest.CopyConfig(cfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:masters", "system:authenticated"}}
	return kubernetes.NewForConfigOrDie(cfg)
}

// boundPair creates a claim "data" in ns and a volume "pv-1" bound to each other as the PV
// controller leaves them, with the protection finalizers the apiserver adds.
func boundPair(ctx context.Context, t *testing.T, admin *kubernetes.Clientset, ns string) (*corev1.PersistentVolumeClaim, *corev1.PersistentVolume) {
	t.Helper()
	harness.Must(t, create(ctx, admin.CoreV1().Namespaces(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}), "namespace")
	claim, err := admin.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}, metav1.CreateOptions{})
	harness.Must(t, err, "claim")
	pv, err := admin.CoreV1().PersistentVolumes().Create(ctx, &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-1", Annotations: map[string]string{storage.AnnBoundByController: "yes"}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/pv-1"}},
			ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: ns, Name: "data", UID: claim.UID},
		},
	}, metav1.CreateOptions{})
	harness.Must(t, err, "volume")
	pv.Status.Phase = corev1.VolumeBound
	pv, err = admin.CoreV1().PersistentVolumes().UpdateStatus(ctx, pv, metav1.UpdateOptions{})
	harness.Must(t, err, "volume status")
	claim.Spec.VolumeName = pv.Name
	claim.Annotations = map[string]string{storage.AnnBindCompleted: "yes", storage.AnnBoundByController: "yes"}
	claim, err = admin.CoreV1().PersistentVolumeClaims(ns).Update(ctx, claim, metav1.UpdateOptions{})
	harness.Must(t, err, "claim bind")
	claim.Status.Phase = corev1.ClaimBound
	claim, err = admin.CoreV1().PersistentVolumeClaims(ns).UpdateStatus(ctx, claim, metav1.UpdateOptions{})
	harness.Must(t, err, "claim status")
	if len(claim.Finalizers) == 0 || len(pv.Finalizers) == 0 {
		t.Fatalf("the apiserver added no protection finalizers (claim %v, volume %v)", claim.Finalizers, pv.Finalizers)
	}
	return claim, pv
}
