package devcli

import (
	"slices"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/pvguard/pvguard/binder"
	"github.com/pvguard/pvguard/internal/cli"
	"github.com/pvguard/pvguard/policy"
)

// TestDevRunsAsTheChartInstalls holds pvguard-dev to what the chart installs: its own
// ServiceAccount, bound by every rendered binding, the Deployment's arguments (binder active,
// self-managed certificates, leader election in the release namespace) and a policy config that
// counts that ServiceAccount as a binding controller, so that pvguard's own binds draw no PVG013.
func TestDevRunsAsTheChartInstalls(t *testing.T) {
	ci, err := renderChartInstall("pvguard", "pvguard-system", devValues())
	if err != nil {
		t.Fatal(err)
	}
	if ci.ServiceAccount != "pvguard" || ci.Username() != "system:serviceaccount:pvguard-system:pvguard" {
		t.Fatalf("ServiceAccount %q (%s), want pvguard in pvguard-system", ci.ServiceAccount, ci.Username())
	}
	var kinds []string
	for _, obj := range ci.Objects {
		kinds = append(kinds, obj.GetKind())
		if k := obj.GetKind(); k == "ClusterRoleBinding" || k == "RoleBinding" {
			var b rbacv1.RoleBinding
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &b); err != nil {
				t.Fatal(err)
			}
			want := []rbacv1.Subject{{Kind: "ServiceAccount", Name: ci.ServiceAccount, Namespace: ci.Namespace}}
			if !slices.Equal(b.Subjects, want) {
				t.Errorf("%s %s binds %+v, want only the ServiceAccount", k, b.Name, b.Subjects)
			}
		}
	}
	slices.Sort(kinds)
	if want := []string{"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ServiceAccount"}; !slices.Equal(kinds, want) {
		t.Errorf("objects to create: %v, want %v", kinds, want)
	}

	o, err := cli.ParseServeArgs(ci.ServeArgs)
	if err != nil {
		t.Fatal(err)
	}
	if o.Binder.Mode != binder.ModeActive || o.Certs.Secret != "pvguard-tls" || o.Namespace != ci.Namespace ||
		!o.LeaderElection.Elect || o.LeaderElection.Namespace != ci.Namespace || o.LeaderElection.ID != "pvguard-leader" {
		t.Errorf("serve options from the chart's arguments %q: %+v", ci.ServeArgs, o)
	}

	cfg, err := policy.ParseConfig([]byte(ci.Policy))
	if err != nil {
		t.Fatalf("the chart's policy config: %v\n%s", err, ci.Policy)
	}
	self := policy.UserInfo{Username: ci.Username(), Groups: []string{"system:serviceaccounts", "system:authenticated"}}
	if !cfg.IsController(self) {
		t.Errorf("the policy config does not count %s as a binding controller:\n%s", self.Username, ci.Policy)
	}
	if !strings.Contains(ci.Policy, "volume-grab") {
		t.Errorf("the policy config lacks the demo's volume-grab rule:\n%s", ci.Policy)
	}
}

func TestDevChartInstallErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values map[string]any
		want   string
	}{
		{"no ServiceAccount created", map[string]any{"serviceAccount": map[string]any{"create": false, "name": "someone"}}, "rendered no ServiceAccount"},
		{"invalid values", map[string]any{"replicas": 0}, "replicas"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			values := devValues()
			for k, v := range tc.values {
				values[k] = v
			}
			_, err := renderChartInstall("pvguard", "pvguard-system", values)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestRenewIn(t *testing.T) {
	for _, tc := range []struct {
		left, want time.Duration
	}{
		{time.Hour, 48 * time.Minute},
		{10 * time.Minute, 8 * time.Minute},
		{time.Second, time.Second},
		{0, time.Second},
		{-time.Hour, time.Second},
	} {
		if got := renewIn(tc.left); got != tc.want {
			t.Errorf("renewIn(%s) = %s, want %s", tc.left, got, tc.want)
		}
	}
}
