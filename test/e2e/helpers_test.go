package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/devcluster"
	"github.com/pvguard/pvguard/test/controlplane"
	"github.com/pvguard/pvguard/test/testobj"
)

// expectDenied fails unless err is pvguard's denial naming the rule.
func expectDenied(t *testing.T, err error, rule string) string {
	t.Helper()
	if err == nil {
		t.Fatalf("write was admitted; want a denial by %s", rule)
	}
	msg := err.Error()
	if !strings.Contains(msg, "denied the request") || !strings.Contains(msg, "["+rule+" ") {
		t.Fatalf("error is not a %s denial by pvguard: %v", rule, err)
	}
	return msg
}

func mustSucceed(t *testing.T, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// fresh strips what the apiserver owns so a builder's object can be created.
func freshPV(pv *corev1.PersistentVolume) *corev1.PersistentVolume {
	pv.Status = corev1.PersistentVolumeStatus{}
	return pv
}

func freshPVC(pvc *corev1.PersistentVolumeClaim) *corev1.PersistentVolumeClaim {
	pvc.UID = ""
	pvc.Status = corev1.PersistentVolumeClaimStatus{}
	return pvc
}

// createPair creates an Available volume and a Pending claim that fit each other.
func createPair(t *testing.T, c client.Client, pvName, ns, claim string, pvMods []testobj.PVMod, pvcMods []testobj.PVCMod) (*corev1.PersistentVolume, *corev1.PersistentVolumeClaim) {
	t.Helper()
	ctx := context.Background()
	pv := freshPV(testobj.PV(pvName, pvMods...))
	mustSucceed(t, c.Create(ctx, pv), "creating volume "+pvName)
	pvc := freshPVC(testobj.PVC(ns, claim, pvcMods...))
	mustSucceed(t, c.Create(ctx, pvc), "creating claim "+ns+"/"+claim)
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

// eventually retries f until it returns nil or a minute passes (config reloads, cache sync).
func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		last = f()
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("%s: %v", what, last)
	}
}

func hasWarning(ws []string, rule string) bool {
	for _, w := range ws {
		if strings.Contains(w, "["+rule+" ") {
			return true
		}
	}
	return false
}
