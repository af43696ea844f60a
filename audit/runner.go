package audit

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/clusterstate"
	"github.com/pvguard/pvguard/internal/cores"
	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/storage"
)

// RunnerOptions configure a Runner.
type RunnerOptions struct {
	// Interval between full audits (default one minute).
	Interval time.Duration
	// Cache lists the objects.
	Cache client.Reader
	// Live gives the view that the findings reporting an object as gone are confirmed on before
	// they are reported, every read live (clusterview's LiveView): one view per full audit, one
	// per object an incremental audit judges.
	Live func(ctx context.Context) policy.View
	// View, when set, is what incremental audits read related objects through: the informer
	// cache only, with its indexes (clusterview's CacheView), as a full audit reads the cache's
	// objects; a view that read live on a miss would make a request of every gone object an
	// audit looks up. Without it each incremental audit lists the cache.
	View   func(ctx context.Context) policy.View
	Engine func() *policy.Engine
	// Progress, when set, is told during a full audit how many of how many objects are done.
	Progress func(done, total int)
	// Seats are the process's seats for its long computations (internal/cores): every audit but
	// the first after Start computes on them, a full audit a block of objects at a time on each
	// goroutine, an incremental one an object at a time. The first full audit is spread over
	// every core: it is part of the start, and on one core fewer it would take about twice as
	// long. Nil: no bound.
	Seats    *cores.Seats
	Registry prometheus.Registerer
	Log      logr.Logger
	Now      func() time.Time
}

// result is what the last audit of one object found: its findings and, for a volume or a claim
// not bound, its dashboard row. The runner keeps one per object of the cluster between audits,
// so it holds only the object's key and two pointers: to the findings, which nearly every object
// has none of, and to the row's fields (row).
type result struct {
	key      clusterstate.Key
	findings *[]policy.Finding // nil for none
	row      *row              // volumes, and claims not bound
}

// found is the result's findings.
func (res result) found() []policy.Finding {
	if res.findings == nil {
		return nil
	}
	return *res.findings
}

// Runner audits the cluster: every object in full each interval, and between full audits the
// objects that changed, with their neighbours (a claim and the volumes that name it or that it
// names), as the informers report them.
type Runner struct {
	o       RunnerOptions
	wake    chan struct{}
	updated chan struct{}

	// firstDone is closed when the first full audit after Start has ended, done or failed.
	firstDone chan struct{}
	firstOnce sync.Once

	pending sync.Mutex
	full    bool
	dirty   map[clusterstate.Key]struct{}
	// beforeFull is true until a full audit takes the pending changes: every object reported
	// changed until then is in the cache that audit reads, so a change asks for it alone and is
	// not kept one by one (at a start, every object of the informers' first lists is reported).
	beforeFull bool
	// synced are the handlers' HasSynced (HandlersSynced), which the first full audit waits for.
	synced []func() bool

	mu sync.RWMutex
	// results has one result per object the audits have judged and found there. A full audit
	// leaves them in the order it audited the objects (sorting every key of the cluster would
	// take a tenth of its time), and incremental audits update them in one pass (update); the
	// rows sort them into report order (sorted), which incremental audits then keep, finding
	// their objects by binary search and merging in those that came.
	results []result
	sorted  bool
	// found, at and objects are the last audit's findings, when it ended and how many objects it
	// read; published once an audit has ended. Latest makes the report of them when asked for:
	// kept, its findings would be a second copy of found's.
	found     []policy.Finding
	at        time.Time
	objects   int
	published bool

	findings *prometheus.GaugeVec
	duration *prometheus.HistogramVec
	lastRun  prometheus.Gauge
}

// NewRunner builds a Runner; Start runs it.
func NewRunner(o RunnerOptions) *Runner {
	if o.Interval <= 0 {
		o.Interval = time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Registry == nil {
		o.Registry = prometheus.NewRegistry()
	}
	r := &Runner{
		o:          o,
		wake:       make(chan struct{}, 1),
		updated:    make(chan struct{}, 1),
		firstDone:  make(chan struct{}),
		dirty:      map[clusterstate.Key]struct{}{},
		beforeFull: true,
		findings: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "pvguard_audit_findings",
			Help: "Findings of the last audit, by rule and action."}, []string{"rule", "action"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "pvguard_audit_duration_seconds",
			Help:    "Time to audit: the whole cache (scope full) or the objects that changed (scope incremental).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 18)}, []string{"scope"}),
		lastRun: prometheus.NewGauge(prometheus.GaugeOpts{Name: "pvguard_audit_last_run_timestamp_seconds",
			Help: "When the last audit finished (Unix time)."}),
	}
	o.Registry.MustRegister(r.findings, r.duration, r.lastRun)
	return r
}

// NeedLeaderElection lets every replica audit, so each serves a current report.
func (r *Runner) NeedLeaderElection() bool { return false }

// Trigger asks for a full audit soon (requests are coalesced).
func (r *Runner) Trigger() {
	r.pending.Lock()
	r.full = true
	r.pending.Unlock()
	r.poke()
}

// Changed asks for the given objects (and their neighbours) to be audited again soon. It takes
// the old and new states of an update, so that a claimRef or volumeName that changed still
// leads to the object it used to name. A class or node change asks for a full audit: every
// claim and volume may depend on it.
func (r *Runner) Changed(objs ...any) {
	r.pending.Lock()
	if r.beforeFull {
		r.full = true
		r.pending.Unlock()
		r.poke()
		return
	}
	for _, obj := range objs {
		if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		switch o := obj.(type) {
		case *corev1.PersistentVolume:
			r.dirty[clusterstate.VolumeKey(o.Name)] = struct{}{}
			if ref := o.Spec.ClaimRef; storage.NamesAClaim(ref) {
				r.dirty[clusterstate.ClaimKey(ref.Namespace, ref.Name)] = struct{}{}
			}
		case *corev1.PersistentVolumeClaim:
			r.dirty[clusterstate.ClaimKey(o.Namespace, o.Name)] = struct{}{}
			if o.Spec.VolumeName != "" {
				r.dirty[clusterstate.VolumeKey(o.Spec.VolumeName)] = struct{}{}
			}
		default:
			r.full = true
		}
	}
	r.pending.Unlock()
	r.poke()
}

func (r *Runner) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// HandlersSynced adds a handler's HasSynced (its registration's): the first full audit waits, at
// most handlersBudget, until each reports that its handler was told of every object of its
// informer's first list. The cache reports synced once the informers hold those objects, while
// their handlers may still be being told of them: an object told after the first audit took the
// changes is audited again, one at a time, after the audit of the whole cluster that judged it,
// and at 100,000 pairs on two busy cores thousands can be. Call it before Start.
func (r *Runner) HandlersSynced(hasSynced func() bool) {
	r.pending.Lock()
	r.synced = append(r.synced, hasSynced)
	r.pending.Unlock()
}

// handlersBudget bounds the first full audit's wait for the handlers (HandlersSynced).
const handlersBudget = 10 * time.Second

// waitHandlers waits until every handler of HandlersSynced has synced, at most budget.
func (r *Runner) waitHandlers(ctx context.Context, budget time.Duration) {
	r.pending.Lock()
	synced := slices.Clone(r.synced)
	r.pending.Unlock()
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	// Polled often: the handlers are usually told of the last objects within a second of the
	// cache's sync, and the audit should start as soon as they are.
	_ = wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) {
		for _, s := range synced {
			if !s() {
				return false, nil
			}
		}
		return true, nil
	})
}

// FirstAudit is closed once the first full audit after Start has ended (done or failed).
func (r *Runner) FirstAudit() <-chan struct{} { return r.firstDone }

// Updated signals after each audit (coalesced: one pending signal at most).
func (r *Runner) Updated() <-chan struct{} { return r.updated }

// Start audits everything at once, then every interval, and the objects that changed as they
// change (batched for up to a second), until ctx ends.
func (r *Runner) Start(ctx context.Context) error {
	tick := time.NewTicker(r.o.Interval)
	defer tick.Stop()
	r.waitHandlers(ctx, handlersBudget)
	if err := r.RunOnce(ctx); err != nil && ctx.Err() == nil {
		r.o.Log.Error(err, "audit failed")
	}
	r.firstOnce.Do(func() { close(r.firstDone) })
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			r.Trigger()
			continue
		case <-r.wake:
		}
		select { // batch a burst of changes
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
		if err := r.RunPending(ctx); err != nil && ctx.Err() == nil {
			r.o.Log.Error(err, "audit failed")
		}
	}
}

// Beyond this many changed objects, and this share of the objects the audits hold, a full audit
// costs less than an incremental one: an incremental audit judges its objects one at a time
// through the view, a full audit over every core from one read of the cache. At 20,000 objects
// an incremental audit of a tenth of them takes as long as a full audit, and of all of them
// (an informer's relist, after its watch could not resume) three times as long
// (BenchmarkRunnerIncrementalAudit, docs/benchmarks.md "Audit").
const (
	fullAuditMinChanges = 1000
	fullAuditPercent    = 10
)

// RunPending audits what changed since the last audit: everything if a full audit was asked
// for or the changes reach a tenth of the cluster (fullAuditPercent), else the changed objects
// and their neighbours. Objects that could not be audited stay pending.
func (r *Runner) RunPending(ctx context.Context) error {
	full, dirty := r.takePending()
	if full || r.cheaperWhole(len(dirty)) {
		err := r.RunOnce(ctx)
		if err != nil {
			r.Trigger()
		}
		return err
	}
	if len(dirty) == 0 {
		return nil
	}
	err := r.runIncremental(ctx, dirty)
	if err != nil {
		r.restorePending(false, dirty)
	}
	return err
}

// cheaperWhole reports whether auditing changed objects one at a time would cost more than a full
// audit of the objects the audits hold.
func (r *Runner) cheaperWhole(changed int) bool {
	if changed < fullAuditMinChanges {
		return false
	}
	r.mu.RLock()
	held := len(r.results)
	r.mu.RUnlock()
	return changed*100 >= held*fullAuditPercent
}

// takePending takes the changes reported so far, leaving none pending.
func (r *Runner) takePending() (full bool, dirty map[clusterstate.Key]struct{}) {
	r.pending.Lock()
	defer r.pending.Unlock()
	return r.takePendingLocked()
}

// takeForFull is takePending for a full audit, after which changes are kept one by one again
// (beforeFull).
func (r *Runner) takeForFull() (full bool, dirty map[clusterstate.Key]struct{}) {
	r.pending.Lock()
	defer r.pending.Unlock()
	r.beforeFull = false
	return r.takePendingLocked()
}

// takePendingLocked is takePending with r.pending held.
func (r *Runner) takePendingLocked() (full bool, dirty map[clusterstate.Key]struct{}) {
	full, dirty = r.full, r.dirty
	r.full, r.dirty = false, map[clusterstate.Key]struct{}{}
	return full, dirty
}

// restorePending puts back changes taken by an audit that failed, and asks for an audit.
func (r *Runner) restorePending(full bool, dirty map[clusterstate.Key]struct{}) {
	r.pending.Lock()
	r.full = r.full || full
	for k := range dirty {
		r.dirty[k] = struct{}{}
	}
	r.pending.Unlock()
	r.poke()
}
