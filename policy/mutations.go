package policy

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/pvguard/pvguard/storage"
)

// Mutations applied by the mutating webhook. Like the rules they are pure; each returns whether
// it changed the object.

// NormalizeClaimRef fills in the kind and apiVersion of a volume's claimRef when the author left
// them out, so that PVG014 and every consumer of the reference see the canonical shape.
func NormalizeClaimRef(pv *corev1.PersistentVolume) bool {
	ref := pv.Spec.ClaimRef
	if ref == nil {
		return false
	}
	changed := false
	if ref.Kind == "" {
		ref.Kind = "PersistentVolumeClaim"
		changed = true
	}
	if ref.APIVersion == "" {
		ref.APIVersion = "v1"
		changed = true
	}
	return changed
}

// AlignPreboundClaimClass handles the classic trap of a claim that names a volume in
// spec.volumeName but says nothing about its class: the DefaultStorageClass admission plugin
// gives it the cluster's default class, the volume has another class, and the claim never binds.
// When enabled in the config, a new claim whose class is the current default class and whose
// named volume exists with a different class gets the volume's class. Claims that name a class
// other than the default are left alone: that was a choice, and PVG007 reports the mismatch.
func AlignPreboundClaimClass(pvc *corev1.PersistentVolumeClaim, v View, c *Config) (bool, error) {
	if !c.Mutation.AlignPreboundClaimClass || pvc.Spec.VolumeName == "" || pvc.Spec.StorageClassName == nil {
		return false, nil
	}
	if _, beta := pvc.Annotations[storage.AnnBetaStorageClass]; beta {
		return false, nil
	}
	classes, err := v.StorageClasses()
	if err != nil {
		return false, err
	}
	isDefault := false
	for _, sc := range classes {
		if sc.Name == *pvc.Spec.StorageClassName && storage.IsDefaultClass(sc) {
			isDefault = true
			break
		}
	}
	if !isDefault {
		return false, nil
	}
	pv, err := v.PersistentVolume(pvc.Spec.VolumeName)
	if err != nil || pv == nil {
		return false, err
	}
	class := storage.VolumeClass(pv)
	if class == *pvc.Spec.StorageClassName {
		return false, nil
	}
	pvc.Spec.StorageClassName = &class
	return true, nil
}
