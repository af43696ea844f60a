package binder

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/internal/cachelist"
	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/storage"
)

// Mode is how the binder acts on its decisions.
type Mode string

const (
	// ModeActive binds, unbinds and reclaims: the cluster's upstream binder must be disabled.
	ModeActive Mode = "active"
	// ModeShadow decides but writes nothing, and reports where the cluster's binder disagrees.
	ModeShadow Mode = "shadow"
	// ModeOff runs no binder: the cluster's own binds (`pvguard serve`'s default). New refuses
	// it: a caller in this mode builds no Binder.
	ModeOff Mode = "off"
)

// Options configure the binder. Zero values get the defaults noted.
type Options struct {
	Mode Mode
	// Workers is how many objects are synced in parallel (default 8); the client's QPS bounds
	// the write rate.
	Workers int
	// Resync is how often every object is synced again (default 15s, as upstream).
	Resync time.Duration
	// Engine returns the current policy engine; the binder never makes a write it denies.
	Engine func() *policy.Engine
	// Views gives the policy's view of related objects.
	Views func(ctx context.Context) policy.View
	// Identity is the binder's own user, as the webhook will see its writes.
	Identity policy.UserInfo
	Registry prometheus.Registerer
	Recorder record.EventRecorder
	Log      logr.Logger
	// NoVolumeFitsAfter is how long a claim stays Pending, from its creationTimestamp, before
	// the binder posts NoVolumeFits on it if Explain says no volume fits; it is also the least
	// time between two explanations of one claim (each refreshes the event). 0 turns it off.
	NoVolumeFitsAfter time.Duration
	// Explain explains claims for NoVolumeFits (explain.NoVolumeFits); required with
	// NoVolumeFitsAfter.
	Explain Explainer
	// NoVolumeFitsRecorder records NoVolumeFits (default Recorder). pvguard serve gives it a
	// broadcaster of its own, whose spam filter the events Recorder repeats on every sync do not
	// drain.
	NoVolumeFitsRecorder record.EventRecorder
	// Cache reads objects (normally the manager's cache); Live reads past it, to confirm an
	// absence before acting on it. Tests substitute a lagging Cache.
	Cache client.Reader
	Live  client.Reader
	// Writer performs the writes (normally the manager's client).
	Writer client.Client
	// BeforeWrite, when set, is called before every write with its name and object; an error
	// stops the write. Tests use it to kill the binder between any two writes.
	BeforeWrite func(op string, obj client.Object) error
	// WriteGuard, when set, is asked just before every write and stops it with its error: with
	// leader election, whether this replica still provably holds the Lease (a replica frozen past
	// its Lease must not write from its stale view when it wakes).
	WriteGuard func() error
	// KeepPlans keeps the newest plan and its input for the explanations served in this process
	// (LatestPlan): the input's state then holds every claim and every cached node, which
	// explanations read, and not only what the plan reads.
	KeepPlans bool
}

// key identifies a unit of work: a claim, a volume, or the pool plan.
type key struct {
	kind      byte // 'c' claim, 'v' volume, 'p' plan
	namespace string
	name      string
}

// planKey is the one key of the plan queue: requests for a plan made while one is queued or
// running collapse into one more plan.
var planKey = key{kind: 'p'}

// Binder is pvguard's binder loop.
type Binder struct {
	o Options
	// queue holds claims and volumes to sync; plans have their own queue, so that a plan never
	// waits behind the writes of the claims the last plan gave volumes to (a plan of 10,000
	// claims enqueues 10,000 binds, which take minutes at the client's rate limit).
	queue   workqueue.TypedRateLimitingInterface[key]
	plans   workqueue.TypedRateLimitingInterface[key]
	metrics *metrics
	// planTook is how long the last plan took (nanoseconds), which pause waits before the next.
	planTook atomic.Int64
	// running is true while Start runs (on the elected replica), when the queues are drained.
	running atomic.Bool

	// ledger is the binder's in-flight state, shared by its workers and its planner.
	ledger *ledger
	// noFits is when each pending claim was last explained for NoVolumeFits (plan worker only).
	noFits noVolumeFits
	// made is the newest plan, for explanations (Options.KeepPlans).
	made madePlans
}

// New builds a binder. Register it with SetupInformers before the cache starts, then Start it
// (under leader election in active mode).
func New(o Options) (*Binder, error) {
	if o.Mode != ModeActive && o.Mode != ModeShadow {
		return nil, fmt.Errorf("binder mode %q: want active or shadow", o.Mode)
	}
	if o.Cache == nil || o.Live == nil || o.Writer == nil || o.Engine == nil || o.Views == nil || o.Recorder == nil {
		return nil, errors.New("binder: Cache, Live, Writer, Engine, Views and Recorder are required")
	}
	if o.NoVolumeFitsAfter > 0 && o.Explain == nil {
		return nil, errors.New("binder: NoVolumeFitsAfter needs Explain")
	}
	if o.NoVolumeFitsRecorder == nil {
		o.NoVolumeFitsRecorder = o.Recorder
	}
	if o.Workers <= 0 {
		o.Workers = 8
	}
	if o.Resync <= 0 {
		o.Resync = 15 * time.Second
	}
	if o.Registry == nil {
		o.Registry = prometheus.NewRegistry()
	}
	b := &Binder{
		o:      o,
		queue:  workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[key]()),
		plans:  workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[key]()),
		ledger: newLedger(),
	}
	b.metrics = newMetrics(o.Registry, b.ledger.shadowChoices, b.queueDepths)
	return b, nil
}

// queueDepths is the length of the sync and plan queues, and whether this replica runs the
// binder (only then does anything drain them).
func (b *Binder) queueDepths() (sync, plan int, running bool) {
	return b.queue.Len(), b.plans.Len(), b.running.Load()
}

// NeedLeaderElection makes the manager run the binder only on the elected replica.
func (b *Binder) NeedLeaderElection() bool { return true }

// SetupInformers subscribes the binder to volume, claim and class changes.
func (b *Binder) SetupInformers(ctx context.Context, c cache.Cache) error {
	handlers := map[client.Object]toolscache.ResourceEventHandler{
		&corev1.PersistentVolume{}:      toolscache.ResourceEventHandlerFuncs{AddFunc: b.onVolume, UpdateFunc: func(_, n any) { b.onVolume(n) }, DeleteFunc: b.onVolume},
		&corev1.PersistentVolumeClaim{}: toolscache.ResourceEventHandlerFuncs{AddFunc: b.onClaim, UpdateFunc: func(_, n any) { b.onClaim(n) }, DeleteFunc: b.onClaim},
		&storagev1.StorageClass{}:       toolscache.ResourceEventHandlerFuncs{AddFunc: b.onClass, UpdateFunc: func(_, n any) { b.onClass(n) }},
	}
	for obj, h := range handlers {
		inf, err := c.GetInformer(ctx, obj)
		if err != nil {
			return fmt.Errorf("binder informer for %T: %w", obj, err)
		}
		if _, err := inf.AddEventHandler(h); err != nil {
			return fmt.Errorf("binder handler for %T: %w", obj, err)
		}
	}
	return nil
}

func unwrap(obj any) any {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		return d.Obj
	}
	return obj
}

func (b *Binder) onVolume(obj any) {
	v, ok := unwrap(obj).(*corev1.PersistentVolume)
	if !ok {
		return
	}
	b.queue.Add(key{kind: 'v', name: v.Name})
	ref := v.Spec.ClaimRef
	if ref != nil {
		b.queue.Add(key{kind: 'c', namespace: ref.Namespace, name: ref.Name})
	}
	// Only new supply changes a plan: a free or pre-bound volume. The binder's own writes to
	// bound volumes would otherwise replan once per write.
	if ref == nil || ref.UID == "" || v.Status.Phase != corev1.VolumeBound {
		b.requestPlan()
	}
}

func (b *Binder) onClaim(obj any) {
	c, ok := unwrap(obj).(*corev1.PersistentVolumeClaim)
	if !ok {
		return
	}
	b.queue.Add(key{kind: 'c', namespace: c.Namespace, name: c.Name})
	if c.Spec.VolumeName != "" {
		b.queue.Add(key{kind: 'v', name: c.Spec.VolumeName})
	}
	if _, done := c.Annotations[storage.AnnBindCompleted]; !done && c.Spec.VolumeName == "" {
		b.requestPlan()
	}
}

func (b *Binder) onClass(any) { b.requestPlan() }

// requestPlan schedules a plan shortly, so a burst of changes is planned once.
func (b *Binder) requestPlan() { b.plans.AddAfter(planKey, 20*time.Millisecond) }

// Start runs the workers and the periodic resync until ctx ends.
func (b *Binder) Start(ctx context.Context) error {
	defer b.queue.ShutDown()
	defer b.plans.ShutDown()
	b.running.Store(true)
	defer b.running.Store(false)
	b.o.Log.Info("binder started", "mode", b.o.Mode, "workers", b.o.Workers)
	var wg sync.WaitGroup
	for range b.o.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b.processNext(ctx, b.queue) {
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for b.processNext(ctx, b.plans) && b.pause(ctx) {
		}
	}()
	b.resyncAll(ctx)
	t := time.NewTicker(b.o.Resync)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			b.queue.ShutDown()
			b.plans.ShutDown()
			wg.Wait()
			return nil
		case <-t.C:
			b.resyncAll(ctx)
		}
	}
}

func (b *Binder) resyncAll(ctx context.Context) {
	// Only the names are read: the cache's own objects, no copies (every 15 s, of every object).
	if pvs, err := cachelist.List(ctx, b.o.Cache, &corev1.PersistentVolume{}, &corev1.PersistentVolumeList{}); err == nil {
		for _, v := range pvs {
			b.queue.Add(key{kind: 'v', name: v.Name})
		}
	}
	if pvcs, err := cachelist.List(ctx, b.o.Cache, &corev1.PersistentVolumeClaim{}, &corev1.PersistentVolumeClaimList{}); err == nil {
		for _, c := range pvcs {
			b.queue.Add(key{kind: 'c', namespace: c.Namespace, name: c.Name})
		}
	}
	b.plans.Add(planKey)
}

// pause spaces plans: after a plan that took d, the next starts no sooner than d later, so
// that planning takes at most half a core however often the pool changes (while a backlog of
// binds is written, every bind asks for a plan). It reports false once ctx ends.
func (b *Binder) pause(ctx context.Context) bool {
	t := time.NewTimer(time.Duration(b.planTook.Load()))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func (b *Binder) processNext(ctx context.Context, queue workqueue.TypedRateLimitingInterface[key]) bool {
	k, quit := queue.Get()
	if quit {
		return false
	}
	defer queue.Done(k)
	var err error
	switch k.kind {
	case 'c':
		err = b.syncClaim(ctx, k.namespace, k.name)
	case 'v':
		err = b.syncVolume(ctx, k.name)
	case 'p':
		err = b.runPlan(ctx)
	}
	if err == nil {
		queue.Forget(k)
		return true
	}
	if ctx.Err() == nil {
		op := map[byte]string{'c': "claim", 'v': "volume", 'p': "plan"}[k.kind]
		b.metrics.errors.WithLabelValues(op).Inc()
		if apierrors.IsConflict(err) {
			b.o.Log.V(1).Info("retrying after a conflict", "object", k.namespace+"/"+k.name, "err", err.Error())
		} else {
			b.o.Log.Error(err, "sync failed; retrying", "kind", op, "object", k.namespace+"/"+k.name)
		}
	}
	queue.AddRateLimited(k)
	return true
}

// --- claims ---

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
	s, err := b.claimState(ctx, claim)
	if err != nil {
		return err
	}
	a := DecideClaim(s)
	if a.NeedLiveVolume {
		v := &corev1.PersistentVolume{}
		switch err := b.o.Live.Get(ctx, client.ObjectKey{Name: claim.Spec.VolumeName}, v); {
		case apierrors.IsNotFound(err):
			s.Volume = nil
		case err != nil:
			return fmt.Errorf("reading volume %s of claim %s/%s: %w", claim.Spec.VolumeName, namespace, name, err)
		default:
			s.Volume = v
		}
		s.VolumeConfirmed = true
		a = DecideClaim(s)
	}
	if b.o.Mode == ModeShadow {
		b.shadowClaim(ctx, claim, a)
		return nil
	}
	return b.applyClaim(ctx, claim, a)
}

func (b *Binder) claimState(ctx context.Context, claim *corev1.PersistentVolumeClaim) (ClaimState, error) {
	s := ClaimState{Claim: claim, Denied: b.ledger.denied(claim.UID, time.Now())}
	if claim.Spec.VolumeName != "" {
		switch v, err := b.getVolume(ctx, claim.Spec.VolumeName); {
		case err == nil:
			s.Volume = v
		case !apierrors.IsNotFound(err):
			return s, fmt.Errorf("reading volume %s: %w", claim.Spec.VolumeName, err)
		}
	}
	classes, err := b.classes(ctx)
	if err != nil {
		return s, err
	}
	s.DefaultClass = defaultClass(classes)
	if name := storage.ClaimClass(claim); name != "" {
		for _, sc := range classes {
			if sc.Name == name {
				s.Class = sc
			}
		}
	}
	if claim.Spec.VolumeName == "" && isDelayBinding(claim, s.Class) {
		// The planner leaves these claims alone; what the binder may complete is a binding
		// that a volume pointing at the claim began.
		pre, err := b.o.Views(ctx).VolumesClaiming(claim.Namespace, claim.Name)
		if err != nil {
			return s, fmt.Errorf("listing volumes pre-bound to claim %s/%s: %w", claim.Namespace, claim.Name, err)
		}
		s.PreBound = pre
		return s, nil
	}
	assigned, planned := b.ledger.planned(claim.UID)
	s.Planned = planned
	if assigned != "" {
		v, err := b.getVolume(ctx, assigned)
		switch {
		case err == nil && fitsUnbound(claim, v, nil, false, b.pendingFree()):
			s.Assigned = v
		case err == nil || apierrors.IsNotFound(err):
			// The plan went stale (the volume was taken or changed): plan again.
			s.Planned = false
		default:
			return s, fmt.Errorf("reading planned volume %s: %w", assigned, err)
		}
	}
	return s, nil
}

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

// --- volumes ---

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
		switch err := b.o.Live.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, c); {
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

// write performs one write of obj, giving tests the chance to stop it, and remembers the
// resourceVersion it replaced.
// update writes obj, a changed copy of base, as a JSON merge patch from base that carries base's
// resourceVersion, so that it fails on a conflict as an update would. What the cache drops
// (storage.CacheShape: managedFields, the last-applied annotation, unread status fields) is in
// neither object, so the patch leaves it on the server where an update would erase it.
func (b *Binder) update(ctx context.Context, base, obj client.Object) error {
	return b.o.Writer.Patch(ctx, obj, patchFrom(base))
}

// updateStatus is update through the status subresource.
func (b *Binder) updateStatus(ctx context.Context, base, obj client.Object) error {
	return b.o.Writer.Status().Patch(ctx, obj, patchFrom(base))
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

// lagging reports whether the cached obj is a version the binder's own writes replaced.
func (b *Binder) lagging(k key, obj client.Object) bool {
	return b.ledger.lagging(k, obj.GetResourceVersion())
}

func keyOf(obj client.Object) (key, bool) {
	switch obj.(type) {
	case *corev1.PersistentVolume:
		return key{kind: 'v', name: obj.GetName()}, true
	case *corev1.PersistentVolumeClaim:
		return key{kind: 'c', namespace: obj.GetNamespace(), name: obj.GetName()}, true
	}
	return key{}, false
}

func setAnn(m *metav1.ObjectMeta, k, v string) {
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[k] = v
}

// sortedKeys is used where map order would make plans nondeterministic.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
