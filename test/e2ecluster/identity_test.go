package e2ecluster

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/test/cluster"
)

// TestControllersActAsServiceAccounts checks that kube-controller-manager runs its storage
// controllers as their own ServiceAccounts, the identities pvguard's policy knows as built-in
// controllers (policy.builtinControllers), and not as system:kube-controller-manager: with
// --use-service-account-credentials it creates each controller's ServiceAccount in kube-system
// and asks for its token when the controller starts. The persistent-volume-binder account
// appears only once the upstream mode has run.
func TestControllersActAsServiceAccounts(t *testing.T) {
	for _, m := range []cluster.Mode{cl.Mode(), cluster.ModeUpstream} {
		if m == "" {
			continue
		}
		if err := cl.Use(m); err != nil {
			t.Fatal(err)
		}
		want := []string{"pv-protection-controller", "pvc-protection-controller", "expand-controller", "generic-garbage-collector", "attachdetach-controller"}
		if m == cluster.ModeUpstream {
			want = append(want, "persistent-volume-binder")
		}
		for _, sa := range want {
			if err := cl.Client.Get(context.Background(), client.ObjectKey{Namespace: "kube-system", Name: sa}, &corev1.ServiceAccount{}); err != nil {
				t.Errorf("mode %s: ServiceAccount kube-system/%s: %v (kube-controller-manager does not act as its controllers' accounts; %s)", m, sa, err, cl.Logs())
			}
		}
	}
}
