package audit

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/storage"
)

// liveView is the policy.View over live reads that findings are confirmed on
// (policy.Engine.Confirm): every read goes to the apiserver, none to the cache. The rules that
// confirm live read single objects by name; a list is a full list, filtered here.
type liveView struct {
	ctx context.Context
	c   client.Reader
	// nodes, when set, keeps the first list of the nodes for the view's other readers: an audit
	// confirms each volume whose node is gone (PVG025) on one list, not one list each.
	nodes *nodeList
}

type nodeList struct {
	once  sync.Once
	nodes []*corev1.Node
	err   error
}

var _ policy.View = liveView{}

// get reports false when the object does not exist.
func (v liveView) get(key client.ObjectKey, obj client.Object) (bool, error) {
	err := v.c.Get(v.ctx, key, obj)
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("reading %T %s: %w", obj, key, err)
	}
	return true, nil
}

func (v liveView) PersistentVolume(name string) (*corev1.PersistentVolume, error) {
	pv := &corev1.PersistentVolume{}
	if ok, err := v.get(client.ObjectKey{Name: name}, pv); !ok {
		return nil, err
	}
	return pv, nil
}

func (v liveView) PersistentVolumeClaim(namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	pvc := &corev1.PersistentVolumeClaim{}
	if ok, err := v.get(client.ObjectKey{Namespace: namespace, Name: name}, pvc); !ok {
		return nil, err
	}
	return pvc, nil
}

func (v liveView) ClaimsNamingVolume(volumeName string) ([]*corev1.PersistentVolumeClaim, error) {
	var list corev1.PersistentVolumeClaimList
	if err := v.c.List(v.ctx, &list); err != nil {
		return nil, fmt.Errorf("listing claims naming volume %s: %w", volumeName, err)
	}
	var out []*corev1.PersistentVolumeClaim
	for i := range list.Items {
		if list.Items[i].Spec.VolumeName == volumeName {
			out = append(out, &list.Items[i])
		}
	}
	return out, nil
}

func (v liveView) VolumesClaiming(namespace, name string) ([]*corev1.PersistentVolume, error) {
	var list corev1.PersistentVolumeList
	if err := v.c.List(v.ctx, &list); err != nil {
		return nil, fmt.Errorf("listing volumes claiming %s/%s: %w", namespace, name, err)
	}
	var out []*corev1.PersistentVolume
	for i := range list.Items {
		if ref := list.Items[i].Spec.ClaimRef; ref != nil && ref.Namespace == namespace && ref.Name == name {
			out = append(out, &list.Items[i])
		}
	}
	return out, nil
}

func (v liveView) ClaimWithUID(uid types.UID) (*corev1.PersistentVolumeClaim, error) {
	var list corev1.PersistentVolumeClaimList
	if err := v.c.List(v.ctx, &list); err != nil {
		return nil, fmt.Errorf("listing claims for uid %s: %w", uid, err)
	}
	for i := range list.Items {
		if list.Items[i].UID == uid {
			return &list.Items[i], nil
		}
	}
	return nil, nil
}

// Node reads the node's metadata only, as the cache keeps nodes: node affinity needs no more.
func (v liveView) Node(name string) (*corev1.Node, error) {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Node"))
	if ok, err := v.get(client.ObjectKey{Name: name}, m); !ok {
		return nil, err
	}
	return &corev1.Node{ObjectMeta: m.ObjectMeta}, nil
}

// ListNodes lists the nodes' metadata, as Node reads it (once for the view, with nodes set).
func (v liveView) ListNodes() ([]*corev1.Node, error) {
	if v.nodes == nil {
		return v.listNodes()
	}
	v.nodes.once.Do(func() { v.nodes.nodes, v.nodes.err = v.listNodes() })
	return v.nodes.nodes, v.nodes.err
}

func (v liveView) listNodes() ([]*corev1.Node, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NodeList"))
	if err := v.c.List(v.ctx, list); err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	out := make([]*corev1.Node, len(list.Items))
	for i := range list.Items {
		out[i] = &corev1.Node{ObjectMeta: list.Items[i].ObjectMeta}
	}
	return out, nil
}

func (v liveView) StorageClasses() ([]*storagev1.StorageClass, error) {
	var list storagev1.StorageClassList
	if err := v.c.List(v.ctx, &list); err != nil {
		return nil, fmt.Errorf("listing StorageClasses: %w", err)
	}
	out := make([]*storagev1.StorageClass, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

// PodsUsingClaim lists the pods of the claim's namespace and keeps those that use it.
func (v liveView) PodsUsingClaim(namespace, claim string) ([]*corev1.Pod, error) {
	var list corev1.PodList
	if err := v.c.List(v.ctx, &list, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("listing the pods using claim %s/%s: %w", namespace, claim, err)
	}
	var out []*corev1.Pod
	for i := range list.Items {
		if storage.PodUsesClaim(&list.Items[i], claim) {
			out = append(out, &list.Items[i])
		}
	}
	return out, nil
}
