package controlplane

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// BinderUser is kube-controller-manager's persistent-volume-binder identity. The apiserver's
// bootstrap RBAC gives it exactly the permissions of the upstream controller, so impersonating it
// reproduces the controller's writes faithfully.
const BinderUser = "system:serviceaccount:kube-system:persistent-volume-binder"

// BinderGroups are the groups the apiserver gives that service account.
var BinderGroups = []string{"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"}

// UpstreamBind performs the upstream PersistentVolume controller's bind() through c: PV spec
// (claimRef with the claim's uid; bound-by-controller unless the volume was pre-bound), PV status Bound, PVC spec (volumeName,
// bind-completed), PVC status Bound, in that order. It returns the first refused step's error,
// naming the step.
func UpstreamBind(ctx context.Context, c client.Client, pvName, namespace, claim string) error {
	pv := &corev1.PersistentVolume{}
	pvc := &corev1.PersistentVolumeClaim{}
	if err := c.Get(ctx, client.ObjectKey{Name: pvName}, pv); err != nil {
		return fmt.Errorf("reading volume %s: %w", pvName, err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: claim}, pvc); err != nil {
		return fmt.Errorf("reading claim %s/%s: %w", namespace, claim, err)
	}
	if ref := pv.Spec.ClaimRef; ref == nil || ref.Namespace != namespace || ref.Name != claim {
		setAnnotation(&pv.ObjectMeta.Annotations, "pv.kubernetes.io/bound-by-controller", "yes")
	}
	pv.Spec.ClaimRef = &corev1.ObjectReference{
		Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: namespace, Name: claim,
		UID: pvc.UID, ResourceVersion: pvc.ResourceVersion,
	}
	if err := c.Update(ctx, pv); err != nil {
		return fmt.Errorf("step 1 (PV spec): %w", err)
	}
	pv.Status.Phase = corev1.VolumeBound
	if err := c.Status().Update(ctx, pv); err != nil {
		return fmt.Errorf("step 2 (PV status): %w", err)
	}
	if pvc.Spec.VolumeName == "" {
		setAnnotation(&pvc.ObjectMeta.Annotations, "pv.kubernetes.io/bound-by-controller", "yes")
	}
	pvc.Spec.VolumeName = pvName
	setAnnotation(&pvc.ObjectMeta.Annotations, "pv.kubernetes.io/bind-completed", "yes")
	if err := c.Update(ctx, pvc); err != nil {
		return fmt.Errorf("step 3 (PVC spec): %w", err)
	}
	pvc.Status.Phase = corev1.ClaimBound
	pvc.Status.Capacity = pv.Spec.Capacity
	pvc.Status.AccessModes = pv.Spec.AccessModes
	if err := c.Status().Update(ctx, pvc); err != nil {
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
