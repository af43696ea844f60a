package explain

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/binder"
)

// This file keeps the server's one plan of the pool, which every explanation of a claim reads.
// While the binder runs in the process (shadow or active, on the elected replica) it is the
// binder's own plan (binder.Binder.LatestPlan), which the binder keeps current as objects change;
// otherwise Plans makes it: the informer cache read once and planned once, made again when
// objects changed, at most once a PlansOptions.MinInterval, while the explanations keep reading
// the one before. Either way the pool is planned once per change, not once per question (seconds
// of a core at 100,000 volumes) nor twice per process.

// PlansOptions say how often the server's plan is made again and how long a question waits.
type PlansOptions struct {
	// MinInterval is the least time between two plans (default 1s): changes in between are
	// planned together, after it. With the binder's plans, the least time between two takes of
	// its newest (each reads every volume's facts again).
	MinInterval time.Duration
	// MaxAge is the age at which a plan that holds binds in flight or denials is made again even
	// though no object changed (default 10s): they age without an object changing. The binder's
	// plans age with its own resync.
	MaxAge time.Duration
	// Timeout bounds a plan's read and planning (default 1m).
	Timeout time.Duration
	// FreshWait bounds how long a question about a claim that changed (or that the plan does not
	// hold) waits for a plan read after the change (default 2s); past it, the newest plan answers.
	FreshWait time.Duration
	// FirstWait bounds how long a question waits when no plan was made yet (default 10s); past
	// it, the question is answered 503. The first plan is made when the cache has synced (Start).
	FirstWait time.Duration
}

// BinderPlans is the binder running in the process (binder.Binder, with Options.KeepPlans), whose
// plans the explanations read while it plans.
type BinderPlans interface {
	// Planning reports whether the binder runs here (the elected replica) and makes plans.
	Planning() bool
	// LatestPlan is its newest plan (nil before the first) and a channel closed once a newer one
	// is made.
	LatestPlan() (*binder.MadePlan, <-chan struct{})
	// PlanReadsBegun numbers the plan reads begun so far (binder.MadePlan.Read).
	PlanReadsBegun() uint64
	// RequestPlan asks for a plan soon.
	RequestPlan()
}

// Plans is the server's current plan of the pool, for its explanations (ServeOptions.Plans):
// Changed says an object changed (WatchChanges calls it), and an explanation reads the newest
// plan made, asking for the next when objects changed since (a plan older than MinInterval) or
// it is older than MaxAge: it is made (or, from the binder, taken) in the background, and the
// explanations read the one before until it is done.
type Plans struct {
	o      ServeOptions
	po     PlansOptions
	binder BinderPlans

	mu  sync.Mutex
	cur *snapshot
	// reads numbers the plans made here, in the order their reads began; ownSeen and binderSeen
	// are the reads begun (here and by the binder) when the last change was seen: a plan whose
	// read is numbered above them read every change seen so far.
	reads, ownSeen, binderSeen uint64
	building                   chan struct{} // closed when the plan being made is done; nil when none is
	err                        error         // the last plan's error, when it made none
}

// snapshot is a read of the cache and its plan: the input as read (claims with uids), indexed,
// and planned with the binder's state at the time.
type snapshot struct {
	in Input
	x  *index
	p  pool
	at time.Time
	// read numbers its read: Plans.reads, or the binder's binder.MadePlan.Read when made is set.
	read uint64
	// made is the binder's plan the snapshot is of; nil for a plan made here.
	made *binder.MadePlan
}

// fromBinder reports whether s is the binder's plan.
func (s *snapshot) fromBinder() bool { return s.made != nil }

// errNoPlanYet is a question asked before the first plan was made, past FirstWait.
var errNoPlanYet = &NotReadyError{RetryAfter: 5 * time.Second}

// NewPlans returns the plans of o's cache (o.Cache, o.PlanState, o.Now), or of the binder's
// plans while o.Binder plans.
func NewPlans(o ServeOptions, po PlansOptions) *Plans {
	if o.Now == nil {
		o.Now = time.Now
	}
	if po.MinInterval <= 0 {
		po.MinInterval = time.Second
	}
	if po.MaxAge <= 0 {
		po.MaxAge = 10 * time.Second
	}
	if po.Timeout <= 0 {
		po.Timeout = time.Minute
	}
	if po.FreshWait <= 0 {
		po.FreshWait = 2 * time.Second
	}
	if po.FirstWait <= 0 {
		po.FirstWait = 10 * time.Second
	}
	return &Plans{o: o, po: po, binder: o.Binder}
}

// Start makes the first plan (or takes the binder's) as soon as the manager runs it, which is
// once the cache has synced, so that no question waits for it; it returns when that plan is
// made. With a binder it first waits, at most FirstWait, for the binder to start planning: only
// the elected replica's binder plans, and another replica makes its own.
func (p *Plans) Start(ctx context.Context) error {
	if p.binder != nil {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		deadline := time.NewTimer(p.po.FirstWait)
		defer deadline.Stop()
	wait:
		for !p.binder.Planning() {
			select {
			case <-ctx.Done():
				return nil
			case <-deadline.C:
				break wait
			case <-tick.C:
			}
		}
	}
	p.mu.Lock()
	if p.cur == nil && p.building == nil {
		p.startLocked(ctx)
	}
	done := p.building
	p.mu.Unlock()
	if done != nil {
		select {
		case <-done:
		case <-ctx.Done():
		}
	}
	return nil
}

// NeedLeaderElection: every replica answers questions, so every replica keeps a plan.
func (p *Plans) NeedLeaderElection() bool { return false }

// Changed says that an object an explanation reads changed: the next explanation after
// MinInterval asks for a new plan.
func (p *Plans) Changed() {
	p.mu.Lock()
	p.seeLocked()
	p.mu.Unlock()
}

// seeLocked records a change: plans whose reads began before now did not read it.
func (p *Plans) seeLocked() {
	p.ownSeen = p.reads
	if p.binder != nil {
		p.binderSeen = p.binder.PlanReadsBegun()
	}
}

// freshLocked reports whether s read every change seen so far.
func (p *Plans) freshLocked(s *snapshot) bool {
	if s.fromBinder() {
		return s.read > p.binderSeen
	}
	return s.read > p.ownSeen
}

// planning reports whether the binder makes the plans now.
func (p *Plans) planning() bool { return p.binder != nil && p.binder.Planning() }

// dueLocked reports whether the newest plan cur should be followed by another, made in the
// background: from the binder, when it has a newer plan and MinInterval passed since cur was
// taken; here, when an object changed since cur's read and MinInterval passed, or cur is older
// than MaxAge; and whenever the source changed (the binder started or stopped planning).
func (p *Plans) dueLocked(cur *snapshot) bool {
	age := p.o.Now().Sub(cur.at)
	if p.planning() {
		mp, _ := p.binder.LatestPlan()
		return mp != nil && (!cur.fromBinder() || mp.Read > cur.read && age >= p.po.MinInterval)
	}
	return cur.fromBinder() || !p.freshLocked(cur) && age >= p.po.MinInterval || age >= p.po.MaxAge && ages(cur.in.InFlight)
}

// ages reports whether a plan's in-flight state ages without an object changing: it holds binds
// in flight or denials. A plan without them (the binder is off, or does not run on this replica)
// stays as good as it was until an object changes.
func ages(f binder.InFlight) bool { return len(f.Reserved) > 0 || len(f.Denied) > 0 }

// forClaim is the plan a question about claim namespace/name reads: the newest, when it holds
// the claim as the cache holds it now (the claim did not change since the plan's read, nor was
// it made since), without waiting for a newer one; otherwise a plan read after now (fresh).
func (p *Plans) forClaim(ctx context.Context, c client.Reader, namespace, name string) (*snapshot, error) {
	cur, err := p.current(ctx)
	if err != nil {
		return nil, err
	}
	held, _ := cur.in.state().PersistentVolumeClaim(namespace, name)
	var now corev1.PersistentVolumeClaim
	err = c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &now, client.UnsafeDisableDeepCopy)
	switch {
	case apierrors.IsNotFound(err) && held == nil:
		return cur, nil
	case err == nil && held != nil && held.UID == now.UID && held.ResourceVersion == now.ResourceVersion:
		return cur, nil
	}
	return p.fresh(ctx, true)
}

// fresh is a plan read after every change seen so far (with force, after now too: the asked
// claim changed, or is not in the newest plan), waiting for it at most FreshWait; past the wait,
// the newest plan. A question thus sees the writes made before it, as a read of the cache would,
// while a question on a pool that did not change waits for nothing. Plans made here are never
// closer than MinInterval. While the binder plans, the plan is the binder's: a question asks it
// for one (RequestPlan) when its newest did not read the change, and takes the first that did.
func (p *Plans) fresh(ctx context.Context, force bool) (*snapshot, error) {
	if force {
		p.Changed()
	}
	deadline := time.NewTimer(p.po.FreshWait)
	defer deadline.Stop()
	asked := false
	for {
		p.mu.Lock()
		cur := p.cur
		if cur != nil && p.freshLocked(cur) {
			p.mu.Unlock()
			return cur, nil
		}
		var wait <-chan struct{} = p.building
		var sleep time.Duration
		if wait == nil {
			if cur != nil {
				sleep = p.po.MinInterval - p.o.Now().Sub(cur.at)
			}
			if p.planning() {
				// The binder spaces its plans itself (no closer than a plan's duration): a
				// question takes the first that read the change, without MinInterval's wait.
				mp, next := p.binder.LatestPlan()
				if mp == nil || mp.Read <= p.binderSeen {
					// Its newest did not read the change: ask for the next, and wait for it.
					if !asked {
						p.binder.RequestPlan()
						asked = true
					}
					wait = next
				} else {
					p.startLocked(ctx)
					wait = p.building
				}
			} else if sleep <= 0 {
				p.startLocked(ctx)
				wait = p.building
			}
		}
		p.mu.Unlock()
		var later <-chan time.Time
		if wait == nil {
			t := time.NewTimer(sleep)
			later = t.C
			defer t.Stop()
		}
		select {
		case <-wait:
		case <-later:
		case <-deadline.C:
			return p.current(ctx)
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for a plan of the pool: %w", ctx.Err())
		}
	}
}

// current is the newest plan, waiting for one only when none was made yet, at most FirstWait
// (then errNoPlanYet).
func (p *Plans) current(ctx context.Context) (*snapshot, error) {
	p.mu.Lock()
	if cur := p.cur; cur != nil {
		if p.building == nil && p.dueLocked(cur) {
			p.startLocked(ctx)
		}
		p.mu.Unlock()
		return cur, nil
	}
	if p.building == nil {
		p.startLocked(ctx)
	}
	done := p.building
	p.mu.Unlock()
	first := time.NewTimer(p.po.FirstWait)
	defer first.Stop()
	select {
	case <-done:
	case <-first.C:
		return nil, errNoPlanYet
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for the first plan of the pool: %w", ctx.Err())
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cur == nil {
		return nil, p.err
	}
	return p.cur, nil
}

// startLocked makes a plan in the background (or takes the binder's newest, while it plans);
// the caller holds p.mu. Its context is the asking request's values without its cancellation
// (the plan serves every explanation after it), under Timeout.
func (p *Plans) startLocked(ctx context.Context) {
	done := make(chan struct{})
	p.building = done
	fromBinder := p.planning()
	var read uint64
	if !fromBinder {
		p.reads++
		read = p.reads
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.po.Timeout)
		defer cancel()
		var s *snapshot
		var err error
		if fromBinder {
			s, err = p.binderSnapshot(ctx)
		} else {
			sctx, give := p.o.Seats.Take(ctx)
			if s, err = readSnapshot(sctx, p.o); err == nil {
				s.read = read
			}
			give()
		}
		if err != nil {
			p.o.Log.Error(err, "planning the pool for explanations")
		}
		p.mu.Lock()
		if err == nil {
			p.cur = s
		} else if p.cur == nil {
			p.err = err
		}
		p.building = nil
		p.mu.Unlock()
		close(done)
	}()
}

// binderSnapshot is the binder's newest plan, indexed for explanations (waiting, under ctx, for
// its first).
func (p *Plans) binderSnapshot(ctx context.Context) (*snapshot, error) {
	for {
		mp, next := p.binder.LatestPlan()
		if mp != nil {
			x := indexInput(Input{State: mp.Input.State, NodesListed: true, PendingFree: mp.Input.PendingFree, InFlight: mp.Input.InFlight, Now: p.o.Now()})
			return snapshotOf(x, poolOf(mp.Plan), mp.Read, mp), nil
		}
		select {
		case <-next:
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for the binder's first plan: %w", ctx.Err())
		}
	}
}

// snapshotOf is the snapshot of the indexed input x, planned as p.
func snapshotOf(x *index, p pool, read uint64, made *binder.MadePlan) *snapshot {
	// What every question reads of the whole state, made here once rather than by the first
	// question after the plan: the volumes' facts, and the state's lookups by name and uid,
	// each built on first use (at 100,000 pairs 25-85 ms apiece on a quiet core, which the first
	// question and every one beside it would wait for).
	x.volumeFacts()
	st := x.in.state()
	_, _ = st.PersistentVolumeClaim("", "")
	_, _ = st.PersistentVolume("")
	_, _ = st.ClaimWithUID("")
	_, _ = st.Node("")
	return &snapshot{in: x.in, x: x, p: p, at: x.in.Now, read: read, made: made}
}

// readSnapshot reads the cache and plans it, with the binder's state when it runs here.
func readSnapshot(ctx context.Context, o ServeOptions) (*snapshot, error) {
	in, err := ReadInput(ctx, o.Cache, nil, "", o.reads()...)
	if err != nil {
		return nil, fmt.Errorf("reading the informer cache: %w", err)
	}
	in.Now = o.Now()
	if o.PlanState != nil {
		in.PendingFree, in.InFlight = o.PlanState(in.Now)
	}
	in.State = withUIDs(in.state())
	x := indexInput(in)
	return snapshotOf(x, planPool(x, in.InFlight), 0, nil), nil
}

// nodeChanged reports whether a node's update may change a plan or a check: its labels changed
// (node affinity reads nothing else of it).
func nodeChanged(old, cur any) bool {
	o, ok1 := old.(metav1.Object)
	n, ok2 := cur.(metav1.Object)
	return !ok1 || !ok2 || !maps.Equal(o.GetLabels(), n.GetLabels())
}

// WatchChanges tells p of every change of the volumes, claims and classes in c, and of nodes
// that come, go or change their labels: each may change the plan or a check. A node's other
// updates (its status, every few seconds to minutes from its kubelet) change neither.
func WatchChanges(ctx context.Context, c cache.Informers, p *Plans) error {
	h := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { p.Changed() },
		UpdateFunc: func(any, any) { p.Changed() },
		DeleteFunc: func(any) { p.Changed() },
	}
	nodes := toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { p.Changed() },
		UpdateFunc: func(old, cur any) {
			if nodeChanged(old, cur) {
				p.Changed()
			}
		},
		DeleteFunc: func(any) { p.Changed() },
	}
	node := &metav1.PartialObjectMetadata{}
	node.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Node"))
	for _, obj := range []client.Object{&corev1.PersistentVolume{}, &corev1.PersistentVolumeClaim{}, &storagev1.StorageClass{}, node} {
		handler := h
		if obj == node {
			handler = nodes
		}
		inf, err := c.GetInformer(ctx, obj)
		if err != nil {
			return fmt.Errorf("explain informer for %T: %w", obj, err)
		}
		if _, err := inf.AddEventHandler(handler); err != nil {
			return fmt.Errorf("explain handler for %T: %w", obj, err)
		}
	}
	return nil
}
