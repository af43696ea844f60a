package clusterstate

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/internal/cachelist"
	"github.com/pvguard/pvguard/storage"
)

// Read reads the state of the cluster from c, as the audit and the explanations read it: every
// volume, claim and class, and the nodes' names and labels (all that the rules, the binder and
// the explanations read of a node). From an informer cache, the cache's own objects (cachelist),
// neither deep copies nor struct copies, so that a full audit copies no object: no reader of a
// State modifies its objects (policy.FuzzAudit holds the rules to it). From a live client, what
// it lists. Of the kinds given (a rule set's reads: policy.ReadKinds), those of Readables are
// listed too, for ListKind; the others are read anyway.
func Read(ctx context.Context, c client.Reader, kinds ...Kind) (*State, error) {
	volumes, err := cachelist.List(ctx, c, &corev1.PersistentVolume{}, &corev1.PersistentVolumeList{})
	if err != nil {
		return nil, fmt.Errorf("listing volumes: %w", err)
	}
	claims, err := cachelist.List(ctx, c, &corev1.PersistentVolumeClaim{}, &corev1.PersistentVolumeClaimList{})
	if err != nil {
		return nil, fmt.Errorf("listing claims: %w", err)
	}
	classes, err := cachelist.List(ctx, c, &storagev1.StorageClass{}, &storagev1.StorageClassList{})
	if err != nil {
		return nil, fmt.Errorf("listing storage classes: %w", err)
	}
	node := &metav1.PartialObjectMetadata{}
	node.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Node"))
	nodes := &metav1.PartialObjectMetadataList{}
	nodes.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NodeList"))
	meta, err := cachelist.List(ctx, c, node, nodes)
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	var names []*corev1.Node
	for _, n := range meta {
		names = append(names, &corev1.Node{ObjectMeta: n.ObjectMeta})
	}
	return ReadKinds(ctx, c, New(claims, volumes, classes, names), kinds...)
}

// ReadKinds returns st with the objects c holds of each kind of kinds that is Readable (ListKind
// answers them); the other kinds are typed reads, which st holds already.
func ReadKinds(ctx context.Context, c client.Reader, st *State, kinds ...Kind) (*State, error) {
	for _, k := range kinds {
		r, ok := ReadableKind(k)
		if !ok {
			continue
		}
		objs, err := cachelist.List(ctx, c, r.Object, r.NewList())
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", k, err)
		}
		st = st.WithKind(k, Runtime(objs))
	}
	return st, nil
}

// Runtime is a list of objects as the runtime.Objects of ListKind.
func Runtime[T runtime.Object](objs []T) []runtime.Object {
	out := make([]runtime.Object, len(objs))
	for i, o := range objs {
		out[i] = o
	}
	return out
}

// podPage is how many pods one live list returns: a live list is stripped page by page
// (storage.StripPod), so that a cluster's pods are never all held whole at once.
const podPage = 500

// ReadPods reads the pods as the rules read them (State.WithPods), for a reader whose rules have
// no other view of pods (the audit of `pvguard audit --kubeconfig`). From an informer cache, the cache's own (which
// pvguard keeps stripped); from a live client, each page stripped. A reader that may not list pods
// reads none: the rules then know of no pod using a claim, and the rest of the state is read.
func ReadPods(ctx context.Context, c client.Reader) ([]*corev1.Pod, error) {
	if _, ok := c.(cache.Informers); ok {
		pods, err := cachelist.List(ctx, c, &corev1.Pod{}, &corev1.PodList{})
		if err != nil {
			return nil, fmt.Errorf("listing pods: %w", err)
		}
		return pods, nil
	}
	var out []*corev1.Pod
	opts := []client.ListOption{client.Limit(podPage)}
	for {
		var list corev1.PodList
		err := c.List(ctx, &list, opts...)
		switch {
		case apierrors.IsForbidden(err):
			return nil, nil
		case err != nil:
			return nil, fmt.Errorf("listing pods: %w", err)
		}
		for i := range list.Items {
			out = append(out, storage.StripPod(&list.Items[i]))
		}
		if list.Continue == "" {
			return out, nil
		}
		opts = []client.ListOption{client.Limit(podPage), client.Continue(list.Continue)}
	}
}
