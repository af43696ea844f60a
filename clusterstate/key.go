package clusterstate

import "fmt"

// Kind is a kind of object pvguard reads: what a review is about, what a rule reads through the
// View, what a Key names.
type Kind string

const (
	KindPersistentVolume      Kind = "PersistentVolume"
	KindPersistentVolumeClaim Kind = "PersistentVolumeClaim"
	KindStorageClass          Kind = "StorageClass"
	// KindNode is only read, by the rules that judge node affinity: no review is about a Node.
	KindNode Kind = "Node"
	// KindPod is only read, by the rule that keeps a volume's node affinity admitting the nodes
	// of the pods using its claim. A pod is named to whoever may read its claim's namespace.
	KindPod Kind = "Pod"
)

// Key names one object: its kind, its namespace ("" for a cluster-scoped one) and its name. It is
// comparable, so a map keyed by it finds an object without building a string. It is the one
// reference type: policy.ObjectRef is this type.
type Key struct {
	Kind      Kind
	Namespace string
	Name      string
}

func (k Key) String() string {
	if k.Namespace == "" {
		return fmt.Sprintf("%s %s", k.Kind, k.Name)
	}
	return fmt.Sprintf("%s %s/%s", k.Kind, k.Namespace, k.Name)
}

// VolumeKey is the key of the PersistentVolume name.
func VolumeKey(name string) Key { return Key{Kind: KindPersistentVolume, Name: name} }

// ClaimKey is the key of the PersistentVolumeClaim namespace/name.
func ClaimKey(namespace, name string) Key {
	return Key{Kind: KindPersistentVolumeClaim, Namespace: namespace, Name: name}
}

// ClassKey is the key of the StorageClass name.
func ClassKey(name string) Key { return Key{Kind: KindStorageClass, Name: name} }
