package clusterstate

// The kinds of object a Key names, as Key.Kind spells them (the values of policy.Kind).
const (
	KindPersistentVolume      = "PersistentVolume"
	KindPersistentVolumeClaim = "PersistentVolumeClaim"
	KindStorageClass          = "StorageClass"
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
