package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/internal/access"
)

// ReportHandler serves the runner's latest report as JSON (read-only).
// Each caller sees the findings of what they may read (access.FromContext, set by the guard the
// server mounts it behind).
func ReportHandler(r *Runner) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		v, err := visibilityOf(req.Context(), access.FromContext(req.Context()), r.o.Cache)
		if err != nil {
			r.o.Log.Error(err, "filtering the report")
			http.Error(w, "pvguard: cannot filter the report: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(v.report(r.Latest()))
	})
}

// WatchChanges has the runner re-audit each volume and claim as it changes (with its
// neighbours), and everything when a class changes.
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
		if _, err := inf.AddEventHandler(h); err != nil {
			return fmt.Errorf("audit handler for %T: %w", obj, err)
		}
	}
	return nil
}
