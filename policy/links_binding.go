package policy

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Helpers for the rules that guard a binding once one half of it exists (PVG002 to PVG008).

// oldClaimRef is the claimRef of the volume before the write, or nil on create.
func oldClaimRef(r *Review) *corev1.ObjectReference {
	if r.OldPV == nil {
		return nil
	}
	return r.OldPV.Spec.ClaimRef
}

// liveClaim returns the claim a claimRef names when it still exists: by namespace and name, and
// by uid when the claimRef carries one. A claim deleted and re-created under the same name is not
// the claim the reference was made for, so it does not count.
func liveClaim(ref *corev1.ObjectReference, v View) (*corev1.PersistentVolumeClaim, error) {
	pvc, err := namedClaim(ref, v)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", claimRefString(ref), err)
	}
	if pvc == nil || (ref.UID != "" && ref.UID != pvc.UID) {
		return nil, nil
	}
	return pvc, nil
}

// stillBoundClaim returns the claim a volume update keeps bound: the write leaves claimRef as
// it was and that claim is live. Rules that protect a made binding use it; a write that sets or
// changes claimRef is a bind instead, judged with newBinding.
func stillBoundClaim(r *Review, v View) (*corev1.PersistentVolumeClaim, error) {
	if r.Kind != KindPersistentVolume || r.PV == nil || r.OldPV == nil {
		return nil, nil
	}
	old, cur := r.OldPV.Spec.ClaimRef, r.PV.Spec.ClaimRef
	if old == nil || cur == nil || !sameClaimRef(old, cur) {
		return nil, nil
	}
	pvc, err := boundClaim(r.PV, v)
	if err != nil {
		return nil, fmt.Errorf("reading the claim bound to %s: %w", pvRef(r.PV), err)
	}
	return pvc, nil
}

// claimRefString names the claim a claimRef points at, the way messages name objects.
func claimRefString(ref *corev1.ObjectReference) string {
	return ObjectRef{Kind: KindPersistentVolumeClaim, Namespace: ref.Namespace, Name: ref.Name}.String()
}

// claimCapacity is what a bound claim has been given: status.capacity once the binder or the
// resizer has recorded it, else the request.
func claimCapacity(pvc *corev1.PersistentVolumeClaim) resource.Quantity {
	if q, ok := pvc.Status.Capacity[corev1.ResourceStorage]; ok {
		return q
	}
	return claimRequest(pvc)
}

// classForMessage renders a storage class for messages; the empty class is easy to miss otherwise.
func classForMessage(c string) string {
	if c == "" {
		return `"" (no class)`
	}
	return fmt.Sprintf("%q", c)
}
