package binder

import (
	"context"
	"fmt"
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/internal/cores"
)

// write performs one write of obj, giving tests the chance to stop it, and remembers the
// resourceVersion it replaced.
// update writes obj, a changed copy of base, as a JSON merge patch from base that carries base's
// resourceVersion, so that it fails on a conflict as an update would. What the cache drops
// (storage.CacheShape: managedFields, the last-applied annotation, unread status fields) is in
// neither object, so the patch leaves it on the server where an update would erase it.
// The worker steps away from its seat while the apiserver answers (cores.Away).
func (b *Binder) update(ctx context.Context, base, obj client.Object) error {
	defer cores.Away(ctx)()
	return b.o.Writer.Patch(ctx, obj, patchFrom(base))
}

// updateStatus is update through the status subresource.
func (b *Binder) updateStatus(ctx context.Context, base, obj client.Object) error {
	defer cores.Away(ctx)()
	return b.o.Writer.Status().Patch(ctx, obj, patchFrom(base))
}

// liveGet reads key past the cache, away from the worker's seat while the apiserver answers.
func (b *Binder) liveGet(ctx context.Context, key client.ObjectKey, obj client.Object) error {
	defer cores.Away(ctx)()
	return b.o.Live.Get(ctx, key, obj)
}

// patchFrom is the merge patch from base, locked to base's resourceVersion. An object read from
// the apiserver always has one; one without (built by hand) is patched unconditionally, as an
// update without a resourceVersion is.
func patchFrom(base client.Object) client.Patch {
	if base.GetResourceVersion() == "" {
		return client.MergeFrom(base)
	}
	return client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})
}

func (b *Binder) write(op string, obj client.Object, f func() error) error {
	if b.o.BeforeWrite != nil {
		if err := b.o.BeforeWrite(op, obj); err != nil {
			return fmt.Errorf("%s stopped: %w", op, err)
		}
	}
	if b.o.WriteGuard != nil {
		if err := b.o.WriteGuard(); err != nil {
			return fmt.Errorf("%s not made: %w", op, err)
		}
	}
	old := obj.GetResourceVersion()
	if err := f(); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if k, ok := keyOf(obj); ok && old != "" && obj.GetResourceVersion() != old {
		b.ledger.supersede(k, old)
	}
	return nil
}

// withAnn returns m with k set to v: m itself when it already is, else a copy (m is a cached
// object's and never modified).
func withAnn(m map[string]string, k, v string) map[string]string {
	if cur, ok := m[k]; ok && cur == v {
		return m
	}
	out := maps.Clone(m)
	if out == nil {
		out = map[string]string{}
	}
	out[k] = v
	return out
}

// withoutAnn returns m without k: m itself when it has none, else a copy.
func withoutAnn(m map[string]string, k string) map[string]string {
	if _, ok := m[k]; !ok {
		return m
	}
	out := maps.Clone(m)
	delete(out, k)
	return out
}

func setAnn(m *metav1.ObjectMeta, k, v string) {
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[k] = v
}
