package policy

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/pvguard/pvguard/storage"
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
	if old == nil || cur == nil || !storage.SameClaimRef(old, cur) {
		return nil, nil
	}
	pvc, err := boundClaim(r.PV, v)
	if err != nil {
		return nil, fmt.Errorf("reading the claim bound to %s: %w", pvRef(r.PV), err)
	}
	return pvc, nil
}

// claimRefString names the claim a claimRef points at, the way errors name objects (errors go to
// pvguard's logs, never to a reader).
func claimRefString(ref *corev1.ObjectReference) string {
	return claimRefOf(ref).String()
}

// claimRefOf is the claim a claimRef points at.
func claimRefOf(ref *corev1.ObjectReference) ObjectRef {
	return ObjectRef{Kind: KindPersistentVolumeClaim, Namespace: ref.Namespace, Name: ref.Name}
}

// classForMessage renders a storage class for messages; the empty class is easy to miss otherwise.
func classForMessage(c string) Word {
	if c == "" {
		return `"" (no class)`
	}
	return Wordf("%q", c)
}

// Links as the invariants PVG002 and PVG004 guard them, read through the View (the link
// vocabulary, what makes a link live and a claim an owner, is package storage's).

// owner returns the live claim that owns the volume: one that completed a binding to it. A claim
// that named the volume without completing (pre-bound by a user) owns nothing yet.
func owner(volumeName string, v View) (*corev1.PersistentVolumeClaim, error) {
	claims, err := v.ClaimsNamingVolume(volumeName)
	if err != nil {
		return nil, fmt.Errorf("listing the claims that name PersistentVolume %s: %w", volumeName, err)
	}
	for _, c := range claims {
		if storage.CompletedTo(c, volumeName) {
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
	return storage.CompletedTo(b.PVC, b.PV.Name) && (b.Field == "spec.claimRef" || r.audit)
}

// provisionedCreate reports whether the review creates a volume an external provisioner made
// (pv.kubernetes.io/provisioned-by). Such a volume holds no data yet, and upstream relies on the
// provisioner saving it even when its claim was deleted or bound elsewhere while provisioning ran:
// the PV controller then releases it and the provisioner deletes it.
func provisionedCreate(r *Review) bool {
	if r.Operation != OperationCreate || r.PV == nil {
		return false
	}
	_, ok := r.PV.Annotations[storage.AnnProvisionedBy]
	return ok
}

// linkString describes a claimRef for messages: the claim it names and its uid, or "nothing".
func linkString(ref *corev1.ObjectReference) Arg {
	switch {
	case ref == nil:
		return Word("nothing")
	case ref.UID == "":
		return Textf("%s (no uid)", claimRefOf(ref))
	}
	return WithUID(claimRefOf(ref), ref.UID)
}
