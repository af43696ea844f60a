package storage

import (
	corev1 "k8s.io/api/core/v1"
)

// Binding vocabulary.
//
// A binding has two halves: the volume's spec.claimRef naming the claim, and the claim's
// spec.volumeName naming the volume. A volume is linked to a claim by spec.claimRef; the link is
// live when the claim it names exists with the uid the claimRef carries. A claim owns a volume
// when it has completed a binding to it (bind-completed, spec.volumeName naming the volume): the
// volume then holds that claim's data, whatever its claimRef says, and upstream's controller
// re-links the volume to it if the link is lost.

// NamesAClaim reports whether a claimRef has what it takes to name a claim: a name and a
// namespace (claims are namespaced). One without either names no claim; PVG014 reports it.
// Whoever reads the claim of a claimRef asks this first: the apiserver refuses a read without a
// name, and that error must not stand in for the finding.
func NamesAClaim(ref *corev1.ObjectReference) bool {
	return ref != nil && ref.Name != "" && ref.Namespace != ""
}

// ClaimRefNames reports whether a volume's claimRef names the claim (by namespace and name, and
// by uid when the claimRef has one): the volume is bound to the claim, or pre-bound to it without
// being bound to another incarnation of it.
func ClaimRefNames(pv *corev1.PersistentVolume, pvc *corev1.PersistentVolumeClaim) bool {
	ref := pv.Spec.ClaimRef
	return ref != nil && ref.Namespace == pvc.Namespace && ref.Name == pvc.Name &&
		(ref.UID == "" || ref.UID == pvc.UID)
}

// SameClaimRef reports whether two claimRefs name the same claim with the same uid.
func SameClaimRef(a, b *corev1.ObjectReference) bool {
	return a.Namespace == b.Namespace && a.Name == b.Name && a.UID == b.UID
}

// SameLink reports whether two claimRefs (either may be nil) name the same claim with the same
// uid; kind, apiVersion and resourceVersion do not make a different link.
func SameLink(a, b *corev1.ObjectReference) bool {
	if a == nil || b == nil {
		return a == b
	}
	return SameClaimRef(a, b)
}

// LinksTo reports whether a claimRef names the claim with its uid.
func LinksTo(ref *corev1.ObjectReference, pvc *corev1.PersistentVolumeClaim) bool {
	return ref != nil && ref.Namespace == pvc.Namespace && ref.Name == pvc.Name && ref.UID == pvc.UID
}

// CompletedTo reports whether the claim has completed a binding to the named volume.
func CompletedTo(pvc *corev1.PersistentVolumeClaim, volumeName string) bool {
	_, done := pvc.Annotations[AnnBindCompleted]
	return done && pvc.Spec.VolumeName == volumeName
}

// Abandoned reports whether a claim has gone to another volume than the named one: upstream's
// controllers undo a volume's link to such a claim (and only to such a claim).
func Abandoned(pvc *corev1.PersistentVolumeClaim, volumeName string) bool {
	return pvc.Spec.VolumeName != "" && pvc.Spec.VolumeName != volumeName
}
