package admissionbench

import (
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/pvguard/pvguard/policy"
)

// CopyingView answers from an indexed view but returns deep copies, as controller-runtime's
// informer cache reader does by default (pvguard's ClusterView reads through it): the cost of a
// lookup in production is a map read plus a copy of the object.
type CopyingView struct{ V policy.View }

var _ policy.View = CopyingView{}

func (c CopyingView) PersistentVolume(name string) (*corev1.PersistentVolume, error) {
	pv, err := c.V.PersistentVolume(name)
	return pv.DeepCopy(), err
}

func (c CopyingView) PersistentVolumeClaim(namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	pvc, err := c.V.PersistentVolumeClaim(namespace, name)
	return pvc.DeepCopy(), err
}

func (c CopyingView) ClaimsNamingVolume(volumeName string) ([]*corev1.PersistentVolumeClaim, error) {
	list, err := c.V.ClaimsNamingVolume(volumeName)
	out := make([]*corev1.PersistentVolumeClaim, len(list))
	for i, pvc := range list {
		out[i] = pvc.DeepCopy()
	}
	return out, err
}

func (c CopyingView) VolumesClaiming(namespace, name string) ([]*corev1.PersistentVolume, error) {
	list, err := c.V.VolumesClaiming(namespace, name)
	out := make([]*corev1.PersistentVolume, len(list))
	for i, pv := range list {
		out[i] = pv.DeepCopy()
	}
	return out, err
}

func (c CopyingView) Node(name string) (*corev1.Node, error) {
	n, err := c.V.Node(name)
	return n.DeepCopy(), err
}

func (c CopyingView) StorageClasses() ([]*storagev1.StorageClass, error) {
	list, err := c.V.StorageClasses()
	out := make([]*storagev1.StorageClass, len(list))
	for i, sc := range list {
		out[i] = sc.DeepCopy()
	}
	return out, err
}
