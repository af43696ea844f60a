// Package e2ecallers asks, on a real kube-apiserver, who each caller is to pvguard: which of the
// chart's registrations judges a requester's write (the components', which fail open, or the
// people's, which fail closed), and whether pvguard's webhook port answers a caller that is not
// the apiserver when the chart's client CA is set.
package e2ecallers

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/internal/devcluster"
	"github.com/pvguard/pvguard/test/harness"
)

// TestTenantServiceAccountsAreNotComponents installs the chart's webhook configurations, with a
// components list that adds a backup tool's ServiceAccount (velero/velero) and the CSI drivers'
// namespaces (csi-*) to the chart's defaults, pointed at a port nothing listens on: pvguard is
// down. Every requester then makes the same dry-run create of a claim in a tenant's namespace.
// The components' (kube-controller-manager, kube-scheduler, a node, kube-system's
// ServiceAccounts, the listed ServiceAccount and namespaces) proceed: their registration fails
// open. Everyone else's is refused by the people's registration, which fails closed: a tenant's
// ServiceAccount, a ServiceAccount of the listed tool's namespace that is not the listed one, one
// of a namespace whose name only starts like kube-system, and a person. The ServiceAccounts are
// asked twice: impersonated, and with real tokens from the TokenRequest API (the identity the
// apiserver gives a pod's ServiceAccount).
func TestTenantServiceAccountsAreNotComponents(t *testing.T) {
	assets, err := devcluster.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	cp, err := devcluster.StartWith(assets, devcluster.Options{LogDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	ctx := context.Background()
	admin, err := devcluster.NewClient(cp.Config, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(cp.Config)
	const tenant = "team-a"
	for _, ns := range []string{tenant, "velero", "csi-drivers", "kube-systems"} {
		harness.Must(t, admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}), "namespace "+ns)
	}
	// Everyone may create claims: the apiserver's authorization is not what is asked here.
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "claim-writer"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"}, Verbs: []string{"create"}},
	}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "claim-writer"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:authenticated"}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name}}
	harness.Must(t, admin.Create(ctx, role), "ClusterRole")
	harness.Must(t, admin.Create(ctx, binding), "ClusterRoleBinding")

	// pvguard down: its webhook configurations point at a port nothing listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	_ = ln.Close()
	identities := []any{
		map[string]any{"user": "system:kube-controller-manager"},
		map[string]any{"user": "system:kube-scheduler"},
		map[string]any{"group": "system:nodes"},
		map[string]any{"namespace": "kube-system"},
		map[string]any{"serviceAccount": "velero/velero"},
		map[string]any{"namespace": "csi-*"},
	}
	harness.Must(t, devcluster.InstallWebhooks(ctx, cp.Config, devcluster.WebhookOptions{
		BaseURL: "https://" + closed, NoWait: true,
		Values: map[string]any{"webhook": map[string]any{"components": map[string]any{"identities": identities}}},
	}), "installing the chart's webhook configurations")

	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	create := func(c client.Client) error { return c.Create(ctx, claim.DeepCopy(), client.DryRunAll) }
	// refusedForWantOfPVGuard: the write failed on the people's claim webhook, which pvguard did
	// not answer.
	refusedForWantOfPVGuard := func(err error) bool {
		return harness.WebhookUnreachable(err) && strings.Contains(err.Error(), `"validate-pvc.pvguard.io"`)
	}
	impersonated := func(user string, groups ...string) client.Client {
		c, err := devcluster.NewClient(cp.Config, nil, user, groups...)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	// The apiserver loads webhook configurations through an informer: wait until a person's write
	// meets them.
	person := impersonated("pat@example.com")
	var last error
	harness.WaitFor(t, time.Minute, "the webhook configurations in effect", func(context.Context) (bool, error) {
		last = create(person)
		return refusedForWantOfPVGuard(last), nil
	})

	sa := func(ns, name string) (string, []string) {
		return "system:serviceaccount:" + ns + ":" + name, []string{"system:serviceaccounts", "system:serviceaccounts:" + ns}
	}
	type requester struct {
		name      string
		user      string
		groups    []string
		component bool
	}
	requesters := []requester{
		{name: "kube-controller-manager", user: "system:kube-controller-manager", component: true},
		{name: "kube-scheduler", user: "system:kube-scheduler", component: true},
		{name: "a node", user: "system:node:node-a", groups: []string{"system:nodes"}, component: true},
		{name: "a person", user: "pat@example.com"},
		{name: "a person in a group of people", user: "sam@example.com", groups: []string{"storage-admins"}},
	}
	for _, s := range []struct {
		name, ns, sa string
		component    bool
	}{
		{"kube-system's persistent-volume-binder", "kube-system", "persistent-volume-binder", true},
		{"the listed backup tool's ServiceAccount", "velero", "velero", true},
		{"a ServiceAccount of a namespace the csi-* prefix lists", "csi-drivers", "csi-provisioner", true},
		{"a tenant's ServiceAccount", tenant, "app", false},
		{"another ServiceAccount of the backup tool's namespace", "velero", "restic", false},
		{"a ServiceAccount of a namespace named like kube-system", "kube-systems", "persistent-volume-binder", false},
		{"a tenant's default ServiceAccount", tenant, "default", false},
	} {
		user, groups := sa(s.ns, s.sa)
		requesters = append(requesters, requester{name: s.name, user: user, groups: groups, component: s.component})
	}

	check := func(t *testing.T, r requester, c client.Client) {
		t.Helper()
		err := create(c)
		switch {
		case r.component && err != nil:
			t.Errorf("%s (%s): %v, want the write admitted (the components' registration fails open)", r.name, r.user, err)
		case !r.component && err == nil:
			t.Errorf("%s (%s): admitted while pvguard is down, want it refused by the people's registration (it went to the components')", r.name, r.user)
		case !r.component && !refusedForWantOfPVGuard(err):
			t.Errorf("%s (%s): %v, want it refused for want of the people's webhook validate-pvc.pvguard.io", r.name, r.user, err)
		}
	}
	t.Run("impersonated", func(t *testing.T) {
		for _, r := range requesters {
			check(t, r, impersonated(r.user, r.groups...))
		}
	})
	t.Run("ServiceAccount tokens", func(t *testing.T) {
		for _, r := range requesters {
			ns, name, ok := strings.Cut(strings.TrimPrefix(r.user, "system:serviceaccount:"), ":")
			if !ok || !strings.HasPrefix(r.user, "system:serviceaccount:") {
				continue
			}
			token, err := harness.ServiceAccountToken(ctx, cs, ns, name)
			if err != nil {
				t.Fatal(err)
			}
			cfg := rest.AnonymousClientConfig(cp.Config)
			cfg.BearerToken = token
			c, err := devcluster.NewClient(cfg, nil, "")
			if err != nil {
				t.Fatal(err)
			}
			check(t, r, c)
		}
	})
}
