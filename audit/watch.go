package audit

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// WatchChanges has the runner re-audit each volume and claim as it changes (with its
// neighbours), and everything when a class changes or a node comes or goes. Call it before
// Start: the runner's first full audit waits for these handlers to have been told of every
// object of the informers' first lists (HandlersSynced).
func WatchChanges(ctx context.Context, c cache.Cache, r *Runner) error {
	h := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { r.Changed(obj) },
		UpdateFunc: func(old, obj any) { r.Changed(old, obj) },
		DeleteFunc: func(obj any) { r.Changed(obj) },
	}
	for _, obj := range []client.Object{&corev1.PersistentVolume{}, &corev1.PersistentVolumeClaim{}, &storagev1.StorageClass{}} {
		inf, err := c.GetInformer(ctx, obj)
		if err != nil {
			return fmt.Errorf("audit informer for %T: %w", obj, err)
		}
		reg, err := inf.AddEventHandler(h)
		if err != nil {
			return fmt.Errorf("audit handler for %T: %w", obj, err)
		}
		r.HandlersSynced(reg.HasSynced)
	}
	// A node that comes or goes may change which volumes can be used anywhere (PVG025): a full
	// audit then. Node updates (status, labels) are frequent and left to the full audits.
	node := &metav1.PartialObjectMetadata{}
	node.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Node"))
	inf, err := c.GetInformer(ctx, node)
	if err != nil {
		return fmt.Errorf("audit informer for nodes: %w", err)
	}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { r.Changed(obj) },
		DeleteFunc: func(obj any) { r.Changed(obj) },
	})
	if err != nil {
		return fmt.Errorf("audit handler for nodes: %w", err)
	}
	r.HandlersSynced(reg.HasSynced)
	return nil
}
