package testobj

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Modifiers for the binding states the upstream PV controller and external provisioners write.

// ClaimRefUID sets only the uid of the volume's existing claimRef; "" is what the controller
// writes when it releases a volume that a user pre-bound.
func ClaimRefUID(uid string) PVMod {
	return func(pv *corev1.PersistentVolume) {
		if pv.Spec.ClaimRef != nil {
			pv.Spec.ClaimRef.UID = types.UID(uid)
		}
	}
}

// NoClaimRef clears the volume's claimRef, as the controller does when it releases a volume it
// bound itself.
func NoClaimRef(pv *corev1.PersistentVolume) { pv.Spec.ClaimRef = nil }

// NoCapacity leaves the volume's capacity map nil.
func NoCapacity(pv *corev1.PersistentVolume) { pv.Spec.Capacity = nil }

// ClaimNoRequest leaves the claim's requests map nil.
func ClaimNoRequest(pvc *corev1.PersistentVolumeClaim) { pvc.Spec.Resources.Requests = nil }

// ClaimStatusCapacity records the capacity the claim has been given.
func ClaimStatusCapacity(q string) PVCMod {
	return func(pvc *corev1.PersistentVolumeClaim) {
		pvc.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(q)}
	}
}

// ClaimBoundStatus is the binder's fourth write: phase Bound with the volume's capacity and
// access modes.
func ClaimBoundStatus(pv *corev1.PersistentVolume) PVCMod {
	return func(pvc *corev1.PersistentVolumeClaim) {
		pvc.Status.Phase = corev1.ClaimBound
		pvc.Status.Capacity = pv.Spec.Capacity.DeepCopy()
		pvc.Status.AccessModes = append([]corev1.PersistentVolumeAccessMode(nil), pv.Spec.AccessModes...)
	}
}

// SelectorExpression adds a match expression to the claim's selector; an unknown operator makes
// the selector invalid.
func SelectorExpression(key string, op metav1.LabelSelectorOperator, values ...string) PVCMod {
	return func(pvc *corev1.PersistentVolumeClaim) {
		if pvc.Spec.Selector == nil {
			pvc.Spec.Selector = &metav1.LabelSelector{}
		}
		pvc.Spec.Selector.MatchExpressions = append(pvc.Spec.Selector.MatchExpressions,
			metav1.LabelSelectorRequirement{Key: key, Operator: op, Values: values})
	}
}

// NoAnnotation removes one annotation.
func NoAnnotation(key string) MetaMod {
	return func(m *metav1.ObjectMeta) { delete(m.Annotations, key) }
}
