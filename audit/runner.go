package audit

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/clusterstate"
	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/storage"
)

// RunnerOptions configure a Runner.
type RunnerOptions struct {
	// Interval between full audits (default one minute).
	Interval time.Duration
	// Cache lists the objects; Live confirms an absence before it is reported.
	Cache, Live client.Reader
	// View, when set, is what incremental audits read related objects through (the admission
	// webhook's cache view, with its indexes); without it each incremental audit lists the cache.
	View   func(ctx context.Context) policy.View
	Engine func() *policy.Engine
	// Progress, when set, is told during a full audit how many of how many objects are done.
	Progress func(done, total int)
	Registry prometheus.Registerer
	Log      logr.Logger
	Now      func() time.Time
}

// judged is what the last audit of one object found.
type judged struct {
	findings []policy.Finding
	binding  *Binding      // volumes only
	pending  *PendingClaim // claims not bound only
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

	mu      sync.RWMutex
	objects map[clusterstate.Key]judged
	// order is objects' keys in report order, re-sorted only when a key comes or goes: an
	// incremental audit that changes one object's findings must not sort the whole cluster.
	order      []clusterstate.Key
	orderStale bool
	latest     Report
	found      []policy.Finding

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
		o:         o,
		wake:      make(chan struct{}, 1),
		updated:   make(chan struct{}, 1),
		firstDone: make(chan struct{}),
		dirty:     map[clusterstate.Key]struct{}{},
		objects:   map[clusterstate.Key]judged{},
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

// FirstAudit is closed once the first full audit after Start has ended (done or failed).
func (r *Runner) FirstAudit() <-chan struct{} { return r.firstDone }

// Updated signals after each audit (coalesced: one pending signal at most).
func (r *Runner) Updated() <-chan struct{} { return r.updated }

// Bindings returns the PV <-> PVC table of the last audit, in report order. It is built when
// asked for (the dashboard), not on every audit: an incremental audit of one object would
// otherwise copy the rows of every volume in the cluster.
func (r *Runner) Bindings() []Binding {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sortOrder()
	var out []Binding
	for _, k := range r.order {
		if j := r.objects[k]; j.binding != nil {
			out = append(out, *j.binding)
		}
	}
	return out
}

// Pending returns the claims the last audit found not bound, in report order (built when asked
// for, as Bindings).
func (r *Runner) Pending() []PendingClaim {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sortOrder()
	var out []PendingClaim
	for _, k := range r.order {
		if j := r.objects[k]; j.pending != nil {
			out = append(out, *j.pending)
		}
	}
	return out
}

// sortOrder brings r.order up to date with r.objects' keys; r.mu must be held for writing.
func (r *Runner) sortOrder() {
	if r.orderStale {
		r.order, r.orderStale = sortedKeys(r.objects), false
	}
}

// LatestFindings returns the last audit's findings, when it ran and how many objects it read.
func (r *Runner) LatestFindings() ([]policy.Finding, time.Time, int) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.found, r.latest.Time, r.latest.Summary.Objects
}

// Latest returns the last audit's report.
func (r *Runner) Latest() Report {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.latest
}

// Start audits everything at once, then every interval, and the objects that changed as they
// change (batched for up to a second), until ctx ends.
func (r *Runner) Start(ctx context.Context) error {
	tick := time.NewTicker(r.o.Interval)
	defer tick.Stop()
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

// RunPending audits what changed since the last audit: everything if a full audit was asked
// for, else the changed objects and their neighbours. Objects that could not be audited stay
// pending.
func (r *Runner) RunPending(ctx context.Context) error {
	full, dirty := r.takePending()
	if full {
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

// takePending takes the changes reported so far, leaving none pending.
func (r *Runner) takePending() (full bool, dirty map[clusterstate.Key]struct{}) {
	r.pending.Lock()
	defer r.pending.Unlock()
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

// RunOnce audits the whole cache now, with the one full audit (policy.Engine.AuditEach), the
// findings that report an object as gone confirmed live.
func (r *Runner) RunOnce(ctx context.Context) (err error) {
	start := time.Now()
	// The changes reported until now are in the cache this audit reads (an informer stores an
	// object before it tells its handlers), so this audit judges them all: taken now, they are
	// not audited again one by one. At a start that is every object of the informers' first
	// lists, which would otherwise make a second audit of the whole cluster right after the
	// first. Put back if the audit fails before its results are kept.
	full, dirty := r.takePending()
	kept := false
	defer func() {
		if !kept {
			r.restorePending(full, dirty)
		}
	}()
	st, err := r.state(ctx)
	if err != nil {
		return err
	}
	// The state's one index serves the audit and the bindings.
	// One live list of the nodes serves the whole audit's confirmations.
	live := liveView{ctx: ctx, c: r.o.Live, nodes: &nodeList{}}
	each, err := r.o.Engine().AuditEach(st, policy.AuditOptions{Now: r.o.Now(), Progress: r.o.Progress, Live: live})
	if err != nil {
		return err
	}
	keys, results, err := recordEach(each, st)
	if err != nil {
		return err
	}
	objects := make(map[clusterstate.Key]judged, len(each))
	var failed []error
	for i, oa := range each {
		objects[keys[i]] = results[i]
		if oa.Err != nil {
			failed = append(failed, oa.Err)
		}
	}
	r.mu.Lock()
	r.objects, r.orderStale = objects, true
	r.mu.Unlock()
	kept = true
	r.publish(start, "full")
	return errors.Join(failed...)
}

// recordEach is record of every audited object, spread over the cores as the audit is: on one
// core the volumes' binding rows took about as long as the rules on two. The first error in
// the objects' order is returned, as a loop over them would.
func recordEach(each []policy.ObjectAudit, st *clusterstate.State) ([]clusterstate.Key, []judged, error) {
	keys, results := make([]clusterstate.Key, len(each)), make([]judged, len(each))
	errs := make([]error, len(each))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), (len(each)+recordBlock-1)/recordBlock) {
		wg.Go(func() {
			for {
				start := int(next.Add(recordBlock)) - recordBlock
				if start >= len(each) {
					return
				}
				for i := start; i < min(start+recordBlock, len(each)); i++ {
					oa := each[i]
					if _, errs[i] = policy.SplitRuleErrors(oa.Err); errs[i] == nil {
						keys[i], results[i], errs[i] = record(oa.Object, oa.Findings, st)
					}
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, nil, err
		}
	}
	return keys, results, nil
}

// recordBlock is how many consecutive objects recordEach's goroutines take at a time.
const recordBlock = 1024

// runIncremental re-audits the changed objects and their neighbours two links out: a claim, the
// volumes it names or that name it, and the other claims of those volumes (whose double-binding
// and pair findings mention it).
func (r *Runner) runIncremental(ctx context.Context, dirty map[clusterstate.Key]struct{}) error {
	start := time.Now()
	v, err := r.view(ctx)
	if err != nil {
		return err
	}
	todo := make(map[clusterstate.Key]any, len(dirty))
	frontier := dirty
	for hop := 0; hop <= 2 && len(frontier) > 0; hop++ {
		next := map[clusterstate.Key]struct{}{}
		for k := range frontier {
			if _, done := todo[k]; done {
				continue
			}
			obj, neighbours, err := lookup(v, k)
			if err != nil {
				return err
			}
			todo[k] = obj
			for _, n := range neighbours {
				next[n] = struct{}{}
			}
		}
		frontier = next
	}
	results := make(map[clusterstate.Key]*judged, len(todo))
	var failed []error
	for k, obj := range todo {
		if obj == nil {
			results[k] = nil // gone
			continue
		}
		_, j, ruleErr, err := r.judge(ctx, obj, v)
		if err != nil {
			return err
		}
		results[k] = &j
		failed = append(failed, ruleErr)
	}
	r.mu.Lock()
	for k, j := range results {
		_, had := r.objects[k]
		if j == nil {
			delete(r.objects, k)
		} else {
			r.objects[k] = *j
		}
		if had != (j != nil) {
			r.orderStale = true
		}
	}
	r.mu.Unlock()
	r.publish(start, "incremental")
	return errors.Join(failed...)
}

// lookup reads one object through the view (nil when it is gone) and lists its neighbours.
func lookup(v policy.View, k clusterstate.Key) (any, []clusterstate.Key, error) {
	var out []clusterstate.Key
	switch k.Kind {
	case clusterstate.KindPersistentVolume:
		pv, err := v.PersistentVolume(k.Name)
		if err != nil {
			return nil, nil, fmt.Errorf("re-auditing volume %s: %w", k.Name, err)
		}
		claims, err := v.ClaimsNamingVolume(k.Name)
		if err != nil {
			return nil, nil, fmt.Errorf("re-auditing volume %s: %w", k.Name, err)
		}
		for _, c := range claims {
			out = append(out, clusterstate.ClaimKey(c.Namespace, c.Name))
		}
		if pv == nil {
			return nil, out, nil
		}
		// A claimRef without a name or namespace has no claim to look up (and the read would fail).
		if ref := pv.Spec.ClaimRef; storage.NamesAClaim(ref) {
			out = append(out, clusterstate.ClaimKey(ref.Namespace, ref.Name))
		}
		return pv, out, nil
	case clusterstate.KindPersistentVolumeClaim:
		pvc, err := v.PersistentVolumeClaim(k.Namespace, k.Name)
		if err != nil {
			return nil, nil, fmt.Errorf("re-auditing claim %s/%s: %w", k.Namespace, k.Name, err)
		}
		vols, err := v.VolumesClaiming(k.Namespace, k.Name)
		if err != nil {
			return nil, nil, fmt.Errorf("re-auditing claim %s/%s: %w", k.Namespace, k.Name, err)
		}
		for _, pv := range vols {
			out = append(out, clusterstate.VolumeKey(pv.Name))
		}
		if pvc == nil {
			return nil, out, nil
		}
		if pvc.Spec.VolumeName != "" {
			out = append(out, clusterstate.VolumeKey(pvc.Spec.VolumeName))
		}
		return pvc, out, nil
	}
	return nil, nil, fmt.Errorf("re-auditing %s %s: not a volume or claim", k.Kind, k.Name)
}

// judge audits one object, confirming absences live, and computes its binding row. When some
// rules could not judge the object, ruleErr says which and the result holds the findings of the
// rules that could, so one rule's failure does not hide the object's other findings; the caller
// keeps them and reports ruleErr. Any other failure is err, with no result.
func (r *Runner) judge(ctx context.Context, obj any, v policy.View) (k clusterstate.Key, j judged, ruleErr, err error) {
	engine, now := r.o.Engine(), r.o.Now()
	found, ruleErr := engine.AuditObject(obj, v, now)
	if _, err := policy.SplitRuleErrors(ruleErr); err != nil {
		return clusterstate.Key{}, judged{}, nil, err
	}
	if found, err = engine.Confirm(found, r.live(ctx), now); err != nil {
		return clusterstate.Key{}, judged{}, nil, err
	}
	if k, j, err = record(obj, found, v); err != nil {
		return clusterstate.Key{}, judged{}, nil, err
	}
	return k, j, ruleErr, nil
}

// record is an audited object's key and result: its findings and, for a volume, its binding row,
// for a claim not bound, its pending row.
func record(obj any, found []policy.Finding, v policy.View) (clusterstate.Key, judged, error) {
	j := judged{findings: found}
	var k clusterstate.Key
	switch o := obj.(type) {
	case *corev1.PersistentVolume:
		k = clusterstate.VolumeKey(o.Name)
		b, err := bindingOf(o, v)
		if err != nil {
			return clusterstate.Key{}, judged{}, err
		}
		j.binding = &b
	case *corev1.PersistentVolumeClaim:
		k = clusterstate.ClaimKey(o.Namespace, o.Name)
		if p, ok := pendingOf(o); ok {
			j.pending = &p
		}
	case *storagev1.StorageClass:
		k = clusterstate.ClassKey(o.Name)
	}
	return k, j, nil
}

// publish merges the per-object results into the report and the metrics (the bindings and the
// pending claims are built when asked for).
func (r *Runner) publish(start time.Time, scope string) {
	r.mu.Lock()
	// Only the objects with findings are put in report order: nearly every object has none, and
	// sorting every key of the cluster took most of a full audit's time after the rules'.
	// The rows' order (Bindings, Pending) is sorted when they are asked for.
	var keys []clusterstate.Key
	for k, j := range r.objects {
		if len(j.findings) > 0 {
			keys = append(keys, k)
		}
	}
	sortKeys(keys)
	perObject := make([][]policy.Finding, 0, len(keys))
	for _, k := range keys {
		perObject = append(perObject, r.objects[k].findings)
	}
	found := policy.Merge(perObject)
	report := NewReport(len(r.objects), found)
	report.Time = r.o.Now()
	r.latest, r.found = report, found
	r.mu.Unlock()
	select {
	case r.updated <- struct{}{}:
	default:
	}
	r.findings.Reset()
	for _, f := range found {
		r.findings.WithLabelValues(string(f.Rule), string(f.Action)).Inc()
	}
	r.duration.WithLabelValues(scope).Observe(time.Since(start).Seconds())
	r.lastRun.Set(float64(time.Now().Unix()))
}

// sortedKeys returns the keys in report order: by kind, namespace and name.
func sortedKeys(objects map[clusterstate.Key]judged) []clusterstate.Key {
	keys := make([]clusterstate.Key, 0, len(objects))
	for k := range objects {
		keys = append(keys, k)
	}
	sortKeys(keys)
	return keys
}

// sortKeys sorts keys in report order: by kind, namespace and name.
func sortKeys(keys []clusterstate.Key) {
	slices.SortFunc(keys, func(a, b clusterstate.Key) int {
		if c := cmp.Compare(policy.AuditOrder(a.Kind), policy.AuditOrder(b.Kind)); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
}

func (r *Runner) view(ctx context.Context) (policy.View, error) {
	if r.o.View != nil {
		return r.o.View(ctx), nil
	}
	st, err := r.state(ctx)
	if err != nil {
		return nil, err
	}
	return st, nil
}

// live is the view findings are confirmed on: reads past the cache, so that an informer that
// has not caught up does not make pvguard report a claim or volume as gone. Which findings need
// it, and what confirms them, each rule declares (policy.Rule.ConfirmLive).
func (r *Runner) live(ctx context.Context) policy.View { return liveView{ctx: ctx, c: r.o.Live} }

// state reads the cluster's state from the cache (clusterstate.Read), with the pods the rules
// read (clusterstate.ReadPods: the cache's own, stripped, or a live client's, stripped page by
// page).
func (r *Runner) state(ctx context.Context) (*clusterstate.State, error) {
	s, err := clusterstate.Read(ctx, r.o.Cache)
	if err != nil {
		return nil, fmt.Errorf("reading the cluster for the audit: %w", err)
	}
	pods, err := clusterstate.ReadPods(ctx, r.o.Cache)
	if err != nil {
		return nil, fmt.Errorf("reading the cluster for the audit: %w", err)
	}
	return s.WithPods(pods), nil
}
