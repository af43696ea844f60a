package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

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

// bindAsUpstream performs kube-controller-manager's bind(): PV spec, PV status, PVC spec, PVC
// status, in that order, as the persistent-volume-binder service account. It returns the first
// refused step's error, naming the step.
func bindAsUpstream(ctx context.Context, b *actor, pvName, ns, claim string) error {
	pv := &corev1.PersistentVolume{}
	pvc := &corev1.PersistentVolumeClaim{}
	if err := b.Get(ctx, client.ObjectKey{Name: pvName}, pv); err != nil {
		return fmt.Errorf("reading volume: %w", err)
	}
	if err := b.Get(ctx, client.ObjectKey{Namespace: ns, Name: claim}, pvc); err != nil {
		return fmt.Errorf("reading claim: %w", err)
	}
	pv.Spec.ClaimRef = &corev1.ObjectReference{
		Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: ns, Name: claim,
		UID: pvc.UID, ResourceVersion: pvc.ResourceVersion,
	}
	setAnnotation(&pv.Annotations, "pv.kubernetes.io/bound-by-controller", "yes")
	if err := b.Update(ctx, pv); err != nil {
		return fmt.Errorf("step 1 (PV spec): %w", err)
	}
	pv.Status.Phase = corev1.VolumeBound
	if err := b.Status().Update(ctx, pv); err != nil {
		return fmt.Errorf("step 2 (PV status): %w", err)
	}
	if pvc.Spec.VolumeName == "" {
		setAnnotation(&pvc.Annotations, "pv.kubernetes.io/bound-by-controller", "yes")
	}
	pvc.Spec.VolumeName = pvName
	setAnnotation(&pvc.Annotations, "pv.kubernetes.io/bind-completed", "yes")
	if err := b.Update(ctx, pvc); err != nil {
		return fmt.Errorf("step 3 (PVC spec): %w", err)
	}
	pvc.Status.Phase = corev1.ClaimBound
	pvc.Status.Capacity = pv.Spec.Capacity
	pvc.Status.AccessModes = pv.Spec.AccessModes
	if err := b.Status().Update(ctx, pvc); err != nil {
		return fmt.Errorf("step 4 (PVC status): %w", err)
	}
	return nil
}

func setAnnotation(m *map[string]string, k, v string) {
	if *m == nil {
		*m = map[string]string{}
	}
	(*m)[k] = v
}

// patchPV applies a merge patch built from a mutation of the live volume, as kubectl apply does.
func patchPV(ctx context.Context, c client.Client, name string, mutate func(*corev1.PersistentVolume)) error {
	pv := &corev1.PersistentVolume{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, pv); err != nil {
		return err
	}
	base := pv.DeepCopy()
	mutate(pv)
	return c.Patch(ctx, pv, client.MergeFrom(base))
}

func patchPVC(ctx context.Context, c client.Client, ns, name string, mutate func(*corev1.PersistentVolumeClaim)) error {
	pvc := &corev1.PersistentVolumeClaim{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pvc); err != nil {
		return err
	}
	base := pvc.DeepCopy()
	mutate(pvc)
	return c.Patch(ctx, pvc, client.MergeFrom(base))
}

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
