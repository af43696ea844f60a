package testobj

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/pvguard/pvguard/policy"
)

// View is an in-memory policy.View over a fixed set of objects. Err, when set, is returned by
// every lookup, to test how callers handle a failed read.
type View struct {
	PVs     []*corev1.PersistentVolume
	PVCs    []*corev1.PersistentVolumeClaim
	Nodes   []*corev1.Node
	Classes []*storagev1.StorageClass
	Err     error
}

var _ policy.View = &View{}

// NewView sorts objects of any supported kind into a View; it panics on other kinds, which is a
// bug in the test that calls it.
func NewView(objs ...runtime.Object) *View {
	v := &View{}
	for _, o := range objs {
		switch t := o.(type) {
		case *corev1.PersistentVolume:
			v.PVs = append(v.PVs, t)
		case *corev1.PersistentVolumeClaim:
			v.PVCs = append(v.PVCs, t)
		case *corev1.Node:
			v.Nodes = append(v.Nodes, t)
		case *storagev1.StorageClass:
			v.Classes = append(v.Classes, t)
		default:
			panic(fmt.Sprintf("testobj.NewView: unsupported %T", o))
		}
	}
	return v
}

func (v *View) PersistentVolume(name string) (*corev1.PersistentVolume, error) {
	if v.Err != nil {
		return nil, v.Err
	}
	for _, pv := range v.PVs {
		if pv.Name == name {
			return pv, nil
		}
	}
	return nil, nil
}

func (v *View) PersistentVolumeClaim(namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	if v.Err != nil {
		return nil, v.Err
	}
	for _, pvc := range v.PVCs {
		if pvc.Namespace == namespace && pvc.Name == name {
			return pvc, nil
		}
	}
	return nil, nil
}

func (v *View) ClaimsNamingVolume(volumeName string) ([]*corev1.PersistentVolumeClaim, error) {
	if v.Err != nil {
		return nil, v.Err
	}
	var out []*corev1.PersistentVolumeClaim
	for _, pvc := range v.PVCs {
		if pvc.Spec.VolumeName == volumeName {
			out = append(out, pvc)
		}
	}
	return out, nil
}

func (v *View) VolumesClaiming(namespace, name string) ([]*corev1.PersistentVolume, error) {
	if v.Err != nil {
		return nil, v.Err
	}
	var out []*corev1.PersistentVolume
	for _, pv := range v.PVs {
		if ref := pv.Spec.ClaimRef; ref != nil && ref.Namespace == namespace && ref.Name == name {
			out = append(out, pv)
		}
	}
	return out, nil
}

func (v *View) Node(name string) (*corev1.Node, error) {
	if v.Err != nil {
		return nil, v.Err
	}
	for _, n := range v.Nodes {
		if n.Name == name {
			return n, nil
		}
	}
	return nil, nil
}

func (v *View) StorageClasses() ([]*storagev1.StorageClass, error) {
	if v.Err != nil {
		return nil, v.Err
	}
	return v.Classes, nil
}
