package policy

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

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

// boundPairHint is the hint of a mismatch in a pair bound before (the audit reads one, or a
// re-link): its binding never moves (PVG003), so unlinking it is no way out; a new claim is.
var boundPairHint = Plain("the pair is bound and a completed binding never moves: to get a volume that fits, delete the claim " +
	"and create it again without spec.volumeName (its volume is then Released, and the volume's reclaim policy applies to its data)")

// unlinkHint is the hint of a rule that refuses the pair a write links: use (or link) another
// object, or drop the link, which is the way out unlinkFix makes; for a bound pair, boundPairHint.
func unlinkHint(r *Review, b *bindPair, use Text) Text {
	if relinks(r, b) {
		return boundPairHint
	}
	return Textf("%s or drop %s", use, Word(b.Field))
}

// unlinkFix is the way out of a pair a write links that a hint names: at admission the write
// without its link (the field as it was before it), for a bound pair the claim created again
// without spec.volumeName.
func unlinkFix(r *Review, b *bindPair) []Fix {
	if relinks(r, b) {
		return []Fix{recreate(pvcRef(b.PVC), "spec.volumeName")}
	}
	if b.Field == "spec.volumeName" {
		return []Fix{undoVolumeName(r)}
	}
	return []Fix{undoClaimRef(r)}
}

// undoVolumeName is the claim write under review without its change to spec.volumeName.
func undoVolumeName(r *Review) Fix {
	if r.OldPVC != nil && r.OldPVC.Spec.VolumeName != "" {
		return undo(r.Object(), "spec.volumeName", r.OldPVC.Spec.VolumeName)
	}
	return undo(r.Object(), "spec.volumeName", nil)
}

// undoClaimRef is the volume write under review without its change to spec.claimRef.
func undoClaimRef(r *Review) Fix {
	if r.OldPV != nil && r.OldPV.Spec.ClaimRef != nil {
		if ref, err := runtime.DefaultUnstructuredConverter.ToUnstructured(r.OldPV.Spec.ClaimRef); err == nil {
			return undo(r.Object(), "spec.claimRef", ref)
		}
	}
	return undo(r.Object(), "spec.claimRef", nil)
}
