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

// Link vocabulary of the invariants PVG002 and PVG004 guard.
//
// A volume is linked to a claim by spec.claimRef; the link is live when the claim it names exists
// with the uid the claimRef carries. A claim owns a volume when it has completed a binding to it
// (bind-completed, spec.volumeName naming the volume): the volume then holds that claim's data,
// whatever its claimRef says, and upstream's controller re-links the volume to it if the link is
// lost.

// sameLink reports whether two claimRefs (either may be nil) name the same claim with the same uid;
// kind, apiVersion and resourceVersion do not make a different link.
func sameLink(a, b *corev1.ObjectReference) bool {
	if a == nil || b == nil {
		return a == b
	}
	return sameClaimRef(a, b)
}

// linksTo reports whether a claimRef names the claim with its uid.
func linksTo(ref *corev1.ObjectReference, pvc *corev1.PersistentVolumeClaim) bool {
	return ref != nil && ref.Namespace == pvc.Namespace && ref.Name == pvc.Name && ref.UID == pvc.UID
}

// owner returns the live claim that owns the volume: one that completed a binding to it. A claim
// that named the volume without completing (pre-bound by a user) owns nothing yet.
func owner(volumeName string, v View) (*corev1.PersistentVolumeClaim, error) {
	claims, err := v.ClaimsNamingVolume(volumeName)
	if err != nil {
		return nil, fmt.Errorf("listing the claims that name PersistentVolume %s: %w", volumeName, err)
	}
	for _, c := range claims {
		if completedTo(c, volumeName) {
			return c, nil
		}
	}
	return nil, nil
}

// relinks reports whether the pair a review links is a binding completed before: the PV
// controller re-linking a volume to the claim that completed its binding to it (upstream does
// that without any check), or an audit reading such a pair. Its at-bind checks compare with what
// the claim has been given rather than with what it asks for now, since a claim being expanded or
// modified asks for more, or for another class, than its volume has yet.
func relinks(r *Review, b *bindPair) bool {
	return completedTo(b.PVC, b.PV.Name) && (b.Field == "spec.claimRef" || r.audit)
}

// completedTo reports whether the claim has completed a binding to the named volume.
func completedTo(pvc *corev1.PersistentVolumeClaim, volumeName string) bool {
	_, done := pvc.Annotations[AnnBindCompleted]
	return done && pvc.Spec.VolumeName == volumeName
}

// abandoned reports whether a claim has gone to another volume than the named one: upstream's
// controllers undo a volume's link to such a claim (and only to such a claim).
func abandoned(pvc *corev1.PersistentVolumeClaim, volumeName string) bool {
	return pvc.Spec.VolumeName != "" && pvc.Spec.VolumeName != volumeName
}

// provisionedCreate reports whether the review creates a volume an external provisioner made
// (pv.kubernetes.io/provisioned-by). Such a volume holds no data yet, and upstream relies on the
// provisioner saving it even when its claim was deleted or bound elsewhere while provisioning ran:
// the PV controller then releases it and the provisioner deletes it.
func provisionedCreate(r *Review) bool {
	if r.Operation != OperationCreate || r.PV == nil {
		return false
	}
	_, ok := r.PV.Annotations[AnnProvisionedBy]
	return ok
}

// linkString describes a claimRef for messages: the claim it names and its uid, or "nothing".
func linkString(ref *corev1.ObjectReference) string {
	switch {
	case ref == nil:
		return "nothing"
	case ref.UID == "":
		return claimRefString(ref) + " (no uid)"
	}
	return fmt.Sprintf("%s (uid %s)", claimRefString(ref), ref.UID)
}
