package clusterstate

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/internal/cachelist"
)

// Read reads the state of the cluster from c, as the audit and the explanations read it: every
// volume, claim and class, and the nodes' names and labels (all that the rules, the binder and
// the explanations read of a node). From an informer cache, the cache's own objects (cachelist),
// neither deep copies nor struct copies, so that a full audit copies no object: no reader of a
// State modifies its objects (policy.FuzzAudit holds the rules to it). From a live client, what
// it lists.
func Read(ctx context.Context, c client.Reader) (*State, error) {
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
	return New(claims, volumes, classes, names), nil
}
