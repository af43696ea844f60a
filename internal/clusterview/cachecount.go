package clusterview

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CountCachedObjects keeps pvguard_cache_objects{kind} at the number of objects of each kind
// the informer cache holds, from its add and delete events: the figure docs/install.md's sizing
// table is read by. Counting events costs nothing at scrape time, where listing the cache would
// copy it.
func CountCachedObjects(ctx context.Context, c cache.Cache, reg prometheus.Registerer) error {
	objects := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "pvguard_cache_objects",
		Help: "Objects in pvguard's informer cache, by kind."}, []string{"kind"})
	if err := reg.Register(objects); err != nil {
		return fmt.Errorf("registering pvguard_cache_objects: %w", err)
	}
	for kind, obj := range map[string]client.Object{
		"PersistentVolume":      &corev1.PersistentVolume{},
		"PersistentVolumeClaim": &corev1.PersistentVolumeClaim{},
		"StorageClass":          &storagev1.StorageClass{},
		"Node":                  nodeMetadata(),
		"Pod":                   &corev1.Pod{},
	} {
		g := objects.WithLabelValues(kind)
		inf, err := c.GetInformer(ctx, obj)
		if err != nil {
			return fmt.Errorf("informer for %s: %w", kind, err)
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { g.Inc() },
			DeleteFunc: func(any) { g.Dec() },
		}); err != nil {
			return fmt.Errorf("counting %s objects: %w", kind, err)
		}
	}
	return nil
}
