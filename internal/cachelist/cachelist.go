// Package cachelist lists the objects of an informer cache as the cache holds them: pointers to
// its own objects, shared, never to be modified.
//
// controller-runtime's List with client.UnsafeDisableDeepCopy skips the deep copies but still
// copies each object's top-level struct into the list's Items (apimeta.SetList): every full
// audit and every binder plan would allocate a copy of the whole cluster, which sets pvguard's
// peak heap (docs/benchmarks.md, "Scale"). Read through the informer's store, a list costs a
// slice of pointers.
package cachelist

import (
	"context"
	"fmt"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// storeInformer is what controller-runtime's informers are (client-go's SharedIndexInformer)
// beyond the cache.Informer interface: the store they fill.
type storeInformer interface {
	GetStore() toolscache.Store
}

// List returns every object of kind's type that r holds. When r is an informer cache whose
// informer exposes its store, the objects are the store's own; otherwise (a plain client, a test
// double, a cache wrapped to lag) they are r.List's, without deep copies. list is the list type
// for the fallback (e.g. &corev1.PersistentVolumeList{}); kind says the type (e.g.
// &corev1.PersistentVolume{}, or a PartialObjectMetadata with its GroupVersionKind for a
// metadata-only informer).
func List[T client.Object](ctx context.Context, r client.Reader, kind T, list client.ObjectList) ([]T, error) {
	if c, ok := r.(cache.Informers); ok {
		inf, err := c.GetInformer(ctx, kind)
		if err != nil {
			return nil, fmt.Errorf("informer for %T: %w", kind, err)
		}
		if s, ok := inf.(storeInformer); ok {
			items := s.GetStore().List()
			out := make([]T, 0, len(items))
			for _, item := range items {
				obj, ok := item.(T)
				if !ok {
					return nil, fmt.Errorf("the informer for %T holds a %T", kind, item)
				}
				out = append(out, obj)
			}
			return out, nil
		}
	}
	if err := r.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	items, err := apimeta.ExtractList(list)
	if err != nil {
		return nil, fmt.Errorf("reading %T: %w", list, err)
	}
	out := make([]T, 0, len(items))
	for _, item := range items {
		obj, ok := item.(T)
		if !ok {
			return nil, fmt.Errorf("%T holds a %T, not a %T", list, item, kind)
		}
		out = append(out, obj)
	}
	return out, nil
}
