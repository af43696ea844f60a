package gen

import (
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvguard/pvguard/policy"
)

// CacheView answers from an indexed view as clusterview.Source answers from controller-runtime's
// informer cache: each object is copied into one of the caller's (a struct copy, sharing its
// maps and slices with the cache, since the view asks for no deep copies), and each list is a
// new slice.
type CacheView struct{ V policy.View }

var _ policy.View = CacheView{}

// shallow copies an object as the cache reader copies it into the caller's object.
func shallow[T any](o *T) *T {
	if o == nil {
		return nil
	}
	c := *o
	return &c
}

func shallowList[T any](list []*T, err error) ([]*T, error) {
	items := make([]T, len(list)) // a List's Items
	out := make([]*T, len(list))  // the view's pointers to them
	for i, o := range list {
		items[i] = *o
		out[i] = &items[i]
	}
	return out, err
}

func (c CacheView) PersistentVolume(name string) (*corev1.PersistentVolume, error) {
	pv, err := c.V.PersistentVolume(name)
	return shallow(pv), err
}

func (c CacheView) PersistentVolumeClaim(namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	pvc, err := c.V.PersistentVolumeClaim(namespace, name)
	return shallow(pvc), err
}

func (c CacheView) ClaimsNamingVolume(volumeName string) ([]*corev1.PersistentVolumeClaim, error) {
	return shallowList(c.V.ClaimsNamingVolume(volumeName))
}

func (c CacheView) VolumesClaiming(namespace, name string) ([]*corev1.PersistentVolume, error) {
	return shallowList(c.V.VolumesClaiming(namespace, name))
}

func (c CacheView) ClaimWaitingForData(uid types.UID) (*corev1.PersistentVolumeClaim, error) {
	pvc, err := c.V.ClaimWaitingForData(uid)
	return shallow(pvc), err
}

func (c CacheView) Node(name string) (*corev1.Node, error) {
	n, err := c.V.Node(name)
	return shallow(n), err
}

func (c CacheView) ListNodes() ([]*corev1.Node, error) {
	return shallowList(c.V.ListNodes())
}

func (c CacheView) StorageClasses() ([]*storagev1.StorageClass, error) {
	return shallowList(c.V.StorageClasses())
}

func (c CacheView) PodsUsingClaim(namespace, claim string) ([]*corev1.Pod, error) {
	return shallowList(c.V.PodsUsingClaim(namespace, claim))
}

// ListKind answers as the cache lists a kind: the objects themselves (cachelist.List reads the
// informer's store), in a new slice.
func (c CacheView) ListKind(kind policy.Kind) ([]runtime.Object, error) {
	objs, err := c.V.ListKind(kind)
	return append([]runtime.Object(nil), objs...), err
}
