// Package e2ebinder tests pvguard's binder end to end: a real kube-apiserver and etcd, pvguard's
// webhooks installed, and `pvguard serve --binder=...` instances started, stopped and killed by
// the tests. No kube-controller-manager runs, so every binding is pvguard's.
package e2ebinder

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/devcluster"
	"github.com/pvguard/pvguard/internal/cli"
	"github.com/pvguard/pvguard/test/harness"
)

var h *harness.Harness

// seeder is exempt from every rule: it creates states pvguard would refuse at admission, as
// clusters have from before pvguard was installed.
const seeder = "e2e-seeder"

const policyConfig = `
exemptions:
  users: [e2e-seeder]
`

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	var err error
	if h, err = harness.Start(policyConfig); err != nil {
		fmt.Fprintln(os.Stderr, "e2ebinder:", err)
		return 1
	}
	defer func() { _ = h.Stop() }()
	// The webhook instance runs for the whole suite; binders come and go per test.
	webhooks, err := h.Serve(nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2ebinder:", err)
		return 1
	}
	defer func() { _ = webhooks.Stop() }()
	if err := h.InstallWebhooks(webhooks); err != nil {
		fmt.Fprintln(os.Stderr, "e2ebinder:", err)
		return 1
	}
	c, err := devcluster.NewClient(h.Config, nil, "")
	if err == nil {
		err = c.Create(context.Background(), &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "e2e-seeder"},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: seeder}},
		})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2ebinder: seeder RBAC:", err)
		return 1
	}
	return m.Run()
}

// startBinder runs `pvguard serve --binder=<mode>` until the test ends.
func startBinder(t *testing.T, mode string, mutate func(*cli.ServeOptions)) *harness.Instance {
	t.Helper()
	inst, err := h.Serve(func(o *cli.ServeOptions) {
		o.Binder = mode
		o.BinderResync = time.Second
		o.LeaderElect = false
		o.KubeAPIQPS, o.KubeAPIBurst = 200, 400
		if mutate != nil {
			mutate(o)
		}
	})
	if err != nil {
		t.Fatalf("starting binder: %v", err)
	}
	t.Cleanup(func() { _ = inst.Stop() })
	return inst
}

func admin(t *testing.T) client.Client {
	t.Helper()
	c, err := devcluster.NewClient(h.Config, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func seed(t *testing.T) client.Client {
	t.Helper()
	c, err := devcluster.NewClient(h.Config, nil, seeder)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// namespace creates a fresh namespace; its name also prefixes the test's cluster-scoped objects.
func namespace(t *testing.T) string {
	return harness.Namespace(t, admin(t), 30, "")
}

func must(t *testing.T, err error, what string) { harness.Must(t, err, what) }

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, error)) {
	harness.WaitFor(t, 100*time.Millisecond, timeout, what, cond)
}

func getPV(t *testing.T, name string) *corev1.PersistentVolume {
	t.Helper()
	pv := &corev1.PersistentVolume{}
	must(t, admin(t).Get(context.Background(), client.ObjectKey{Name: name}, pv), "reading volume "+name)
	return pv
}

func getPVC(t *testing.T, ns, name string) *corev1.PersistentVolumeClaim {
	t.Helper()
	pvc := &corev1.PersistentVolumeClaim{}
	must(t, admin(t).Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, pvc), "reading claim "+ns+"/"+name)
	return pvc
}

// boundTo reports whether the claim and volume are bound to each other and both Bound.
func boundTo(ns, claim, volume string) func() (bool, error) {
	return func() (bool, error) {
		c, err := devcluster.NewClient(h.Config, nil, "")
		if err != nil {
			return false, err
		}
		pvc := &corev1.PersistentVolumeClaim{}
		pv := &corev1.PersistentVolume{}
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: claim}, pvc); err != nil {
			return false, err
		}
		if err := c.Get(context.Background(), client.ObjectKey{Name: volume}, pv); err != nil {
			return false, err
		}
		ref := pv.Spec.ClaimRef
		return pvc.Spec.VolumeName == volume && pvc.Status.Phase == corev1.ClaimBound &&
			ref != nil && ref.UID == pvc.UID && pv.Status.Phase == corev1.VolumeBound &&
			pvc.Annotations["pv.kubernetes.io/bind-completed"] == "yes", nil
	}
}

// eventReasons lists the reasons of events recorded on an object.
func eventReasons(t *testing.T, ns, name string) []string {
	t.Helper()
	var list corev1.EventList
	must(t, admin(t).List(context.Background(), &list, client.InNamespace(ns)), "listing events")
	var out []string
	for _, e := range list.Items {
		if e.InvolvedObject.Name == name {
			out = append(out, e.Reason)
		}
	}
	return out
}

func hasEvent(t *testing.T, ns, name, reason string) func() (bool, error) {
	return func() (bool, error) {
		for _, r := range eventReasons(t, ns, name) {
			if r == reason {
				return true, nil
			}
		}
		return false, nil
	}
}

// writeLog records the binder's writes (from its BeforeWrite hook) across instances.
type writeLog struct {
	mu     sync.Mutex
	counts map[string]int
}

func (w *writeLog) hook(instance string) func(op string, obj client.Object) error {
	return func(op string, obj client.Object) error {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.counts == nil {
			w.counts = map[string]int{}
		}
		w.counts[op+" "+obj.GetNamespace()+"/"+obj.GetName()]++
		w.counts["instance "+instance]++
		return nil
	}
}

func (w *writeLog) count(k string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.counts[k]
}

// metricValue reads a metric from an instance's /metrics, summed over its series (0 when
// absent).
func metricValue(t *testing.T, inst *harness.Instance, name string) float64 {
	t.Helper()
	v, err := harness.MetricSum(h.HTTPSClient(), inst.BaseURL, name, nil)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
