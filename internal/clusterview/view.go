package clusterview

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/clusterstate"
	"github.com/pvguard/pvguard/internal/cachelist"
	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/storage"
)

// The cache's indexes the view lists by (cachelist.AddIndex: each object filed once under each
// value; every reader asks across all namespaces).
var (
	claimsByVolumeName = cachelist.Index{Name: "pvguard.spec.volumeName", Values: func(o client.Object) []string {
		if name := o.(*corev1.PersistentVolumeClaim).Spec.VolumeName; name != "" {
			return []string{name}
		}
		return nil
	}}
	volumesByClaimRef = cachelist.Index{Name: "pvguard.spec.claimRef", Values: func(o client.Object) []string {
		if ref := o.(*corev1.PersistentVolume).Spec.ClaimRef; ref != nil {
			return []string{ref.Namespace + "/" + ref.Name}
		}
		return nil
	}}
	// Claims waiting for their data, by uid: a populator's claim is named after the uid of the
	// claim it is made for. Only those are filed: every claim filed under its own uid took a set of
	// client-go's index each, about 25 MB of the heap at 100,000 claims (docs/benchmarks.md, "The
	// informers' indexes").
	claimsWaitingByUID = cachelist.Index{Name: "pvguard.waiting.metadata.uid", Values: func(o client.Object) []string {
		if storage.WaitsForData(o.(*corev1.PersistentVolumeClaim)) {
			return []string{string(o.GetUID())}
		}
		return nil
	}}
	// Pods by the claims they use (namespace/claim), for the rule that keeps a volume's node
	// affinity admitting the nodes of its claim's pods.
	podsByClaim = cachelist.Index{Name: "pvguard.pod.claims", Values: podClaimKeys}
)

// The kinds the view asks cachelist for: shared, never modified.
var (
	claimKind  = &corev1.PersistentVolumeClaim{}
	volumeKind = &corev1.PersistentVolume{}
	podKind    = &corev1.Pod{}
)

// Source gives the policy.View over the informer cache, with a live read when the cache misses
// (a claim created a moment ago may not be in the cache yet, and a rule must not judge on an
// absence the cache made up); and the views that read some objects (FreshView) or all of them
// (LiveView) live.
//
// The objects it returns are the cache's own, not copies: copying them cost more allocations
// than the rest of a review (BenchmarkClusterView). They must not be modified. Every reader hands
// them only to the policy, whose entry points are fuzzed for leaving their inputs alone
// (policy.FuzzAdmit, FuzzAudit, FuzzMutations); the binder copies what it writes.
type Source struct {
	cache client.Reader
	live  client.Reader
}

// New returns a source of views over a cache that SetupIndexes prepared, falling back to live
// reads through the given uncached reader.
func New(c client.Reader, live client.Reader) *Source {
	return &Source{cache: c, live: live}
}

// SetupIndexes registers the field indexes the view lists by, and starts the informers pvguard
// reads so the first review does not wait for one to sync: those of the View's typed reads, and
// one for each kind of clusterstate.Readables among reads (the kinds the rule set reads,
// policy.ReadKinds), which ListKind lists. No informer starts for a readable kind no rule reads,
// so pvguard needs no permission to list it.
func SetupIndexes(ctx context.Context, c cache.Cache, reads []policy.Kind) error {
	for _, ix := range []struct {
		kind client.Object
		idx  cachelist.Index
	}{
		{&corev1.PersistentVolumeClaim{}, claimsByVolumeName},
		{&corev1.PersistentVolume{}, volumesByClaimRef},
		{&corev1.PersistentVolumeClaim{}, claimsWaitingByUID},
		{&corev1.Pod{}, podsByClaim},
	} {
		if err := cachelist.AddIndex(ctx, c, ix.kind, ix.idx); err != nil {
			return fmt.Errorf("indexing %T by %s: %w", ix.kind, ix.idx.Name, err)
		}
	}
	informers := []client.Object{&storagev1.StorageClass{}, nodeMetadata()}
	for _, k := range reads {
		if r, ok := clusterstate.ReadableKind(k); ok {
			informers = append(informers, r.Object)
		}
	}
	for _, obj := range informers {
		if _, err := c.GetInformer(ctx, obj); err != nil {
			return fmt.Errorf("starting informer for %T: %w", obj, err)
		}
	}
	return nil
}

func podClaimKeys(o client.Object) []string {
	p, ok := o.(*corev1.Pod)
	if !ok {
		return nil
	}
	claims := storage.PodClaims(p)
	out := make([]string, len(claims))
	for i, c := range claims {
		out[i] = p.Namespace + "/" + c
	}
	return out
}

// StripPod is the cache transform of pods: pods are the most numerous and largest objects of a
// cluster, and the rules read only where a pod is and which claims it uses (storage.StripPod).
func StripPod(obj any) (any, error) {
	if p, ok := obj.(*corev1.Pod); ok {
		return storage.StripPod(p), nil
	}
	return obj, nil // a tombstone
}

// nodeMetadata is the metadata-only shape nodes are cached in: node affinity needs only names
// and labels, and full Node objects are large in big clusters.
func nodeMetadata() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Node"))
	return m
}

// View implements webhook.ViewSource.
func (cv *Source) View(ctx context.Context) policy.View {
	return &requestView{ctx: ctx, cv: cv}
}

// FreshView implements webhook.FreshViewSource: each volume and claim read by name is read live; nodes
// (which no binding race changes, and which pvguard may list and watch but not get) and the lists
// (which only a few rules make) still come from the cache, so that confirming a denial never
// lists the whole cluster.
func (cv *Source) FreshView(ctx context.Context) policy.View {
	return &requestView{ctx: ctx, cv: cv, fresh: true}
}

// CacheView is the view that reads only the informer cache: a miss is an absence, never a live
// read. The audit judges through it, as its full audit judges the cache's objects, and confirms
// live only what it finds (policy.Engine.Confirm on a LiveView). Through View, an incremental
// audit of the volumes whose claims are gone (Released volumes, dangling claimRefs) read each
// claim live, one request each at the live reads' rate, which the admission webhook's reads
// share: thousands of them take minutes, and hold back every audit after.
func (cv *Source) CacheView(ctx context.Context) policy.View {
	return &requestView{ctx: ctx, cv: cv, cacheOnly: true}
}

// LiveView is the view with every read live, none from the cache (the audit confirms on it the
// findings that report an object as gone, policy.Rule.ConfirmLive): an object by name is read
// live, and a list is a full live list filtered here as the cache's indexes file it (a namespace's
// pods, for the pods using a claim). The view lists the nodes at most once, for all its readers:
// an audit confirms each volume whose node is gone (PVG025) on one list, not one list each; a
// full audit takes one view, an incremental audit one per object. It may be read by any number of
// goroutines.
func (cv *Source) LiveView(ctx context.Context) policy.View {
	return &requestView{ctx: ctx, cv: cv, live: true, nodes: &nodeList{}}
}

type requestView struct {
	ctx       context.Context
	cv        *Source
	fresh     bool // read objects by name live (FreshView)
	live      bool // read everything live (LiveView)
	cacheOnly bool // never read live (CacheView)
	// nodes, when set, keeps the view's first list of the nodes for its other readers.
	nodes *nodeList
}

type nodeList struct {
	once  sync.Once
	nodes []*corev1.Node
	err   error
}

// lists is the reader the view lists from: the cache, or for a LiveView the apiserver.
func (v *requestView) lists() client.Reader {
	if v.live {
		return v.cv.live
	}
	return v.cv.cache
}

// shared asks the cache for its own objects rather than deep copies (see Source).
var shared = client.UnsafeDisableDeepCopy

// get reads from the cache, then live on a miss (or only live: FreshView's volumes and claims,
// LiveView's every object); it reports false when the object does not exist.
func (v *requestView) get(key client.ObjectKey, obj client.Object) (bool, error) {
	var err error
	_, metadataOnly := obj.(*metav1.PartialObjectMetadata)
	live := v.live || (v.fresh && !metadataOnly)
	if live {
		err = v.cv.live.Get(v.ctx, key, obj)
	} else {
		err = v.cv.cache.Get(v.ctx, key, obj, shared)
	}
	if apierrors.IsNotFound(err) && !live && !v.cacheOnly {
		err = v.cv.live.Get(v.ctx, key, obj)
	}
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("reading %T %s: %w", obj, key, err)
	}
	return true, nil
}

func (v *requestView) PersistentVolume(name string) (*corev1.PersistentVolume, error) {
	pv := &corev1.PersistentVolume{}
	ok, err := v.get(client.ObjectKey{Name: name}, pv)
	if !ok {
		return nil, err
	}
	return pv, nil
}

func (v *requestView) PersistentVolumeClaim(namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	pvc := &corev1.PersistentVolumeClaim{}
	ok, err := v.get(client.ObjectKey{Namespace: namespace, Name: name}, pvc)
	if !ok {
		return nil, err
	}
	return pvc, nil
}

func (v *requestView) ClaimsNamingVolume(volumeName string) ([]*corev1.PersistentVolumeClaim, error) {
	out, err := cachelist.ByIndex(v.ctx, v.lists(), claimKind, (*corev1.PersistentVolumeClaimList)(nil), claimsByVolumeName, volumeName)
	if err != nil {
		return nil, fmt.Errorf("listing claims naming volume %s: %w", volumeName, err)
	}
	return out, nil
}

func (v *requestView) VolumesClaiming(namespace, name string) ([]*corev1.PersistentVolume, error) {
	out, err := cachelist.ByIndex(v.ctx, v.lists(), volumeKind, (*corev1.PersistentVolumeList)(nil), volumesByClaimRef, namespace+"/"+name)
	if err != nil {
		return nil, fmt.Errorf("listing volumes claiming %s/%s: %w", namespace, name, err)
	}
	return out, nil
}

// ClaimWaitingForData reads only the cache (a LiveView: only live): a claim another was made for
// existed before it, and a miss leaves the finding the rule would make without it.
func (v *requestView) ClaimWaitingForData(uid types.UID) (*corev1.PersistentVolumeClaim, error) {
	out, err := cachelist.ByIndex(v.ctx, v.lists(), claimKind, (*corev1.PersistentVolumeClaimList)(nil), claimsWaitingByUID, string(uid))
	if err != nil {
		return nil, fmt.Errorf("listing claims with uid %s: %w", uid, err)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out[0], nil
}

func (v *requestView) Node(name string) (*corev1.Node, error) {
	m := nodeMetadata()
	ok, err := v.get(client.ObjectKey{Name: name}, m)
	if !ok {
		return nil, err
	}
	return &corev1.Node{TypeMeta: m.TypeMeta, ObjectMeta: m.ObjectMeta}, nil
}

// ListNodes lists the nodes' metadata (as nodeMetadata caches them) from the cache, never live
// but in a LiveView: the one rule that asks (PVG025) takes an empty list for knowing nothing, and
// the audit confirms what it finds on a LiveView's list.
func (v *requestView) ListNodes() ([]*corev1.Node, error) {
	if v.nodes == nil {
		return v.listNodes()
	}
	v.nodes.once.Do(func() { v.nodes.nodes, v.nodes.err = v.listNodes() })
	return v.nodes.nodes, v.nodes.err
}

func (v *requestView) listNodes() ([]*corev1.Node, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NodeList"))
	if err := v.lists().List(v.ctx, list, shared); err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	out := make([]*corev1.Node, len(list.Items))
	for i := range list.Items {
		out[i] = &corev1.Node{ObjectMeta: list.Items[i].ObjectMeta}
	}
	return out, nil
}

// PodsUsingClaim lists the pods that use the claim from the cache; a FreshView or a LiveView
// lists the pods of the claim's namespace live, so that a denial for a pod that has just left its
// node is judged again on where the pods are now.
func (v *requestView) PodsUsingClaim(namespace, claim string) ([]*corev1.Pod, error) {
	var pods []*corev1.Pod
	var err error
	if v.fresh || v.live {
		var list corev1.PodList
		err = v.cv.live.List(v.ctx, &list, client.InNamespace(namespace))
		for i := range list.Items {
			pods = append(pods, &list.Items[i])
		}
	} else {
		pods, err = cachelist.ByIndex(v.ctx, v.cv.cache, podKind, (*corev1.PodList)(nil), podsByClaim, namespace+"/"+claim)
	}
	if err != nil {
		return nil, fmt.Errorf("listing the pods using claim %s/%s: %w", namespace, claim, err)
	}
	var out []*corev1.Pod
	for _, p := range pods {
		if storage.PodUsesClaim(p, claim) {
			out = append(out, p)
		}
	}
	return out, nil
}

func (v *requestView) StorageClasses() ([]*storagev1.StorageClass, error) {
	var list storagev1.StorageClassList
	if err := v.lists().List(v.ctx, &list, shared); err != nil {
		return nil, fmt.Errorf("listing storage classes: %w", err)
	}
	out := make([]*storagev1.StorageClass, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

// ListKind lists a kind of clusterstate.Readables: the cache's own objects (from the informer
// SetupIndexes started for a kind the rules read), or live in a LiveView.
func (v *requestView) ListKind(kind policy.Kind) ([]runtime.Object, error) {
	r, ok := clusterstate.ReadableKind(kind)
	if !ok {
		return nil, fmt.Errorf("listing %s: not a kind rules may list (clusterstate.Readables)", kind)
	}
	objs, err := cachelist.List(v.ctx, v.lists(), r.Object, r.NewList())
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", kind, err)
	}
	return clusterstate.Runtime(objs), nil
}
