package testobj

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvguard/pvguard/policy"
)

// View is an in-memory policy.View over a fixed set of objects (a policy.Snapshot). Err, when
// set, is returned by every lookup, to test how callers handle a failed read.
type View struct {
	policy.Snapshot
	Err error
	// StrictNames makes a get by an empty name, or of a claim by an empty namespace, fail as the
	// webhook's live view does (the client refuses it: "resource name may not be empty"), where
	// a Snapshot just finds nothing.
	StrictNames bool
}

var _ policy.View = &View{}

// errEmptyName is what client-go's request builder says of a get without a name.
var errEmptyName = errors.New("resource name may not be empty")

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
	if v.StrictNames && name == "" {
		return nil, errEmptyName
	}
	return v.Snapshot.PersistentVolume(name)
}

func (v *View) PersistentVolumeClaim(namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	if v.Err != nil {
		return nil, v.Err
	}
	if v.StrictNames && (namespace == "" || name == "") {
		return nil, fmt.Errorf("reading PersistentVolumeClaim %q in namespace %q: %w", name, namespace, errEmptyName)
	}
	return v.Snapshot.PersistentVolumeClaim(namespace, name)
}

func (v *View) ClaimsNamingVolume(volumeName string) ([]*corev1.PersistentVolumeClaim, error) {
	if v.Err != nil {
		return nil, v.Err
	}
	return v.Snapshot.ClaimsNamingVolume(volumeName)
}

func (v *View) VolumesClaiming(namespace, name string) ([]*corev1.PersistentVolume, error) {
	if v.Err != nil {
		return nil, v.Err
	}
	return v.Snapshot.VolumesClaiming(namespace, name)
}

func (v *View) ClaimWithUID(uid types.UID) (*corev1.PersistentVolumeClaim, error) {
	if v.Err != nil {
		return nil, v.Err
	}
	return v.Snapshot.ClaimWithUID(uid)
}

func (v *View) Node(name string) (*corev1.Node, error) {
	if v.Err != nil {
		return nil, v.Err
	}
	if v.StrictNames && name == "" {
		return nil, errEmptyName
	}
	return v.Snapshot.Node(name)
}

func (v *View) StorageClasses() ([]*storagev1.StorageClass, error) {
	if v.Err != nil {
		return nil, v.Err
	}
	return v.Snapshot.StorageClasses()
}
