package explain

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// This file keeps the server's one plan of the pool: the informer cache read once and planned
// once, made again when objects changed, at most once a PlansOptions.MinInterval, while the
// explanations keep reading the one before. A plan of the whole pool is what an explanation
// needs of the other claims (which volume each takes); made for each question it cost seconds of
// a core at 100,000 volumes and a copy of every object's struct per question in flight.

// PlansOptions say how often the server's plan is made again.
type PlansOptions struct {
	// MinInterval is the least time between two plans (default 1s): changes in between are
	// planned together, after it.
	MinInterval time.Duration
	// MaxAge is the age at which a plan is made again even though no object changed (default
	// 10s): the binder's binds in flight and the denials it met age without an object changing.
	MaxAge time.Duration
	// Timeout bounds a plan's read and planning (default 1m).
	Timeout time.Duration
	// FreshWait bounds how long a question waits for a plan read after every change the server
	// had seen when it was asked (default 2s); past it, the newest plan answers.
	FreshWait time.Duration
}

// Plans is the server's current plan of the pool, for its explanations (ServeOptions.Plans):
// Changed says an object changed (WatchChanges calls it), and an explanation reads the newest
// plan made, asking for the next when objects changed since (a plan older than MinInterval) or
// it is older than MaxAge: it is made in the background, and the explanations read the one
// before until it is done. Only the first explanation waits for a plan.
type Plans struct {
	o  ServeOptions
	po PlansOptions

	mu       sync.Mutex
	cur      *snapshot
	changed  bool
	seq      uint64        // changes seen; a plan records the count its read began after
	building chan struct{} // closed when the plan being made is done; nil when none is
	err      error         // the last plan's error, when it made none
}

// snapshot is a read of the cache and its plan: the input as read (claims with uids, withUIDs),
// indexed, and planned with the binder's state at the time.
type snapshot struct {
	in  Input
	x   *index
	p   pool
	at  time.Time
	seq uint64 // the changes its read began after (Plans.seq)
}

// NewPlans returns the plans of o's cache (o.Cache, o.PlanState, o.Now).
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
	return &Plans{o: o, po: po}
}

// Changed says that an object an explanation reads changed: the next explanation after
// MinInterval asks for a new plan.
func (p *Plans) Changed() {
	p.mu.Lock()
	p.changed = true
	p.seq++
	p.mu.Unlock()
}

// fresh is a plan read after every change seen so far (with force, after now too: the asked
// claim is not in the newest plan, and may have just been made), waiting for it at most
// FreshWait and never making plans closer than MinInterval; past the wait, the newest plan. A
// question thus sees the writes made before it, as a read of the cache would, while a question
// on a pool that did not change waits for nothing.
func (p *Plans) fresh(ctx context.Context, force bool) (*snapshot, error) {
	p.mu.Lock()
	if force {
		p.seq++
		p.changed = true
	}
	want := p.seq
	p.mu.Unlock()
	deadline := time.NewTimer(p.po.FreshWait)
	defer deadline.Stop()
	for {
		p.mu.Lock()
		cur := p.cur
		if cur != nil && cur.seq >= want {
			p.mu.Unlock()
			return cur, nil
		}
		wait := p.building
		var sleep time.Duration
		if wait == nil {
			if cur != nil {
				sleep = p.po.MinInterval - p.o.Now().Sub(cur.at)
			}
			if sleep <= 0 {
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

// current is the newest plan, waiting for one only when none was made yet (ctx bounds the wait).
func (p *Plans) current(ctx context.Context) (*snapshot, error) {
	p.mu.Lock()
	cur, now := p.cur, p.o.Now()
	if cur != nil {
		age := now.Sub(cur.at)
		if (p.changed && age >= p.po.MinInterval || age >= p.po.MaxAge) && p.building == nil {
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
	select {
	case <-done:
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

// startLocked makes a plan in the background; the caller holds p.mu. Its context is the asking
// request's values without its cancellation (the plan serves every explanation after it), under
// Timeout.
func (p *Plans) startLocked(ctx context.Context) {
	done := make(chan struct{})
	p.building, p.changed = done, false
	seq := p.seq
	go func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.po.Timeout)
		defer cancel()
		s, err := readSnapshot(ctx, p.o)
		if err != nil {
			p.o.Log.Error(err, "planning the pool for explanations")
		}
		p.mu.Lock()
		if err == nil {
			s.seq = seq
			p.cur = s
		} else if p.cur == nil {
			p.err = err
		}
		p.building = nil
		p.mu.Unlock()
		close(done)
	}()
}

// readSnapshot reads the cache and plans it, with the binder's state when it runs here.
func readSnapshot(ctx context.Context, o ServeOptions) (*snapshot, error) {
	in, err := ReadInput(ctx, o.Cache, nil, "")
	if err != nil {
		return nil, fmt.Errorf("reading the informer cache: %w", err)
	}
	in.Now = o.Now()
	if o.PlanState != nil {
		in.PendingFree, in.InFlight = o.PlanState(in.Now)
	}
	in.State = withUIDs(in.state())
	x := indexInput(in)
	// What every question reads of the whole state, made here once rather than by the first
	// question after the plan: the volumes' facts and the state's index of claimRefs.
	x.volumeFacts()
	_, _ = in.State.VolumesClaiming("", "")
	return &snapshot{in: in, x: x, p: planPool(x, in.InFlight), at: in.Now}, nil
}

// WatchChanges tells p of every change of the volumes, claims and classes in c, and of nodes
// that come, go or change their labels: each may change the plan or a check.
func WatchChanges(ctx context.Context, c cache.Informers, p *Plans) error {
	h := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { p.Changed() },
		UpdateFunc: func(any, any) { p.Changed() },
		DeleteFunc: func(any) { p.Changed() },
	}
	node := &metav1.PartialObjectMetadata{}
	node.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Node"))
	for _, obj := range []client.Object{&corev1.PersistentVolume{}, &corev1.PersistentVolumeClaim{}, &storagev1.StorageClass{}, node} {
		inf, err := c.GetInformer(ctx, obj)
		if err != nil {
			return fmt.Errorf("explain informer for %T: %w", obj, err)
		}
		if _, err := inf.AddEventHandler(h); err != nil {
			return fmt.Errorf("explain handler for %T: %w", obj, err)
		}
	}
	return nil
}
