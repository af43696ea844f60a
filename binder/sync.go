package binder

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/internal/cachelist"
	"github.com/pvguard/pvguard/storage"
)

// The binder reads the cache's own objects, not copies (cachelist.Get and List): it never changes
// what it reads (every write deep-copies first: applyClaim, applyVolume, bind), and its resync
// reads every volume and claim every 15 s. A copy per read, even of the top-level struct only
// (controller-runtime's Get and List with client.UnsafeDisableDeepCopy), was most of what the
// binder allocated, and a collection counts whatever is allocated while it runs as live: at
// 100,000 pairs that was a third of the heap (docs/benchmarks.md, "The binder's claim syncs").
// These are the kinds cachelist is asked for: shared, never modified.
var (
	claimKind  = &corev1.PersistentVolumeClaim{}
	volumeKind = &corev1.PersistentVolume{}
	classKind  = &storagev1.StorageClass{}
)

// getClaim and getVolume read the cache's own object (see claimKind).
func (b *Binder) getClaim(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	return cachelist.Get(ctx, b.o.Cache, client.ObjectKey{Namespace: namespace, Name: name}, claimKind)
}

func (b *Binder) getVolume(ctx context.Context, name string) (*corev1.PersistentVolume, error) {
	return cachelist.Get(ctx, b.o.Cache, client.ObjectKey{Name: name}, volumeKind)
}

func (b *Binder) syncClaim(ctx context.Context, namespace, name string) error {
	claim, err := b.getClaim(ctx, namespace, name)
	if err != nil {
		if apierrors.IsNotFound(err) {
			k := key{kind: 'c', namespace: namespace, name: name}
			b.ledger.forget(k)
			if b.ledger.claimGone(k) {
				b.requestPlan() // the volume the plan gave it is free for the others
			}
			return nil
		}
		return fmt.Errorf("reading claim %s/%s: %w", namespace, name, err)
	}
	if claim.Spec.VolumeName != "" && b.ledger.claimWent(claim.UID, claim.Spec.VolumeName) {
		// Whoever named its volume (another binder, an admin, a leader that woke from a freeze),
		// the volume the plan or a cut-short bind held for it is free for the others.
		b.requestPlan()
	}
	if b.lagging(key{kind: 'c', namespace: namespace, name: name}, claim) {
		return nil // the informer's event for the binder's own write re-enqueues the claim
	}
	a, err := b.decideClaim(ctx, claim)
	if err != nil {
		return err
	}
	if b.o.Mode == ModeShadow {
		b.shadowClaim(ctx, claim, a)
		return nil
	}
	return b.applyClaim(ctx, claim, a)
}

// decideClaim is what to do for the claim, decided on its state (claimState); a volume missing
// from the cache is confirmed with a live read when the decision turns on it.
func (b *Binder) decideClaim(ctx context.Context, claim *corev1.PersistentVolumeClaim) (ClaimAction, error) {
	s, err := b.claimState(ctx, claim)
	if err != nil {
		return ClaimAction{}, err
	}
	a := DecideClaim(s)
	if !a.NeedLiveVolume {
		return a, nil
	}
	v := &corev1.PersistentVolume{}
	switch err := b.liveGet(ctx, client.ObjectKey{Name: claim.Spec.VolumeName}, v); {
	case apierrors.IsNotFound(err):
		s.Volume = nil
	case err != nil:
		return ClaimAction{}, fmt.Errorf("reading volume %s of claim %s/%s: %w", claim.Spec.VolumeName, claim.Namespace, claim.Name, err)
	default:
		s.Volume = v
	}
	s.VolumeConfirmed = true
	return DecideClaim(s), nil
}

// claimState is the claim's state, read from the binder's cache and ledger.
func (b *Binder) claimState(ctx context.Context, claim *corev1.PersistentVolumeClaim) (ClaimState, error) {
	return ClaimStateOf(claim, cacheFacts{ctx: ctx, b: b, now: time.Now()})
}

// cacheFacts are ClaimFacts as one claim sync reads them: the cache's own objects, the policy's
// view and the binder's ledger. It lives for that one call to ClaimStateOf, which is why it holds
// the sync's context. A volume the cache does not hold is not confirmed gone: DecideClaim asks
// for a live read before it declares a bound claim Lost.
type cacheFacts struct {
	ctx context.Context
	b   *Binder
	now time.Time
}

func (f cacheFacts) Volume(name string) (*corev1.PersistentVolume, bool, error) {
	switch v, err := f.b.getVolume(f.ctx, name); {
	case err == nil:
		return v, true, nil
	case apierrors.IsNotFound(err):
		return nil, false, nil
	default:
		return nil, false, err
	}
}

func (f cacheFacts) Classes() ([]*storagev1.StorageClass, error) {
	return cachelist.List(f.ctx, f.b.o.Cache, classKind, (*storagev1.StorageClassList)(nil))
}

func (f cacheFacts) VolumesClaiming(namespace, name string) ([]*corev1.PersistentVolume, error) {
	return f.b.o.Views(f.ctx).VolumesClaiming(namespace, name)
}

func (f cacheFacts) Plan(claim types.UID) (string, bool)    { return f.b.ledger.planned(claim) }
func (f cacheFacts) Denied(claim types.UID) map[string]bool { return f.b.ledger.denied(claim, f.now) }
func (f cacheFacts) PendingFree() bool                      { return f.b.pendingFree() }
func (f cacheFacts) Confirmed() bool                        { return false }

// classes lists the storage classes as the cache holds them, the cache's own objects (every claim
// sync reads them, so a copy per read would be a copy of every class per claim): callers only
// read them.
func (b *Binder) classes(ctx context.Context) ([]*storagev1.StorageClass, error) {
	out, err := cachelist.List(ctx, b.o.Cache, classKind, (*storagev1.StorageClassList)(nil))
	if err != nil {
		return nil, fmt.Errorf("listing storage classes: %w", err)
	}
	return out, nil
}

func (b *Binder) applyClaim(ctx context.Context, claim *corev1.PersistentVolumeClaim, a ClaimAction) error {
	if a.NeedPlan {
		b.requestPlan()
		return nil
	}
	if a.SetClass != "" {
		c := claim.DeepCopy()
		c.Spec.StorageClassName = &a.SetClass
		return b.write("claim-default-class", c, func() error { return b.update(ctx, claim, c) })
	}
	if a.Provisioner != "" {
		c := claim.DeepCopy()
		setAnn(&c.ObjectMeta, storage.AnnStorageProvisioner, a.Provisioner)
		setAnn(&c.ObjectMeta, storage.AnnBetaStorageProvisioner, a.Provisioner)
		if err := b.write("claim-provisioner", c, func() error { return b.update(ctx, claim, c) }); err != nil {
			return err
		}
		claim = c
	}
	if a.Bind != nil {
		return b.bind(ctx, a.Bind, claim)
	}
	changed := false
	if a.Phase != "" && claim.Status.Phase != a.Phase {
		c := claim.DeepCopy()
		c.Status.Phase = a.Phase
		c.Status.AccessModes, c.Status.Capacity = nil, nil
		if err := b.write("claim-status", c, func() error { return b.updateStatus(ctx, claim, c) }); err != nil {
			return err
		}
		changed = true
		claim = c
	}
	if a.Event != nil && (!a.EventOnlyOn || changed) {
		b.o.Recorder.Event(claim, a.Event.Type, a.Event.Reason, a.Event.Message)
	}
	return nil
}

func (b *Binder) syncVolume(ctx context.Context, name string) error {
	v, err := b.getVolume(ctx, name)
	if err != nil {
		if apierrors.IsNotFound(err) {
			b.ledger.forget(key{kind: 'v', name: name})
			return nil
		}
		return fmt.Errorf("reading volume %s: %w", name, err)
	}
	if b.lagging(key{kind: 'v', name: name}, v) {
		return nil
	}
	b.settleReservation(v)
	s := VolumeState{Volume: v}
	if ref := v.Spec.ClaimRef; ref != nil && ref.UID != "" {
		switch c, err := b.getClaim(ctx, ref.Namespace, ref.Name); {
		case err == nil:
			s.Claim = c
		case !apierrors.IsNotFound(err):
			return fmt.Errorf("reading claim %s/%s of volume %s: %w", ref.Namespace, ref.Name, name, err)
		}
	}
	a := DecideVolume(s)
	if a.NeedLiveClaim {
		// The cache says the claim is gone (or re-created): only the apiserver may say so.
		ref := v.Spec.ClaimRef
		c := &corev1.PersistentVolumeClaim{}
		switch err := b.liveGet(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, c); {
		case apierrors.IsNotFound(err):
			s.Claim = nil
		case err != nil:
			return fmt.Errorf("confirming claim %s/%s of volume %s: %w", ref.Namespace, ref.Name, name, err)
		default:
			s.Claim = c
		}
		s.ClaimConfirmed = true
		a = DecideVolume(s)
	}
	if b.o.Mode == ModeShadow {
		return nil
	}
	if a.Phase == corev1.VolumeBound && b.ledger.bindInFlight(name) {
		a.Phase = "" // the bind writes it; its writes' events bring the volume back here
	}
	skip, marking := b.markAvailable(v, a)
	if skip {
		return nil
	}
	err = b.applyVolume(ctx, v, a)
	if marking && err != nil {
		b.ledger.stopMarking(name)
	}
	return err
}

// pendingFree reports whether free volumes still Pending may be bound: in active mode they are.
// Pending means only that no binder has synced the volume yet; its Available write is made at
// once (markAvailable), but the planner need not wait for it to show, so a claim created with its
// volume gets no "no persistent volumes available" event meanwhile. Shadow mode keeps upstream's
// choice (Available volumes only), so that it compares like with like.
func (b *Binder) pendingFree() bool { return b.o.Mode == ModeActive }

// markAvailable decides about the Available write of a free (or pre-bound by name only) Pending
// volume. Upstream's syncVolume makes it at once, and so does pvguard: the scheduler considers
// Available volumes only, so a volume left Pending is invisible to WaitForFirstConsumer claims.
// The write is skipped (skip) only while a bind of the volume is in flight, which writes Bound
// itself. When it goes ahead (marking), binds of the volume wait until the cache shows it
// Available, so that a bind never races the status write on the same object (the loser would
// spend a request on a conflict); plans still count it, and the claim a plan gives it is retried
// once the write shows.
func (b *Binder) markAvailable(v *corev1.PersistentVolume, a VolumeAction) (skip, marking bool) {
	if !isPending(v) {
		if b.ledger.stopMarking(v.Name) {
			b.requestPlan() // the claim a plan gave the volume can bind it now
		}
		return false, false
	}
	if a.Phase != corev1.VolumeAvailable || a.Unbind || a.Reuse {
		return false, false
	}
	if !b.ledger.startMarking(v.Name) {
		return true, false // a bind of the volume is in flight
	}
	return false, true
}

func (b *Binder) applyVolume(ctx context.Context, v *corev1.PersistentVolume, a VolumeAction) error {
	if a.EnqueueClaim {
		b.queue.Add(key{kind: 'c', namespace: v.Spec.ClaimRef.Namespace, name: v.Spec.ClaimRef.Name})
	}
	if a.ClaimEvent != nil {
		ref := v.Spec.ClaimRef
		b.o.Recorder.Event(&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ref.Namespace, Name: ref.Name, UID: ref.UID}},
			a.ClaimEvent.Type, a.ClaimEvent.Reason, a.ClaimEvent.Message)
	}
	if a.SetFinalizers {
		nv := v.DeepCopy()
		nv.Finalizers = a.Finalizers
		if err := b.write("volume-finalizers", nv, func() error { return b.update(ctx, v, nv) }); err != nil {
			return err
		}
		v = nv
	}
	if a.Unbind || a.Reuse {
		nv := v.DeepCopy()
		if _, byController := nv.Annotations[storage.AnnBoundByController]; byController || a.Reuse {
			nv.Spec.ClaimRef = nil
			delete(nv.Annotations, storage.AnnBoundByController)
		} else {
			nv.Spec.ClaimRef.UID, nv.Spec.ClaimRef.ResourceVersion = "", ""
		}
		op := "volume-unbind"
		if a.Reuse {
			op = "volume-reuse"
		}
		if err := b.write(op, nv, func() error { return b.update(ctx, v, nv) }); err != nil {
			return err
		}
		if a.Reuse {
			b.metrics.reclaims.WithLabelValues("reuse").Inc()
		} else {
			b.metrics.unbinds.Inc()
		}
		v = nv
		a.Phase = corev1.VolumeAvailable
	}
	changed := false
	if a.Phase != "" && v.Status.Phase != a.Phase {
		nv := v.DeepCopy()
		nv.Status.Phase, nv.Status.Message = a.Phase, a.Message
		if err := b.write("volume-status", nv, func() error { return b.updateStatus(ctx, v, nv) }); err != nil {
			return err
		}
		changed = true
		switch a.Phase {
		case corev1.VolumeReleased:
			b.metrics.releases.Inc()
		case corev1.VolumeFailed:
			b.metrics.reclaims.WithLabelValues(string(v.Spec.PersistentVolumeReclaimPolicy)).Inc()
		}
		v = nv
	}
	if a.Event != nil && (changed || a.Reuse || a.Phase == "") {
		b.o.Recorder.Event(v, a.Event.Type, a.Event.Reason, a.Event.Message)
	}
	return nil
}

// settleReservation drops a reservation once the cache shows the volume bound to its claim.
func (b *Binder) settleReservation(v *corev1.PersistentVolume) {
	if ref := v.Spec.ClaimRef; ref != nil {
		b.ledger.settle(v.Name, ref.UID)
	}
}
