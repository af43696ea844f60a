package clusterstate

import (
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
)

// The kinds of object a State holds, as Key.Kind names them (the values of policy.Kind).
const (
	KindPersistentVolume      = "PersistentVolume"
	KindPersistentVolumeClaim = "PersistentVolumeClaim"
	KindStorageClass          = "StorageClass"
	KindNode                  = "Node"
)

// Key names one object: its kind, its namespace ("" for a cluster-scoped one) and its name. It is
// comparable, so a map keyed by it finds an object without building a string.
type Key struct {
	Kind      string
	Namespace string
	Name      string
}

// VolumeKey is the key of the PersistentVolume name.
func VolumeKey(name string) Key { return Key{Kind: KindPersistentVolume, Name: name} }

// ClaimKey is the key of the PersistentVolumeClaim namespace/name.
func ClaimKey(namespace, name string) Key {
	return Key{Kind: KindPersistentVolumeClaim, Namespace: namespace, Name: name}
}

// ClassKey is the key of the StorageClass name.
func ClassKey(name string) Key { return Key{Kind: KindStorageClass, Name: name} }

// NodeKey is the key of the Node name.
func NodeKey(name string) Key { return Key{Kind: KindNode, Name: name} }

// KeyOf is the key of a *PersistentVolume, *PersistentVolumeClaim, *StorageClass or *Node, and
// false for any other object.
func KeyOf(obj any) (Key, bool) {
	switch o := obj.(type) {
	case *corev1.PersistentVolume:
		return VolumeKey(o.Name), true
	case *corev1.PersistentVolumeClaim:
		return ClaimKey(o.Namespace, o.Name), true
	case *storagev1.StorageClass:
		return ClassKey(o.Name), true
	case *corev1.Node:
		return NodeKey(o.Name), true
	}
	return Key{}, false
}
