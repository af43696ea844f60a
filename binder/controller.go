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
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/internal/cachelist"
	"github.com/pvguard/pvguard/internal/cores"
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
	// Seats are the process's seats for its long computations (internal/cores): each sync and
	// plan holds one while it computes and steps away from it around its API calls. nil: no bound.
	Seats *cores.Seats
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
	// planWork is the time spent on the plans outside the binder since the last pause
	// (nanoseconds, AddPlanWork), which pause waits besides.
	planWork atomic.Int64
	// running is true while Start runs (on the elected replica), when the queues are drained.
	running atomic.Bool
	// synced say the handlers have been told of every object of the informers' first lists,
	// which they leave to Start's first resync (SetupInformers).
	synced []toolscache.InformerSynced

	// ledger is the binder's in-flight state, shared by its workers and its planner.
	ledger *ledger
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
	// The objects of an informer's first list are not queued one by one as they are told: Start's
	// first resync queues every object, paced (resyncAll), once the handlers have been told of
	// them all. Queued at once, they would grow the queue's sets to every key of the cluster,
	// which they then hold for good (a Go map does not shrink).
	later := func(on func(any)) func(any, bool) {
		return func(obj any, initial bool) {
			if !initial {
				on(obj)
			}
		}
	}
	handlers := map[client.Object]toolscache.ResourceEventHandler{
		&corev1.PersistentVolume{}:      toolscache.ResourceEventHandlerDetailedFuncs{AddFunc: later(b.onVolume), UpdateFunc: func(_, n any) { b.onVolume(n) }, DeleteFunc: b.onVolume},
		&corev1.PersistentVolumeClaim{}: toolscache.ResourceEventHandlerDetailedFuncs{AddFunc: later(b.onClaim), UpdateFunc: func(_, n any) { b.onClaim(n) }, DeleteFunc: b.onClaim},
		&storagev1.StorageClass{}:       toolscache.ResourceEventHandlerDetailedFuncs{AddFunc: later(b.onClass), UpdateFunc: func(_, n any) { b.onClass(n) }},
	}
	for obj, h := range handlers {
		inf, err := c.GetInformer(ctx, obj)
		if err != nil {
			return fmt.Errorf("binder informer for %T: %w", obj, err)
		}
		reg, err := inf.AddEventHandler(h)
		if err != nil {
			return fmt.Errorf("binder handler for %T: %w", obj, err)
		}
		b.synced = append(b.synced, reg.HasSynced)
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
	// The first resync stands for the objects of the informers' first lists (SetupInformers).
	if toolscache.WaitForCacheSync(ctx.Done(), b.synced...) {
		b.resyncAll(ctx)
	}
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

// resyncBatch is how many keys a resync queues at a time (resyncAll).
const resyncBatch = 2048

// resyncAll queues a plan and every volume and claim. The keys are queued a batch at a time,
// each batch once fewer than resyncBatch keys wait: the queue's sets keep the largest size they
// had (a Go map does not shrink), and every key of a large cluster at once would hold them at
// that size for good (at 100,000 volumes and claims, about 20 MB). A backlog of changes delays
// the resync, which would have queued the same keys behind it. It returns early when ctx ends.
func (b *Binder) resyncAll(ctx context.Context) {
	// The plan first, on its own queue: it reads the cache, not this queue, and need not wait for
	// the keys to be queued.
	b.plans.Add(planKey)
	queued := 0
	add := func(k key) bool {
		if queued++; queued%resyncBatch == 0 {
			for b.queue.Len() >= resyncBatch {
				select {
				case <-ctx.Done():
					return false
				case <-time.After(5 * time.Millisecond):
				}
			}
		}
		b.queue.Add(k)
		return true
	}
	// Only the names are read: the cache's own objects, no copies (every 15 s, of every object).
	if pvs, err := cachelist.List(ctx, b.o.Cache, &corev1.PersistentVolume{}, &corev1.PersistentVolumeList{}); err == nil {
		for _, v := range pvs {
			if !add(key{kind: 'v', name: v.Name}) {
				return
			}
		}
	}
	if pvcs, err := cachelist.List(ctx, b.o.Cache, &corev1.PersistentVolumeClaim{}, &corev1.PersistentVolumeClaimList{}); err == nil {
		for _, c := range pvcs {
			if !add(key{kind: 'c', namespace: c.Namespace, name: c.Name}) {
				return
			}
		}
	}
}

// pause spaces plans: after a plan that took d, the next starts no sooner than d later, so
// that planning takes at most half a core however often the pool changes (while a backlog of
// binds is written, every bind asks for a plan). The time spent on the plans outside the binder
// (AddPlanWork: the NoVolumeFits pass) lengthens the pause by as much, so that planning and what
// is done with the plans together still take at most half a core; time reported after the pause
// ends lengthens the next one. It reports false once ctx ends.
func (b *Binder) pause(ctx context.Context) bool {
	for d := time.Duration(b.planTook.Load()); d > 0; d = time.Duration(b.planWork.Swap(0)) {
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
	}
	return ctx.Err() == nil
}

// AddPlanWork adds d, time spent on the latest plan outside the binder (the NoVolumeFits pass
// that reads LatestPlan), to the pause before the next plan (pause).
func (b *Binder) AddPlanWork(d time.Duration) {
	if d > 0 {
		b.planWork.Add(int64(d))
	}
}

func (b *Binder) processNext(ctx context.Context, queue workqueue.TypedRateLimitingInterface[key]) bool {
	k, quit := queue.Get()
	if quit {
		return false
	}
	defer queue.Done(k)
	// A sync computes on a seat, so that the workers of a resync (every object, back to back)
	// leave a core to the admission reviews; it steps away from it while the apiserver answers.
	ctx, give := b.o.Seats.Take(ctx)
	defer give()
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

// --- volumes ---

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

// sortedKeys is used where map order would make plans nondeterministic.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
