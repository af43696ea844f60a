package main

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/audit"
	"github.com/pvguard/pvguard/clusterstate"
	"github.com/pvguard/pvguard/internal/clusterview"
	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/test/gen"
)

// runnerAudit is the server's full audit (audit.Runner.RunOnce) of st's objects: read from
// informer stores as `pvguard serve` reads its cache (clusterstate.Read through cachelist), its
// findings confirmed on a reader that holds the same objects (the apiserver, which agrees with
// the cache), its results recorded per object and published as the report.
func runnerAudit(st *clusterstate.State) func() (int, error) {
	c := &storeCache{stores: map[string]toolscache.SharedIndexInformer{}}
	node := &metav1.PartialObjectMetadata{}
	node.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Node"))
	c.fill(&corev1.PersistentVolume{}, st.Volumes())
	c.fill(&corev1.PersistentVolumeClaim{}, st.Claims())
	c.fill(&storagev1.StorageClass{}, st.Classes())
	c.fill(&corev1.Pod{}, st.Pods())
	metas := make([]*metav1.PartialObjectMetadata, 0, len(st.Nodes()))
	for _, n := range st.Nodes() {
		m := &metav1.PartialObjectMetadata{ObjectMeta: n.ObjectMeta}
		m.SetGroupVersionKind(node.GroupVersionKind())
		metas = append(metas, m)
	}
	c.fill(node, metas)
	r := audit.NewRunner(audit.RunnerOptions{Cache: c, Live: clusterview.New(c, stateReader{st}).LiveView, Engine: func() *policy.Engine { return policy.NewEngine(nil) },
		Log: logr.Discard(), Now: func() time.Time { return gen.InventoryNow }})
	return func() (int, error) {
		err := r.RunOnce(context.Background())
		found, _, _ := r.LatestFindings()
		return len(found), err
	}
}

// storeCache is an informer cache whose informers are never started: their stores hold the
// objects. Only GetInformer is served, which is all cachelist reads.
type storeCache struct {
	cache.Cache
	stores map[string]toolscache.SharedIndexInformer
}

func typeKey(obj client.Object) string {
	if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
		return "meta:" + m.GroupVersionKind().Kind
	}
	return fmt.Sprintf("%T", obj)
}

func fill[T client.Object](c *storeCache, kind T, objs []T) {
	inf := toolscache.NewSharedIndexInformer(&toolscache.ListWatch{}, kind, 0, toolscache.Indexers{})
	for _, o := range objs {
		if err := inf.GetStore().Add(o); err != nil {
			panic(err)
		}
	}
	c.stores[typeKey(kind)] = inf
}

func (c *storeCache) fill(kind client.Object, objs any) {
	switch o := objs.(type) {
	case []*corev1.PersistentVolume:
		fill(c, kind.(*corev1.PersistentVolume), o)
	case []*corev1.PersistentVolumeClaim:
		fill(c, kind.(*corev1.PersistentVolumeClaim), o)
	case []*storagev1.StorageClass:
		fill(c, kind.(*storagev1.StorageClass), o)
	case []*corev1.Pod:
		fill(c, kind.(*corev1.Pod), o)
	case []*metav1.PartialObjectMetadata:
		fill(c, kind.(*metav1.PartialObjectMetadata), o)
	default:
		panic(fmt.Sprintf("storeCache: %T", objs))
	}
}

func (c *storeCache) GetInformer(_ context.Context, obj client.Object, _ ...cache.InformerGetOption) (cache.Informer, error) {
	inf, ok := c.stores[typeKey(obj)]
	if !ok {
		return nil, fmt.Errorf("storeCache: no informer for %s", typeKey(obj))
	}
	return inf, nil
}

// stateReader answers the audit's live reads from the state: the apiserver agreeing with the
// cache.
type stateReader struct{ st *clusterstate.State }

func (s stateReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	switch o := obj.(type) {
	case *corev1.PersistentVolume:
		if pv, _ := s.st.PersistentVolume(key.Name); pv != nil {
			*o = *pv
			return nil
		}
		return apierrors.NewNotFound(schema.GroupResource{Resource: "persistentvolumes"}, key.Name)
	case *corev1.PersistentVolumeClaim:
		if pvc, _ := s.st.PersistentVolumeClaim(key.Namespace, key.Name); pvc != nil {
			*o = *pvc
			return nil
		}
		return apierrors.NewNotFound(schema.GroupResource{Resource: "persistentvolumeclaims"}, key.Name)
	case *corev1.Node:
		if n, _ := s.st.Node(key.Name); n != nil {
			*o = *n
			return nil
		}
		return apierrors.NewNotFound(schema.GroupResource{Resource: "nodes"}, key.Name)
	}
	return fmt.Errorf("stateReader: Get of %T", obj)
}

func (s stateReader) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	switch l := list.(type) {
	case *corev1.NodeList:
		for _, n := range s.st.Nodes() {
			l.Items = append(l.Items, *n)
		}
	case *corev1.PersistentVolumeList:
		for _, pv := range s.st.Volumes() {
			l.Items = append(l.Items, *pv)
		}
	case *corev1.PersistentVolumeClaimList:
		for _, pvc := range s.st.Claims() {
			l.Items = append(l.Items, *pvc)
		}
	case *storagev1.StorageClassList:
		for _, sc := range s.st.Classes() {
			l.Items = append(l.Items, *sc)
		}
	default:
		return fmt.Errorf("stateReader: List of %T", list)
	}
	return nil
}
