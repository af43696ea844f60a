// Package e2ebinder tests pvguard's binder end to end: a real kube-apiserver and etcd, pvguard's
// webhooks installed, and `pvguard serve --binder=...` instances started, stopped and killed by
// the tests. No kube-controller-manager runs, so every binding is pvguard's.
package e2ebinder

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/binder"
	"github.com/pvguard/pvguard/internal/cli"
	"github.com/pvguard/pvguard/internal/devcluster"
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
func startBinder(t *testing.T, mode binder.Mode, mutate func(*cli.ServeFlags)) *harness.Instance {
	t.Helper()
	return startBinderWith(t, mode, cli.BinderHooks{}, mutate)
}

// startBinderWith is startBinder with hooks into the binder (its writes, its cache).
func startBinderWith(t *testing.T, mode binder.Mode, hooks cli.BinderHooks, mutate func(*cli.ServeFlags)) *harness.Instance {
	t.Helper()
	inst, err := h.ServeWith(hooks, func(o *cli.ServeFlags) {
		o.Binder.Mode = mode
		o.Binder.Resync = time.Second
		o.LeaderElection.Elect = false
		o.API.QPS, o.API.Burst = 200, 400
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

func admin(t *testing.T) client.Client { return h.Client(t, "") }
func seed(t *testing.T) client.Client  { return h.Client(t, seeder) }

// hasEvent is a condition for harness.WaitFor: an event of the reason is recorded on the object.
func hasEvent(t *testing.T, ns, name, reason string) func(context.Context) (bool, error) {
	return func(context.Context) (bool, error) {
		return slices.Contains(harness.EventReasons(t, admin(t), ns, name), reason), nil
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
