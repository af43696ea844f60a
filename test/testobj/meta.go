package testobj

import (
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
)

// PVWith returns a modified copy of a volume, for the new side of an update.
func PVWith(pv *corev1.PersistentVolume, mods ...PVMod) *corev1.PersistentVolume {
	out := pv.DeepCopy()
	for _, m := range mods {
		m(out)
	}
	return out
}

// PVCWith returns a modified copy of a claim, for the new side of an update.
func PVCWith(pvc *corev1.PersistentVolumeClaim, mods ...PVCMod) *corev1.PersistentVolumeClaim {
	out := pvc.DeepCopy()
	for _, m := range mods {
		m(out)
	}
	return out
}

// SCWith returns a modified copy of a class, for the new side of an update.
func SCWith(sc *storagev1.StorageClass, mods ...func(*storagev1.StorageClass)) *storagev1.StorageClass {
	out := sc.DeepCopy()
	for _, m := range mods {
		m(out)
	}
	return out
}

// SCMeta applies metadata modifiers to a StorageClass.
func SCMeta(mods ...MetaMod) func(*storagev1.StorageClass) {
	return func(sc *storagev1.StorageClass) {
		for _, m := range mods {
			m(&sc.ObjectMeta)
		}
	}
}

// NodeSelector sets the volume's required node affinity verbatim, for selectors that
// NodeAffinity cannot express (several terms, match fields, invalid ones).
func NodeSelector(ns *corev1.NodeSelector) PVMod {
	return func(pv *corev1.PersistentVolume) {
		pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: ns}
	}
}

// EditClaimRef edits the volume's claimRef in place; it does nothing when there is none.
func EditClaimRef(edit func(*corev1.ObjectReference)) PVMod {
	return func(pv *corev1.PersistentVolume) {
		if pv.Spec.ClaimRef != nil {
			edit(pv.Spec.ClaimRef)
		}
	}
}

// Bind holds the states that the upstream PV controller's bind() takes a volume and a claim
// through, one per write: PV spec, PV status, PVC spec, PVC status.
type Bind struct {
	// PV and PVC are the states before the first write.
	PV  *corev1.PersistentVolume
	PVC *corev1.PersistentVolumeClaim
	// PVSpec is the volume after write 1 (claimRef with the claim's uid), PVStatus after
	// write 2 (phase Bound).
	PVSpec, PVStatus *corev1.PersistentVolume
	// PVCSpec is the claim after write 3 (volumeName, bind-completed), PVCStatus after write 4
	// (phase Bound, capacity, access modes, the volume's VolumeAttributesClass).
	PVCSpec, PVCStatus *corev1.PersistentVolumeClaim
}

// BindSteps computes the four writes of bind() for a volume and a claim. As upstream does,
// bound-by-controller is set on the volume only when it was not pre-bound to the claim, and on
// the claim only when it did not name the volume already.
func BindSteps(pv *corev1.PersistentVolume, pvc *corev1.PersistentVolumeClaim) Bind {
	b := Bind{PV: pv, PVC: pvc}

	ref := pv.Spec.ClaimRef
	preBound := ref != nil && ref.Namespace == pvc.Namespace && ref.Name == pvc.Name &&
		(ref.UID == "" || ref.UID == pvc.UID)
	b.PVSpec = PVWith(pv, ClaimRef(pvc.Namespace, pvc.Name, string(pvc.UID)))
	if !preBound {
		PVMeta(Annotation("pv.kubernetes.io/bound-by-controller", "yes"))(b.PVSpec)
	}
	b.PVStatus = PVWith(b.PVSpec, Phase(corev1.VolumeBound))

	b.PVCSpec = PVCWith(pvc, VolumeName(pv.Name),
		ClaimMeta(Annotation("pv.kubernetes.io/bind-completed", "yes")))
	if pvc.Spec.VolumeName == "" {
		ClaimMeta(Annotation("pv.kubernetes.io/bound-by-controller", "yes"))(b.PVCSpec)
	}
	b.PVCStatus = PVCWith(b.PVCSpec, ClaimPhase(corev1.ClaimBound), func(c *corev1.PersistentVolumeClaim) {
		c.Status.AccessModes = pv.Spec.AccessModes
		c.Status.Capacity = pv.Spec.Capacity.DeepCopy()
		// Upstream records the volume's VolumeAttributesClass when the claim becomes Bound.
		if vac := pv.Spec.VolumeAttributesClassName; vac != nil {
			name := *vac
			c.Status.CurrentVolumeAttributesClassName = &name
		}
	})
	return b
}
