// Package cachelist reads the objects of an informer cache as the cache holds them (List, Get,
// and ByIndex over the indexes AddIndex files): pointers to its own objects, shared, never to be
// modified.
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
	"reflect"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
// metadata-only informer). A nil list of a list type (e.g. (*corev1.PersistentVolumeList)(nil))
// has one made only when the fallback needs it: a reader listing from the store on every sync
// allocates no list.
func List[T client.Object](ctx context.Context, r client.Reader, kind T, list client.ObjectList) ([]T, error) {
	if c, ok := r.(cache.Informers); ok {
		inf, err := c.GetInformer(ctx, kind)
		if err != nil {
			return nil, fmt.Errorf("informer for %T: %w", kind, err)
		}
		if s, ok := inf.(storeInformer); ok {
			items := s.GetStore().List()
			return typed(kind, items)
		}
	}
	if v := reflect.ValueOf(list); v.Kind() == reflect.Pointer && v.IsNil() {
		list = reflect.New(v.Type().Elem()).Interface().(client.ObjectList)
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

// Get returns the object of kind's type named key that r holds, as List does: the store's own
// object when r is an informer cache whose informer exposes its store, else r.Get's without deep
// copies (a copy of the top-level struct, sharing the rest with the cache). Either way it must not
// be modified. An object r does not hold is a NotFound error. controller-runtime's Get, even
// with client.UnsafeDisableDeepCopy, copies the object's top-level struct into a new one of the
// caller's: a reader that gets every object every resync (the binder) allocates a copy of the
// cluster each time. kind is only read; callers pass one shared empty object per type, so that
// a read allocates nothing of its own.
func Get[T client.Object](ctx context.Context, r client.Reader, key client.ObjectKey, kind T) (T, error) {
	var zero T
	if c, ok := r.(cache.Informers); ok {
		inf, err := c.GetInformer(ctx, kind)
		if err != nil {
			return zero, fmt.Errorf("informer for %T: %w", kind, err)
		}
		if s, ok := inf.(storeInformer); ok {
			item, exists, err := s.GetStore().GetByKey(storeKey(key))
			if err != nil {
				return zero, fmt.Errorf("reading %s from the store: %w", key, err)
			}
			if !exists {
				return zero, apierrors.NewNotFound(schema.GroupResource{}, key.Name)
			}
			obj, ok := item.(T)
			if !ok {
				return zero, fmt.Errorf("the informer for %T holds a %T", kind, item)
			}
			return obj, nil
		}
	}
	out, ok := kind.DeepCopyObject().(T)
	if !ok {
		return zero, fmt.Errorf("a copy of %T is a %T", kind, out)
	}
	if err := r.Get(ctx, key, out, client.UnsafeDisableDeepCopy); err != nil {
		return zero, err
	}
	return out, nil
}

// storeKey is the key client-go's informers file an object under (MetaNamespaceKeyFunc's).
func storeKey(k client.ObjectKey) string {
	if k.Namespace == "" {
		return k.Name
	}
	return k.Namespace + "/" + k.Name
}

// Index is an index of an informer's objects: its name, and the values an object is filed under.
type Index struct {
	Name   string
	Values func(obj client.Object) []string
}

// AddIndex adds idx to the informer of kind's type in c (before the informer starts). Each
// object is filed once under each of its values. controller-runtime's IndexField files a
// namespaced object's every value twice, under its namespace and under all namespaces, for lists
// within one namespace; client-go keeps a set per filed value, so for an index of unique values
// (a claim's uid) that doubled a set per object, and pvguard never lists by an index within one
// namespace (docs/benchmarks.md, "The informers' indexes").
func AddIndex(ctx context.Context, c cache.Informers, kind client.Object, idx Index) error {
	inf, err := c.GetInformer(ctx, kind)
	if err != nil {
		return fmt.Errorf("informer for %T: %w", kind, err)
	}
	return inf.AddIndexers(toolscache.Indexers{idx.Name: func(o any) ([]string, error) {
		obj, ok := o.(client.Object)
		if !ok {
			return nil, nil
		}
		return idx.Values(obj), nil
	}})
}

// indexerInformer is what controller-runtime's informers are beyond cache.Informer: the indexer
// AddIndex filled.
type indexerInformer interface {
	GetIndexer() toolscache.Indexer
}

// ByIndex returns the objects of kind's type that r holds filed under value in idx. From an
// informer cache whose informer exposes its indexer, the indexer's own objects (AddIndex must have
// added idx); otherwise (a plain client, a test double) every object List returns (list as for
// List) whose values include value.
func ByIndex[T client.Object](ctx context.Context, r client.Reader, kind T, list client.ObjectList, idx Index, value string) ([]T, error) {
	if c, ok := r.(cache.Informers); ok {
		inf, err := c.GetInformer(ctx, kind)
		if err != nil {
			return nil, fmt.Errorf("informer for %T: %w", kind, err)
		}
		if s, ok := inf.(indexerInformer); ok {
			items, err := s.GetIndexer().ByIndex(idx.Name, value)
			if err != nil {
				return nil, fmt.Errorf("index %s of %T: %w", idx.Name, kind, err)
			}
			return typed(kind, items)
		}
	}
	all, err := List(ctx, r, kind, list)
	if err != nil {
		return nil, err
	}
	var out []T
	for _, obj := range all {
		if slices.Contains(idx.Values(obj), value) {
			out = append(out, obj)
		}
	}
	return out, nil
}

// typed is an informer's items as kind's type, the informer's own objects.
func typed[T client.Object](kind T, items []any) ([]T, error) {
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
