package binder

import (
	"context"
	"fmt"
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// memCache is a client.Reader over client-go indexers that copies objects out as
// controller-runtime's informer cache does (its internal CacheReader): a deep copy of each
// object unless the caller passes client.UnsafeDisableDeepCopy, then apimeta.SetList. The fake
// client round-trips every listed object through JSON, which at 100,000 objects would measure
// the fake rather than the planner.
type memCache struct {
	stores map[string]toolscache.Indexer // by kind
}

var _ client.Reader = &memCache{}

// newMemCache holds objs; nodes are kept as metadata only, as the server caches them.
func newMemCache(objs ...client.Object) (*memCache, error) {
	m := &memCache{stores: map[string]toolscache.Indexer{}}
	for _, obj := range objs {
		kind, err := kindOf(obj)
		if err != nil {
			return nil, err
		}
		if n, ok := obj.(*corev1.Node); ok {
			meta := &metav1.PartialObjectMetadata{ObjectMeta: *n.ObjectMeta.DeepCopy()}
			meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Node"))
			obj = meta
		}
		s, ok := m.stores[kind]
		if !ok {
			s = toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{})
			m.stores[kind] = s
		}
		if err := s.Add(obj); err != nil {
			return nil, fmt.Errorf("adding %s %s: %w", kind, obj.GetName(), err)
		}
	}
	return m, nil
}

func kindOf(obj runtime.Object) (string, error) {
	if p, ok := obj.(*metav1.PartialObjectMetadata); ok {
		return p.Kind, nil
	}
	if p, ok := obj.(*metav1.PartialObjectMetadataList); ok {
		return strings.TrimSuffix(p.Kind, "List"), nil
	}
	gvk, err := apiutil.GVKForObject(obj, scheme.Scheme)
	if err != nil {
		return "", fmt.Errorf("kind of %T: %w", obj, err)
	}
	return strings.TrimSuffix(gvk.Kind, "List"), nil
}

func (m *memCache) Get(_ context.Context, key client.ObjectKey, out client.Object, opts ...client.GetOption) error {
	o := client.GetOptions{}
	o.ApplyOptions(opts)
	kind, err := kindOf(out)
	if err != nil {
		return err
	}
	s, ok := m.stores[kind]
	var obj any
	if ok {
		k := key.Name
		if key.Namespace != "" {
			k = key.Namespace + "/" + key.Name
		}
		if obj, ok, err = s.GetByKey(k); err != nil {
			return err
		}
	}
	if !ok {
		return apierrors.NewNotFound(schema.GroupResource{Resource: kind}, key.Name)
	}
	if o.UnsafeDisableDeepCopy == nil || !*o.UnsafeDisableDeepCopy {
		obj = obj.(runtime.Object).DeepCopyObject()
	}
	reflect.Indirect(reflect.ValueOf(out)).Set(reflect.Indirect(reflect.ValueOf(obj)))
	return nil
}

func (m *memCache) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	o := client.ListOptions{}
	o.ApplyOptions(opts)
	kind, err := kindOf(list)
	if err != nil {
		return err
	}
	var all []any
	if s, ok := m.stores[kind]; ok {
		all = s.List()
	}
	items := make([]runtime.Object, 0, len(all))
	for _, item := range all {
		obj := item.(runtime.Object)
		if o.UnsafeDisableDeepCopy == nil || !*o.UnsafeDisableDeepCopy {
			obj = obj.DeepCopyObject()
		}
		items = append(items, obj)
	}
	return apimeta.SetList(list, items)
}
