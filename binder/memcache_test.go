package binder

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// memCache is a client.Reader that copies objects out as controller-runtime's informer cache
// does (its internal CacheReader): a deep copy of each object unless the caller passes
// client.UnsafeDisableDeepCopy, then apimeta.SetList. The fake client round-trips every listed
// object through JSON, which at 100,000 objects would measure the fake rather than the planner.
// Unlike the informer cache it lists in a fixed order (by key), so that two planners reading it
// see the same lists.
type memCache struct {
	stores map[string]*memStore // by kind
}

type memStore struct {
	items []runtime.Object // sorted by key
	byKey map[string]runtime.Object
}

var _ client.Reader = &memCache{}

// newMemCache holds objs; nodes are kept as metadata only, as the server caches them.
func newMemCache(objs ...client.Object) (*memCache, error) {
	m := &memCache{stores: map[string]*memStore{}}
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
			s = &memStore{byKey: map[string]runtime.Object{}}
			m.stores[kind] = s
		}
		k := storeKey(client.ObjectKeyFromObject(obj))
		if _, dup := s.byKey[k]; dup {
			return nil, fmt.Errorf("%s %s added twice", kind, k)
		}
		s.byKey[k] = obj
		s.items = append(s.items, obj)
	}
	for _, s := range m.stores {
		slices.SortFunc(s.items, func(a, b runtime.Object) int {
			return strings.Compare(storeKey(client.ObjectKeyFromObject(a.(client.Object))), storeKey(client.ObjectKeyFromObject(b.(client.Object))))
		})
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
	var obj runtime.Object
	if s, ok := m.stores[kind]; ok {
		obj = s.byKey[storeKey(key)]
	}
	if obj == nil {
		return apierrors.NewNotFound(schema.GroupResource{Resource: kind}, key.Name)
	}
	if o.UnsafeDisableDeepCopy == nil || !*o.UnsafeDisableDeepCopy {
		obj = obj.DeepCopyObject()
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
	var all []any // the informer cache's store hands out such a slice, copied under its lock
	if s, ok := m.stores[kind]; ok {
		all = make([]any, len(s.items))
		for i, obj := range s.items {
			all[i] = obj
		}
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

func storeKey(k client.ObjectKey) string {
	if k.Namespace == "" {
		return k.Name
	}
	return k.Namespace + "/" + k.Name
}
