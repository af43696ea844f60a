package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvguard/pvguard/binder"
	"github.com/pvguard/pvguard/test/admissionload"
)

// modeResult is everything measured of one `pvguard serve` in one binder mode over one cluster.
type modeResult struct {
	Pairs int    `json:"pairs"`
	Mode  string `json:"mode"`

	// ReadySeconds: process start -> /readyz 200.
	ReadySeconds float64 `json:"ready_seconds"`
	// FullAuditSeconds: the first full audit, as the server measured it
	// (pvguard_audit_duration_seconds{scope="full"} sum once its count is 1).
	FullAuditSeconds float64 `json:"full_audit_seconds"`
	// ReadyToAuditSeconds: /readyz 200 -> the first full audit seen in /metrics (polled every 100 ms).
	ReadyToAuditSeconds float64 `json:"ready_to_audit_seconds"`
	// ReadyCPUSeconds and AuditCPUSeconds: the CPU time (user and system) pvguard had used when
	// it was seen ready and when its first full audit was seen; unlike the wall times, what
	// other processes on the cores do changes them little.
	ReadyCPUSeconds float64 `json:"ready_cpu_seconds"`
	AuditCPUSeconds float64 `json:"audit_cpu_seconds"`
	// ReadyOthersCPUSeconds is the CPU time the machine's other processes (the apiserver, etcd,
	// the bench) used from pvguard's start until it was seen ready, and ReadyMachineBusy the
	// share of the machine's CPU that was busy meanwhile: a start slow on little CPU of its own
	// waited for the apiserver's lists, and this says whether the apiserver was busy or not.
	ReadyOthersCPUSeconds float64 `json:"ready_others_cpu_seconds"`
	ReadyMachineBusy      float64 `json:"ready_machine_busy"`
	// ReadyOthers names the other processes that used the most CPU meanwhile, with how much.
	ReadyOthers string `json:"ready_others"`
	// ReadyAPIRuntime is what the apiserver's Go runtime spent meanwhile, by its own metrics,
	// with its heap before the start.
	ReadyAPIRuntime *apiRuntime `json:"ready_apiserver_runtime,omitempty"`
	// AuditAPIRuntime is the same from pvguard's start until its first full audit was seen: a
	// collection still marking when pvguard was ready is counted only once it ends.
	AuditAPIRuntime *apiRuntime `json:"audit_apiserver_runtime,omitempty"`
	// StartupIncremental: the incremental audits that ran after the first full audit before
	// the server went quiet (the informers' initial adds mark every object changed).
	StartupIncrementalCount   uint64  `json:"startup_incremental_count"`
	StartupIncrementalSeconds float64 `json:"startup_incremental_seconds"`
	// IncrementalSeconds: the incremental audit(s) after one label change on one bound volume
	// (sum over the observations the change caused, usually one); wall from the patch to seen.
	IncrementalSeconds     float64 `json:"incremental_seconds"`
	IncrementalCount       uint64  `json:"incremental_count"`
	IncrementalWallSeconds float64 `json:"incremental_wall_seconds"`

	Admission []latency `json:"admission"`
	// Where the reviews' time went while they were measured.
	reviewCauses
	// Explain is the admission measured again while callers ask for explanations (-explainers).
	Explain *explainLoad `json:"explain,omitempty"`
	Plan    *planResult  `json:"plan,omitempty"`

	// Memory through the admission measurements (before the callers asking for explanations,
	// and before the binder's batch), the steady state
	// (after the startup audits and an idle period), and peaks over the whole life.
	Memory       memStats   `json:"memory"`
	Steady       memPoint   `json:"steady"`
	MemoryAll    memStats   `json:"memory_with_plan"`
	Series       []memPoint `json:"series"`
	Findings     float64    `json:"audit_findings"`
	BinderBinds  float64    `json:"binder_binds"`
	BinderErrors float64    `json:"binder_errors"`
}

// planResult is the binder's plan over a batch of pending claims.
type planResult struct {
	Claims  int `json:"claims"`
	Volumes int `json:"volumes"`
	// ExpectedPending: the batch plus the fill's and fixtures' pending claims of Immediate
	// classes (all a plan considers while nothing binds).
	ExpectedPending int     `json:"expected_pending"`
	CreateSeconds   float64 `json:"create_seconds"`
	// Plans that ran while the batch was being created and until one had seen all of it, and
	// their total time.
	PlansDuringCreate       uint64  `json:"plans_during_create"`
	PlanSecondsDuringCreate float64 `json:"plan_seconds_during_create"`
	// Triggered: each entry is one plan started by a label change on one batch claim after the
	// batch was complete: its duration is the histogram's sum delta over its count delta (more
	// than one plan may fall in a window when binds trigger plans too), with the pending-claims
	// gauge the plan set.
	Triggered []triggeredPlan `json:"triggered"`
	// FirstWhole is the first plan that saw the whole batch (it ended in the 200 ms before it
	// was seen; Plans counts the plans that ended then).
	FirstWhole    *triggeredPlan `json:"first_whole_batch_plan,omitempty"`
	MedianSeconds float64        `json:"median_seconds"`
	MaxSeconds    float64        `json:"max_seconds"`
	BindsDuring   float64        `json:"binds_during"`
	// MaxAtMost bounds the longest plan of the whole batch phase (creation and measured plans)
	// from above: the smallest histogram bucket that holds all of them (+Inf: more than the
	// largest finite bucket, 3.3 s).
	MaxAtMost string `json:"max_at_most_seconds"`
	// Note says why fewer than five plans were measured.
	Note           string  `json:"note,omitempty"`
	CleanupSeconds float64 `json:"cleanup_seconds"`
}

type triggeredPlan struct {
	Seconds float64 `json:"seconds"`
	Plans   uint64  `json:"plans"`
	Pending float64 `json:"pending"`
}

// modeConfig is what one mode's measurement needs from the run.
type modeConfig struct {
	serve       serveConfig
	filler      *filler
	cases       []reviewCase
	pairs       int
	pending     int
	fillPending int // pending claims of Immediate classes already in the cluster
	warmup      int
	reviews     int
	reviewRate  float64
	idle        time.Duration
	planBudget  time.Duration
	explain     explainOptions
	log         io.Writer
}

const (
	auditMetric = "pvguard_audit_duration_seconds"
	planMetric  = "pvguard_binder_plan_duration_seconds"

	explainDurationMetric = "pvguard_explain_request_duration_seconds"
	explainWaitMetric     = "pvguard_explain_wait_seconds"
)

// measureMode runs one child through the sequence: ready, first full audit, settle, idle
// (steady state), one change's incremental audit, admission latency, and in shadow and active
// modes the binder's plan over a batch of pending claims, which is deleted again afterwards.
func measureMode(ctx context.Context, c modeConfig) (r modeResult, err error) {
	r = modeResult{Pairs: c.pairs, Mode: string(c.serve.mode)}
	logf := func(format string, args ...any) {
		fmt.Fprintf(c.log, "[%d %s] %s\n", c.pairs, c.serve.mode, fmt.Sprintf(format, args...))
	}
	apiBefore, apiErr := readAPIRuntime(ctx, c.filler.cs)
	if apiErr != nil {
		logf("the apiserver's runtime not read: %v", apiErr)
	}
	// apiSpent is what the apiserver's runtime spent since pvguard's start, logged as said (nil
	// when it cannot be read).
	apiSpent := func(said string) *apiRuntime {
		if apiErr != nil {
			return nil
		}
		after, err := readAPIRuntime(ctx, c.filler.cs)
		if err != nil {
			logf("the apiserver's runtime not read: %v", err)
			return nil
		}
		spent := after.since(apiBefore)
		logf("%s: %s", said, spent)
		return &spent
	}
	srv, err := startServer(c.serve)
	if err != nil {
		return r, err
	}
	defer func() {
		if stopErr := srv.stop(); stopErr != nil && err == nil {
			err = stopErr
		}
	}()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	mem := &sampler{}
	go mem.run(sctx, srv)

	ready, err := srv.waitReady(ctx, 15*time.Minute)
	if err != nil {
		return r, err
	}
	readyAt := time.Now()
	r.ReadySeconds = ready.Seconds()
	r.ReadyCPUSeconds = srv.cpuSeconds()
	if busy, all := machineCPU(); all > srv.startAll {
		r.ReadyOthersCPUSeconds = busy - srv.startBusy - r.ReadyCPUSeconds
		r.ReadyMachineBusy = (busy - srv.startBusy) / (all - srv.startAll)
	}
	r.ReadyOthers = busiest(srv.startProcs, readProcessCPU(), srv.pid, 3)
	logf("ready after %.2f s (%.2f s of CPU; the machine's other processes %.2f s of CPU meanwhile, the machine %.0f%% busy; the busiest: %s)",
		r.ReadySeconds, r.ReadyCPUSeconds, r.ReadyOthersCPUSeconds, r.ReadyMachineBusy*100, r.ReadyOthers)
	r.ReadyAPIRuntime = apiSpent("the apiserver meanwhile")

	full, err := waitObservations(ctx, srv, auditMetric, map[string]string{"scope": "full"}, 0, 15*time.Minute)
	if err != nil {
		return r, fmt.Errorf("waiting for the first full audit: %w", err)
	}
	r.FullAuditSeconds, r.ReadyToAuditSeconds = full.sum, time.Since(readyAt).Seconds()
	r.AuditCPUSeconds = srv.cpuSeconds()
	logf("first full audit %.2f s (seen %.2f s after ready; %.2f s of CPU since the start)", r.FullAuditSeconds, r.ReadyToAuditSeconds, r.AuditCPUSeconds)
	r.AuditAPIRuntime = apiSpent("the apiserver from the start to then")
	if c.serve.cpuProfile != "" {
		if err := srv.stopProfile(); err != nil {
			return r, err
		}
		logf("CPU profile from the start to the first full audit: %s", c.serve.cpuProfile)
	}

	startup, err := settle(ctx, srv, 3*time.Second, 15*time.Minute)
	if err != nil {
		return r, err
	}
	r.StartupIncrementalCount, r.StartupIncrementalSeconds = startup.count, startup.sum
	logf("startup incremental audits: %d, %.2f s", startup.count, startup.sum)

	select {
	case <-ctx.Done():
		return r, ctx.Err()
	case <-time.After(c.idle):
	}
	r.Steady = mem.snapshot().Last
	logf("steady: RSS %s, heap in use %s", mib(r.Steady.RSS), mib(r.Steady.HeapInuse))
	if c.serve.heapProfile != "" {
		if err := srv.saveHeapProfile(ctx, c.serve.heapProfile); err != nil {
			return r, err
		}
		logf("heap profile: %s", c.serve.heapProfile)
	}

	if err := incrementalAfterChange(ctx, c, srv, &r); err != nil {
		return r, err
	}
	logf("incremental audit after one change: %.1f ms (%d observations, seen after %.0f ms)", r.IncrementalSeconds*1000, r.IncrementalCount, r.IncrementalWallSeconds*1000)

	pool, err := srv.caPool()
	if err != nil {
		return r, err
	}
	win, err := srv.openWindow(ctx)
	if err != nil {
		return r, err
	}
	if r.Admission, err = measureReviews(ctx, admissionload.Client(pool), srv.base, c.cases, c.warmup, c.reviews, c.reviewRate); err != nil {
		return r, err
	}
	for _, l := range r.Admission {
		logf("admission %s: p50 %.2f ms, p99 %.2f ms%s", l.Case, l.P50ms, l.P99ms, l.lateSaid())
	}
	if causes, err := srv.closeWindow(ctx, win); err == nil {
		r.reviewCauses = causes
		logf("admission, where the time went: %s", causes)
	}
	r.Memory = mem.snapshot()
	if c.explain.callers > 0 {
		r.Explain, err = measureUnderExplain(ctx, c, srv, mem, pool, r.Steady.T)
		if e := r.Explain; e != nil {
			logf("%d explaining callers over %d pending claims for %.1f s: %d explanations (%.1f/s, p50 %.1f ms), %d limited (%.0f/s), %d other, %d in flight at stop; pvguard used %.1f cores",
				e.Callers, e.Claims, e.Seconds, e.OK, e.OKPerS, e.OKp50ms, e.Limited, e.LimitedPerS, e.Other, e.InFlight, e.ServerCPUSeconds/e.Seconds)
			logf("while they ran: peak RSS %s, peak heap in use %s (1 s samples); before: last sample %s, highest since the steady sample %s; rise %+.1f%% over the last sample, %+.1f%% over the highest",
				mib(e.PeakRSS), mib(e.PeakHeapInuse), mib(e.RSSBefore), mib(e.RSSRestPeak), rise(e.PeakRSS, e.RSSBefore), rise(e.PeakRSS, e.RSSRestPeak))
			for _, l := range e.Admission {
				logf("admission %s with explaining callers: p50 %.2f ms, p99 %.2f ms%s", l.Case, l.P50ms, l.P99ms, l.lateSaid())
			}
			logf("admission with explaining callers, where the time went: %s", e.reviewCauses)
		}
		if err != nil {
			return r, err
		}
	}

	var batch planBatch
	if c.serve.mode != binder.ModeOff && c.pending > 0 {
		r.Plan, batch, err = measurePlan(ctx, c, srv, logf)
		if err != nil {
			return r, err
		}
	}
	m, err := srv.metrics(ctx)
	if err != nil {
		return r, err
	}
	r.Findings = m.value("pvguard_audit_findings", nil)
	r.BinderBinds, r.BinderErrors = m.value("pvguard_binder_binds_total", nil), m.value("pvguard_binder_errors_total", nil)
	r.MemoryAll, r.Series = mem.snapshot(), mem.points()
	if err := srv.stop(); err != nil {
		return r, err
	}
	if len(batch.claims)+len(batch.volumes) > 0 {
		start := time.Now()
		if err := c.filler.deletePlanBatch(ctx, batch); err != nil {
			return r, err
		}
		r.Plan.CleanupSeconds = time.Since(start).Seconds()
	}
	return r, nil
}

// observed is a histogram's sum and count at one scrape.
type observed struct {
	sum   float64
	count uint64
}

// errNotSeen is waitObservations' timeout.
var errNotSeen = errors.New("no new observation")

// waitObservations polls /metrics every 100 ms until the histogram's count exceeds after.
func waitObservations(ctx context.Context, srv *server, name string, labels map[string]string, after uint64, timeout time.Duration) (observed, error) {
	deadline := time.Now().Add(timeout)
	for {
		if err := srv.alive(); err != nil {
			return observed{}, err
		}
		m, err := srv.metrics(ctx)
		if err != nil {
			return observed{}, err
		}
		if sum, count := m.histogram(name, labels); count > after {
			return observed{sum, count}, nil
		}
		if time.Now().After(deadline) {
			return observed{}, fmt.Errorf("%w of %s%v within %s", errNotSeen, name, labels, timeout)
		}
		select {
		case <-ctx.Done():
			return observed{}, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// settle waits until no audit has run for quiet and returns the incremental audits seen until
// then (all of them: none runs before the first full audit).
func settle(ctx context.Context, srv *server, quiet, timeout time.Duration) (observed, error) {
	deadline := time.Now().Add(timeout)
	var last uint64
	lastChange := time.Now()
	for {
		m, err := srv.metrics(ctx)
		if err != nil {
			return observed{}, err
		}
		sum, count := m.histogram(auditMetric, map[string]string{"scope": "incremental"})
		_, full := m.histogram(auditMetric, map[string]string{"scope": "full"})
		if total := count + full; total != last {
			last, lastChange = total, time.Now()
		}
		if time.Since(lastChange) >= quiet {
			return observed{sum, count}, nil
		}
		if time.Now().After(deadline) {
			return observed{}, fmt.Errorf("audits still running after %s", timeout)
		}
		select {
		case <-ctx.Done():
			return observed{}, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// incrementalAfterChange labels one bound volume and times the incremental audit it causes.
func incrementalAfterChange(ctx context.Context, c modeConfig, srv *server, r *modeResult) error {
	incr := map[string]string{"scope": "incremental"}
	m, err := srv.metrics(ctx)
	if err != nil {
		return err
	}
	sum0, count0 := m.histogram(auditMetric, incr)
	claim, err := c.filler.cs.CoreV1().PersistentVolumeClaims(fixtureNamespace).Get(ctx, fixtureBound, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading claim %s: %w", fixtureBound, err)
	}
	patch := fmt.Appendf(nil, `{"metadata":{"labels":{"scale.pvguard.io/touched":"%s-%d"}}}`, c.serve.mode, time.Now().UnixNano())
	start := time.Now()
	if _, err := c.filler.cs.CoreV1().PersistentVolumes().Patch(ctx, claim.Spec.VolumeName, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "kubectl-label"}); err != nil {
		return fmt.Errorf("labelling volume %s: %w", claim.Spec.VolumeName, err)
	}
	got, err := waitObservations(ctx, srv, auditMetric, incr, count0, 2*time.Minute)
	if err != nil {
		return fmt.Errorf("waiting for the incremental audit: %w", err)
	}
	r.IncrementalWallSeconds = time.Since(start).Seconds()
	r.IncrementalSeconds, r.IncrementalCount = got.sum-sum0, got.count-count0
	return nil
}

// measurePlan creates the binder's batch and times plans over it. Every plan considers every
// pending claim of an Immediate class against every volume of its class, so once the batch
// exists each plan is one measurement of "plan N pending claims"; the plans are started by a
// label change on a batch claim, one at a time.
func measurePlan(ctx context.Context, c modeConfig, srv *server, logf func(string, ...any)) (*planResult, planBatch, error) {
	p := &planResult{Claims: c.pending, Volumes: c.pending / 2, ExpectedPending: c.pending + c.fillPending}
	m, err := srv.metrics(ctx)
	if err != nil {
		return nil, planBatch{}, err
	}
	sum0, count0 := m.histogram(planMetric, nil)
	binds0 := m.value("pvguard_binder_binds_total", nil)
	buckets0 := m.buckets(planMetric, nil)
	// From before the batch exists, watch for the first plan that sees all of it (its pending
	// gauge, plus the claims bound since, reaches the batch and the fill's pending claims).
	type wholeResult struct {
		plan *triggeredPlan
		err  error
	}
	whole := make(chan wholeResult, 1)
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	go func() {
		t, err := waitWholeBatch(wctx, srv, float64(p.ExpectedPending), binds0)
		whole <- wholeResult{t, err}
	}()
	start := time.Now()
	batch, err := c.filler.createPlanBatch(ctx, c.pending)
	if err != nil {
		return nil, batch, fmt.Errorf("creating the binder's batch: %w", err)
	}
	p.CreateSeconds = time.Since(start).Seconds()
	select {
	case w := <-whole:
		if w.err != nil {
			return nil, batch, w.err
		}
		p.FirstWhole = w.plan
	case <-time.After(c.planBudget):
		wcancel()
		p.Note = fmt.Sprintf("no plan saw the whole batch within %s; ", c.planBudget)
	}
	if f := p.FirstWhole; f != nil {
		logf("first plan that saw the whole batch: %.0f ms over %.0f pending claims (%d plans ended in that scrape's 200 ms)", f.Seconds*1000, f.Pending, f.Plans)
	}
	// Then let the plans still queued end: the measured plans all start after the batch is
	// complete in the binder's cache.
	if _, err := quietPlans(ctx, srv, 2*time.Second, c.planBudget); err != nil {
		return nil, batch, err
	}
	if m, err = srv.metrics(ctx); err != nil {
		return nil, batch, err
	}
	sum1, count1 := m.histogram(planMetric, nil)
	p.PlansDuringCreate, p.PlanSecondsDuringCreate = count1-count0, sum1-sum0
	logf("batch of %d claims and %d volumes created in %.1f s; %d plans ran until one had seen it all (%.2f s in all)",
		p.Claims, p.Volumes, p.CreateSeconds, p.PlansDuringCreate, p.PlanSecondsDuringCreate)

	touched := batch.claims[0]
	var durations []float64
	// In active mode the plan key waits in the binder's queue behind the claims the last plan
	// enqueued, whose binds go at the client's rate: plans come seldom, hence the budget.
	budget := time.Now().Add(c.planBudget)
	for k := 0; k < 5 && time.Now().Before(budget); k++ {
		m, err := srv.metrics(ctx)
		if err != nil {
			return nil, batch, err
		}
		sa, ca := m.histogram(planMetric, nil)
		patch := fmt.Appendf(nil, `{"metadata":{"labels":{"scale.pvguard.io/touched":"%d"}}}`, k)
		if _, err := c.filler.cs.CoreV1().PersistentVolumeClaims(touched.Namespace).Patch(ctx, touched.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "kubectl-label"}); err != nil {
			return nil, batch, fmt.Errorf("labelling claim %s: %w", touched, err)
		}
		got, err := waitObservations(ctx, srv, planMetric, nil, ca, time.Until(budget))
		if errors.Is(err, errNotSeen) {
			p.Note += fmt.Sprintf("no plan ended within the %s budget after %d measured", c.planBudget, k)
			break
		}
		if err != nil {
			return nil, batch, fmt.Errorf("waiting for a plan: %w", err)
		}
		// A plan that started before the scrape may end after it: wait until plans are
		// quiet again so the window holds whole plans only.
		end, err := quietPlans(ctx, srv, 500*time.Millisecond, 10*time.Second)
		if err != nil {
			return nil, batch, err
		}
		if end.count < got.count {
			end = got
		}
		t := triggeredPlan{Plans: end.count - ca, Seconds: (end.sum - sa) / float64(end.count-ca)}
		if m, err = srv.metrics(ctx); err == nil {
			t.Pending = m.value("pvguard_binder_pending_claims", nil)
		}
		p.Triggered = append(p.Triggered, t)
		durations = append(durations, t.Seconds)
	}
	if m, err = srv.metrics(ctx); err == nil {
		p.BindsDuring = m.value("pvguard_binder_binds_total", nil) - binds0
		p.MaxAtMost = strconv.FormatFloat(maxUpperBound(buckets0, m.buckets(planMetric, nil)), 'g', -1, 64)
	}
	if len(durations) == 0 {
		logf("no plan measured: %s; %.0f binds during the batch", p.Note, p.BindsDuring)
		return p, batch, nil
	}
	slices.Sort(durations)
	p.MedianSeconds, p.MaxSeconds = durations[len(durations)/2], durations[len(durations)-1]
	logf("plan over %.0f pending claims: median %.0f ms, max %.0f ms (%d triggered); %.0f binds during the batch",
		p.Triggered[len(p.Triggered)-1].Pending, p.MedianSeconds*1000, p.MaxSeconds*1000, len(p.Triggered), p.BindsDuring)
	return p, batch, nil
}

// waitWholeBatch polls /metrics every 200 ms until the last plan considered at least want
// pending claims, counting the claims bound since binds0 as considered (an active binder binds
// the batch as it plans), and returns the plans that ended between the two last scrapes: the
// first plan of the whole batch.
func waitWholeBatch(ctx context.Context, srv *server, want, binds0 float64) (*triggeredPlan, error) {
	var prev *observed
	for {
		m, err := srv.metrics(ctx)
		if err != nil {
			return nil, err
		}
		sum, count := m.histogram(planMetric, nil)
		pending := m.value("pvguard_binder_pending_claims", nil)
		if pending+m.value("pvguard_binder_binds_total", nil)-binds0 >= want {
			t := &triggeredPlan{Pending: pending}
			if prev != nil && count > prev.count {
				t.Plans, t.Seconds = count-prev.count, (sum-prev.sum)/float64(count-prev.count)
			}
			return t, nil
		}
		prev = &observed{sum, count}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// quietPlans waits until no plan has ended for quiet (or timeout passes: in active mode binds
// keep starting plans) and returns the plan histogram then.
func quietPlans(ctx context.Context, srv *server, quiet, timeout time.Duration) (observed, error) {
	deadline := time.Now().Add(timeout)
	var last observed
	lastChange := time.Now()
	for {
		m, err := srv.metrics(ctx)
		if err != nil {
			return observed{}, err
		}
		sum, count := m.histogram(planMetric, nil)
		if count != last.count {
			last, lastChange = observed{sum, count}, time.Now()
		}
		if time.Since(lastChange) >= quiet || time.Now().After(deadline) {
			return last, nil
		}
		select {
		case <-ctx.Done():
			return observed{}, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func mib(b uint64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

// maxUpperBound is the smallest bucket bound that holds every observation made between two
// scrapes of a histogram's buckets (0 when none was made).
func maxUpperBound(before, after []bucket) float64 {
	if len(after) == 0 {
		return 0
	}
	delta := func(i int) uint64 {
		if i < len(before) {
			return after[i].Count - before[i].Count
		}
		return after[i].Count
	}
	total := delta(len(after) - 1)
	if total == 0 {
		return 0
	}
	for i := range after {
		if delta(i) == total {
			return after[i].UpperBound
		}
	}
	return math.Inf(1)
}

// bucketQuantile is the q-quantile of what a histogram observed between two reads of its
// cumulative buckets, interpolated linearly within the bucket it falls in (as Prometheus's
// histogram_quantile does; the highest finite bound when it falls in +Inf); 0 when nothing was
// observed.
func bucketQuantile(before, after []bucket, q float64) float64 {
	if len(after) == 0 {
		return 0
	}
	delta := func(i int) float64 {
		if i < len(before) {
			return float64(after[i].Count - before[i].Count)
		}
		return float64(after[i].Count)
	}
	total := delta(len(after) - 1)
	if total == 0 {
		return 0
	}
	rank := q * total
	lower, below := 0.0, 0.0
	for i, b := range after {
		n := delta(i)
		if n >= rank {
			if math.IsInf(b.UpperBound, 1) {
				return lower
			}
			if n == below {
				return b.UpperBound
			}
			return lower + (b.UpperBound-lower)*(rank-below)/(n-below)
		}
		lower, below = b.UpperBound, n
	}
	return lower
}

// rise is how much larger peak is than base, in percent (0 without a base).
func rise(peak, base uint64) float64 {
	if base == 0 {
		return 0
	}
	return 100 * (float64(peak) - float64(base)) / float64(base)
}
