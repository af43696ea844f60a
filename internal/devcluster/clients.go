package devcluster

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Warnings collects the admission warnings the apiserver relays, as kubectl prints them.
type Warnings struct {
	mu   sync.Mutex
	msgs []string
}

var _ rest.WarningHandler = &Warnings{}

// HandleWarningHeader implements rest.WarningHandler.
func (w *Warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, text)
}

// Take returns the warnings received since the last call.
func (w *Warnings) Take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.msgs
	w.msgs = nil
	return out
}

// NewClient returns a client acting as the given identity (the admin when impersonate is
// empty), recording admission warnings into w when it is not nil.
func NewClient(cfg *rest.Config, w *Warnings, impersonate string, groups ...string) (client.Client, error) {
	cfg = rest.CopyConfig(cfg)
	if w != nil {
		cfg.WarningHandler = w
	}
	if impersonate != "" {
		cfg.Impersonate = rest.ImpersonationConfig{UserName: impersonate, Groups: groups}
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("creating client for %q: %w", impersonate, err)
	}
	return c, nil
}

// PatchPV applies a merge patch computed from a mutation of the live volume, as kubectl apply does.
func PatchPV(ctx context.Context, c client.Client, name string, mutate func(*corev1.PersistentVolume)) error {
	pv := &corev1.PersistentVolume{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, pv); err != nil {
		return err
	}
	base := pv.DeepCopy()
	mutate(pv)
	return c.Patch(ctx, pv, client.MergeFrom(base))
}

// PatchPVC is PatchPV for claims.
func PatchPVC(ctx context.Context, c client.Client, namespace, name string, mutate func(*corev1.PersistentVolumeClaim)) error {
	pvc := &corev1.PersistentVolumeClaim{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, pvc); err != nil {
		return err
	}
	base := pvc.DeepCopy()
	mutate(pvc)
	return c.Patch(ctx, pvc, client.MergeFrom(base))
}
