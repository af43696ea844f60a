package explain

import (
	"github.com/pvguard/pvguard/binder"
	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/storage"
)

// CacheShape is what explanations read of the status of the volumes and claims they are made
// from: what the rules and the binder read (an explanation runs both), and a volume's
// lastPhaseTransitionTime (since when it is in its phase).
func CacheShape() storage.CacheShape {
	return policy.CacheShape(policy.Catalogue()).Union(binder.CacheShape).Union(storage.CacheShape{
		VolumeStatus: []string{"lastPhaseTransitionTime"},
	})
}

// CacheTransform is the transform pvguard serve's informers cut volumes, claims and classes with:
// CacheShape, their equal values shared through a storage.Interner of storage.CacheInternMaps of
// its own.
func CacheTransform() func(any) (any, error) {
	return CacheShape().Transform(storage.NewInterner(storage.CacheInternMaps))
}
