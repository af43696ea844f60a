package e2e

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/internal/devcluster"
	"github.com/pvguard/pvguard/test/controlplane"
	"github.com/pvguard/pvguard/test/harness"
	"github.com/pvguard/pvguard/test/testobj"
)

// expectDenied fails unless err is pvguard's denial naming the rule.
func expectDenied(t *testing.T, err error, rule string) string {
	t.Helper()
	if err == nil {
		t.Fatalf("write was admitted; want a denial by %s", rule)
	}
	if !harness.DeniedBy(err, rule) {
		t.Fatalf("error is not a %s denial by pvguard: %v", rule, err)
	}
	return err.Error()
}

// createPair creates an Available volume and a Pending claim that fit each other.
func createPair(t *testing.T, c client.Client, pvName, ns, claim string, pvMods []testobj.PVMod, pvcMods []testobj.PVCMod) (*corev1.PersistentVolume, *corev1.PersistentVolumeClaim) {
	t.Helper()
	ctx := context.Background()
	pv := harness.FreshPV(testobj.PV(pvName, pvMods...))
	harness.Must(t, c.Create(ctx, pv), "creating volume "+pvName)
	pvc := harness.FreshPVC(testobj.PVC(ns, claim, pvcMods...))
	harness.Must(t, c.Create(ctx, pvc), "creating claim "+ns+"/"+claim)
	return pv, pvc
}

// bindAsUpstream performs kube-controller-manager's four bind writes as the binder.
func bindAsUpstream(ctx context.Context, b *actor, pvName, ns, claim string) error {
	return controlplane.UpstreamBind(ctx, b.Client, pvName, ns, claim)
}

func setAnnotation(m *map[string]string, k, v string) {
	if *m == nil {
		*m = map[string]string{}
	}
	(*m)[k] = v
}

// patchPV and patchPVC apply merge patches as kubectl apply does.
var (
	patchPV  = devcluster.PatchPV
	patchPVC = devcluster.PatchPVC
)

func hasWarning(ws []string, rule string) bool {
	for _, w := range ws {
		if strings.Contains(w, "["+rule+" ") {
			return true
		}
	}
	return false
}
