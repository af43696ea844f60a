// Package storecache serves a clusterstate.State as `pvguard serve` reads the cluster, for
// benchmarks of the server's audit: informer stores that hold the state's objects (what
// cachelist reads), and a reader that answers live reads from the same objects (an apiserver
// that agrees with the cache).
package storecache

import (
	"context"
	"fmt"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/clusterstate"
	"github.com/pvguard/pvguard/explain"
)

// Cache is an informer cache whose informers are never started: their stores hold the objects.
// GetInformer is served, which is all the cache's lists (cachelist) read, and Get, which the
// views read through (clusterview); clusterview.SetupIndexes adds the views' indexes.
type Cache struct {
	cache.Cache
	stores map[string]toolscache.SharedIndexInformer
}

// New returns a Cache of st's volumes, claims, classes, pods and nodes (the nodes as metadata,
// as the server caches them).
func New(st *clusterstate.State) *Cache {
	c := &Cache{stores: map[string]toolscache.SharedIndexInformer{}}
	fill(c, &corev1.PersistentVolume{}, st.Volumes())
	fill(c, &corev1.PersistentVolumeClaim{}, st.Claims())
	fill(c, &storagev1.StorageClass{}, st.Classes())
	fill(c, &corev1.Pod{}, st.Pods())
	node := &metav1.PartialObjectMetadata{}
	node.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Node"))
	metas := make([]*metav1.PartialObjectMetadata, 0, len(st.Nodes()))
	for _, n := range st.Nodes() {
		m := &metav1.PartialObjectMetadata{ObjectMeta: n.ObjectMeta}
		m.SetGroupVersionKind(node.GroupVersionKind())
		metas = append(metas, m)
	}
	fill(c, node, metas)
	return c
}

// Cut cuts st's volumes, claims and classes in place as pvguard serve's informers cut what they
// cache (explain.CacheShape, shared through a storage.Interner of storage.CacheInternMaps), so that
// a benchmark reads objects shaped and shared as the server's are: equal node affinities, for
// one, are then one object.
func Cut(st *clusterstate.State) {
	cut := explain.CacheTransform()
	for _, v := range st.Volumes() {
		_, _ = cut(v)
	}
	for _, c := range st.Claims() {
		_, _ = cut(c)
	}
	for _, sc := range st.Classes() {
		_, _ = cut(sc)
	}
}

func key(obj client.Object) string {
	if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
		return "meta:" + m.GroupVersionKind().Kind
	}
	return fmt.Sprintf("%T", obj)
}

func fill[T client.Object](c *Cache, kind T, objs []T) {
	inf := toolscache.NewSharedIndexInformer(&toolscache.ListWatch{}, kind, 0, toolscache.Indexers{})
	for _, o := range objs {
		if err := inf.GetStore().Add(o); err != nil {
			panic(fmt.Sprintf("storecache: adding %T: %v", o, err))
		}
	}
	c.stores[key(kind)] = inf
}

// GetInformer returns the informer of obj's kind.
func (c *Cache) GetInformer(_ context.Context, obj client.Object, _ ...cache.InformerGetOption) (cache.Informer, error) {
	inf, ok := c.stores[key(obj)]
	if !ok {
		return nil, fmt.Errorf("storecache: no informer for %s", key(obj))
	}
	return inf, nil
}

// Get reads an object from its informer's store, copying its top-level struct into obj as
// controller-runtime's cache does with client.UnsafeDisableDeepCopy (the view's cache reads).
func (c *Cache) Get(_ context.Context, name client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	inf, ok := c.stores[key(obj)]
	if !ok {
		return fmt.Errorf("storecache: no informer for %s", key(obj))
	}
	item, ok, err := inf.GetStore().GetByKey(toolscache.NewObjectName(name.Namespace, name.Name).String())
	switch {
	case err != nil:
		return err
	case !ok:
		return apierrors.NewNotFound(schema.GroupResource{}, name.Name)
	}
	src, dst := reflect.ValueOf(item), reflect.ValueOf(obj)
	if src.Type() != dst.Type() {
		return fmt.Errorf("storecache: the store of %T holds a %T", obj, item)
	}
	dst.Elem().Set(src.Elem())
	return nil
}

// Reader answers the audit's live reads from the state: an apiserver that agrees with the cache.
type Reader struct{ State *clusterstate.State }

// Get reads a volume, claim or node of the state.
func (s Reader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	switch o := obj.(type) {
	case *corev1.PersistentVolume:
		if pv, _ := s.State.PersistentVolume(key.Name); pv != nil {
			*o = *pv
			return nil
		}
		return apierrors.NewNotFound(schema.GroupResource{Resource: "persistentvolumes"}, key.Name)
	case *corev1.PersistentVolumeClaim:
		if pvc, _ := s.State.PersistentVolumeClaim(key.Namespace, key.Name); pvc != nil {
			*o = *pvc
			return nil
		}
		return apierrors.NewNotFound(schema.GroupResource{Resource: "persistentvolumeclaims"}, key.Name)
	case *corev1.Node:
		if n, _ := s.State.Node(key.Name); n != nil {
			*o = *n
			return nil
		}
		return apierrors.NewNotFound(schema.GroupResource{Resource: "nodes"}, key.Name)
	}
	return fmt.Errorf("storecache.Reader: Get of %T", obj)
}

// List lists the state's nodes, volumes, claims or classes.
func (s Reader) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	switch l := list.(type) {
	case *corev1.NodeList:
		for _, n := range s.State.Nodes() {
			l.Items = append(l.Items, *n)
		}
	case *corev1.PersistentVolumeList:
		for _, pv := range s.State.Volumes() {
			l.Items = append(l.Items, *pv)
		}
	case *corev1.PersistentVolumeClaimList:
		for _, pvc := range s.State.Claims() {
			l.Items = append(l.Items, *pvc)
		}
	case *storagev1.StorageClassList:
		for _, sc := range s.State.Classes() {
			l.Items = append(l.Items, *sc)
		}
	default:
		return fmt.Errorf("storecache.Reader: List of %T", list)
	}
	return nil
}
