package main

import (
	"context"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/procfs"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/pvguard/pvguard/test/admissionload"
)

// explainNamespace holds the explaining callers' ServiceAccounts; explainRole is the
// ClusterRole (and binding) that lets each of them list claims, volumes and classes everywhere.
const (
	explainNamespace = "pvguard-bench-explain"
	explainRole      = "pvguard-bench-explainer"
)

// explainOptions say how callers ask for explanations while the admission is measured again
// (-explainers, -explain-warm, -explain-retry-after).
type explainOptions struct {
	// callers ask concurrently, each with a ServiceAccount token of its own (0: none ask).
	callers int
	// warm is how long they ask before the admission reviews are measured again.
	warm time.Duration
	// retryAfter has them wait out a 429's Retry-After, as kubectl does; without it they ask
	// again at once.
	retryAfter bool
	// rest is how long pvguard is left at rest (its binder's resyncs and collections go on, no
	// caller asks) before they start: RSSRestPeak then covers a window as long as theirs, so
	// that the rise while they ask is measured against the top of pvguard's own cycle, not
	// against wherever in it the last sample before them fell.
	rest time.Duration
}

// explainLoad is the admission latency measured again while callers ask for explanations of
// pending claims in a loop, and what those callers were answered.
type explainLoad struct {
	// Callers ran concurrently, each with a ServiceAccount token of its own (so a per-caller
	// limit of its own), each sending its next GET as soon as the last was answered.
	Callers int `json:"callers"`
	// Claims is how many pending claims the callers took turns over.
	Claims int `json:"claims"`
	// Seconds the callers ran: a short warm-up (token and access reviews, first answers), then
	// the admission measurement.
	Seconds float64 `json:"seconds"`
	// OK (200), Limited (429) and Other answers (anything else, and transport errors).
	OK      uint64 `json:"ok"`
	Limited uint64 `json:"limited"`
	Other   uint64 `json:"other"`
	// InFlight were still unanswered when the callers stopped (not counted above).
	InFlight    uint64  `json:"in_flight"`
	OKPerS      float64 `json:"ok_per_s"`
	LimitedPerS float64 `json:"limited_per_s"`
	// ServerCPUSeconds is the CPU time pvguard serve used while the callers ran (user and
	// system, from /proc): ServerCPUSeconds/Seconds of the machine's cores.
	ServerCPUSeconds float64 `json:"server_cpu_seconds"`
	// PeakRSS and PeakHeapInuse are pvguard serve's while the callers ran (from the
	// sampler's one-a-second series).
	PeakRSS       uint64 `json:"peak_rss"`
	PeakHeapInuse uint64 `json:"peak_heap_inuse"`
	// OKp50ms and OKp99ms are the median and 99th percentile latency of the 200 answers
	// (client side, on the same machine: the server's and the loopback's).
	OKp50ms float64 `json:"ok_p50_ms"`
	OKp99ms float64 `json:"ok_p99_ms"`
	// ServerP50ms and ServerP99ms are the median and 99th percentile of the 200 answers server
	// side (pvguard_explain_request_duration_seconds, from before the caller's authentication to
	// the answer written), interpolated within the histogram's buckets as histogram_quantile does.
	ServerP50ms float64 `json:"server_p50_ms"`
	ServerP99ms float64 `json:"server_p99_ms"`
	// PlanWaitP99ms and TurnWaitP99ms are the 99th percentiles of what questions waited for
	// their plan of the pool and for their turn (pvguard_explain_wait_seconds).
	PlanWaitP99ms float64 `json:"plan_wait_p99_ms"`
	TurnWaitP99ms float64 `json:"turn_wait_p99_ms"`
	// MaxAnswerBytes is the largest 200 answer's body.
	MaxAnswerBytes uint64 `json:"max_answer_bytes"`
	// RSSBefore is pvguard serve's RSS in the last sample before the callers started.
	RSSBefore uint64 `json:"rss_before"`
	// RSSRestPeak is the highest RSS sampled from the steady-state sample to the callers'
	// start (the incremental audit, the admission measurement and -explain-rest ran in
	// between): what pvguard held at rest at the top of its collector's cycle, where RSSBefore
	// may fall anywhere in it.
	RSSRestPeak uint64 `json:"rss_rest_peak"`
	// FirstOther is the first unexpected answer, to say why.
	FirstOther string    `json:"first_other,omitempty"`
	Admission  []latency `json:"admission"`
	// Where the reviews' time went while they asked.
	reviewCauses
}

// explainerTokens creates the ServiceAccounts explainer-0..k-1, a ClusterRole that lists
// claims, volumes and classes and a binding of it to all of them, and returns a token of each
// from the TokenRequest API (as `kubectl create token` gets one). What exists already is kept.
func explainerTokens(ctx context.Context, cs kubernetes.Interface, k int) ([]string, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: explainNamespace}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating namespace %s: %w", explainNamespace, err)
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: explainRole}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"persistentvolumes", "persistentvolumeclaims"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{"storage.k8s.io"}, Resources: []string{"storageclasses"}, Verbs: []string{"get", "list"}},
	}}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating ClusterRole %s: %w", explainRole, err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: explainRole},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: explainRole}}
	for i := range k {
		binding.Subjects = append(binding.Subjects, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: explainNamespace, Name: fmt.Sprintf("explainer-%d", i)})
	}
	crbs := cs.RbacV1().ClusterRoleBindings()
	if _, err := crbs.Create(ctx, binding, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
		old, err := crbs.Get(ctx, explainRole, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("reading ClusterRoleBinding %s: %w", explainRole, err)
		}
		if len(old.Subjects) < k {
			old.Subjects = binding.Subjects
			if _, err := crbs.Update(ctx, old, metav1.UpdateOptions{}); err != nil {
				return nil, fmt.Errorf("updating ClusterRoleBinding %s: %w", explainRole, err)
			}
		}
	} else if err != nil {
		return nil, fmt.Errorf("creating ClusterRoleBinding %s: %w", explainRole, err)
	}
	seconds := int64(2 * time.Hour / time.Second)
	tokens := make([]string, k)
	for i := range k {
		name := fmt.Sprintf("explainer-%d", i)
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: explainNamespace, Name: name}}
		if _, err := cs.CoreV1().ServiceAccounts(explainNamespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("creating ServiceAccount %s/%s: %w", explainNamespace, name, err)
		}
		tr, err := cs.CoreV1().ServiceAccounts(explainNamespace).CreateToken(ctx, name,
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}}, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("requesting a token of %s/%s: %w", explainNamespace, name, err)
		}
		tokens[i] = tr.Status.Token
	}
	return tokens, nil
}

// pendingClaimPaths are the explain paths of the cluster's pending claims: the fill's and the
// fixture's.
func pendingClaimPaths(pairs int) []string {
	out := []string{"/api/v1/explain/pvc/" + fixtureNamespace + "/" + fixturePending}
	for i := range pairs {
		if shapeOf(i) == shapePending {
			p := specOf(i)
			out = append(out, "/api/v1/explain/pvc/"+p.namespace+"/"+p.claim)
		}
	}
	return out
}

// explainCounts is what the callers were answered.
type explainCounts struct {
	started, ok, limited, other atomic.Uint64
	maxBytes                    atomic.Uint64
	mu                          sync.Mutex
	okTimes                     []time.Duration
	firstOther                  string
}

func (e *explainCounts) note(status int, d time.Duration, why string) {
	switch status {
	case http.StatusOK:
		e.ok.Add(1)
		e.mu.Lock()
		e.okTimes = append(e.okTimes, d)
		e.mu.Unlock()
	case http.StatusTooManyRequests:
		e.limited.Add(1)
	default:
		e.other.Add(1)
		e.mu.Lock()
		if e.firstOther == "" {
			e.firstOther = why
		}
		e.mu.Unlock()
	}
}

// explainCaller GETs paths in turn, starting at offset, as token, until ctx ends; it does not
// wait out a 429 (a caller that ignores Retry-After is the load the limit is there for) unless
// retryAfter: then it waits as the answer says, as kubectl and client-go do.
func explainCaller(ctx context.Context, hc *http.Client, base, token string, paths []string, offset int, e *explainCounts, retryAfter bool) {
	for i := offset; ctx.Err() == nil; i++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+paths[i%len(paths)], nil)
		if err != nil {
			e.note(0, 0, err.Error())
			return
		}
		req.Header.Set("Authorization", "Bearer "+token)
		start := time.Now()
		e.started.Add(1)
		resp, err := hc.Do(req)
		if err != nil {
			if ctx.Err() != nil {
				return // cut off by the stop: counted in flight
			}
			e.note(0, 0, err.Error())
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		why := ""
		if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusTooManyRequests {
			why = fmt.Sprintf("HTTP %d: %.200s", resp.StatusCode, body)
		}
		e.note(resp.StatusCode, time.Since(start), why)
		if resp.StatusCode == http.StatusOK {
			for n := uint64(len(body)); ; {
				m := e.maxBytes.Load()
				if n <= m || e.maxBytes.CompareAndSwap(m, n) {
					break
				}
			}
		}
		if retryAfter && resp.StatusCode == http.StatusTooManyRequests {
			wait, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
			select {
			case <-ctx.Done():
			case <-time.After(time.Duration(max(wait, 1)) * time.Second):
			}
		}
	}
}

// measureUnderExplain starts c.explain.callers callers, each with its own token and HTTP/2
// connection, asking for explanations of the pending claims in a loop; after c.explain.warm it
// measures the admission reviews as measureReviews does, then stops the callers.
func measureUnderExplain(ctx context.Context, c modeConfig, srv *server, mem *sampler, pool *x509.CertPool, restFrom float64) (*explainLoad, error) {
	base, warm := srv.base, c.explain.warm
	tokens, err := explainerTokens(ctx, c.filler.cs, c.explain.callers)
	if err != nil {
		return nil, err
	}
	paths := pendingClaimPaths(c.pairs)
	load := &explainLoad{Callers: c.explain.callers, Claims: len(paths)}
	var counts explainCounts
	if c.explain.rest > 0 {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(c.explain.rest):
		}
	}
	before, err := srv.metrics(ctx)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	cpu0 := cpuSeconds(srv.pid)
	start := time.Now()
	t0 := start.Sub(srv.started).Seconds()
	for i, token := range tokens {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hc := admissionload.Client(pool)
			hc.Timeout = 10 * time.Minute // an explanation over a large cluster, on a busy machine, is slow
			explainCaller(cctx, hc, base, token, paths, i*len(paths)/len(tokens), &counts, c.explain.retryAfter)
		}()
	}
	stop := func() {
		cancel()
		wg.Wait()
		load.Seconds = time.Since(start).Seconds()
		load.ServerCPUSeconds = cpuSeconds(srv.pid) - cpu0
		for _, p := range mem.points() {
			if p.T < t0 {
				load.RSSBefore = p.RSS
			}
			if p.T >= restFrom && p.T < t0 {
				load.RSSRestPeak = max(load.RSSRestPeak, p.RSS)
			}
			if p.T >= t0 {
				load.PeakRSS, load.PeakHeapInuse = max(load.PeakRSS, p.RSS), max(load.PeakHeapInuse, p.HeapInuse)
			}
		}
	}
	select {
	case <-ctx.Done():
		stop()
		return nil, ctx.Err()
	case <-time.After(warm):
	}
	var profiled chan error // the CPU profile's fetch, running beside the reviews' measurement
	if c.serve.explainProfile != "" {
		profiled = make(chan error, 1)
		go func() { profiled <- srv.saveProfile(ctx, "profile?seconds=20", c.serve.explainProfile) }()
	}
	win, winErr := srv.openWindow(ctx)
	load.Admission, err = measureReviews(ctx, admissionload.Client(pool), base, c.cases, c.warmup, c.reviews, c.reviewRate)
	if winErr == nil {
		if causes, cerr := srv.closeWindow(ctx, win); cerr == nil {
			load.reviewCauses = causes
		}
	}
	if profiled != nil {
		said := c.serve.explainProfile
		if perr := <-profiled; perr != nil {
			said = perr.Error()
		}
		fmt.Fprintf(c.log, "[%d %s] explain CPU profile: %s\n", c.pairs, c.serve.mode, said)
	}
	stop()
	if err != nil {
		return nil, err
	}
	load.OK, load.Limited, load.Other = counts.ok.Load(), counts.limited.Load(), counts.other.Load()
	load.InFlight = counts.started.Load() - load.OK - load.Limited - load.Other
	load.OKPerS, load.LimitedPerS = float64(load.OK)/load.Seconds, float64(load.Limited)/load.Seconds
	load.FirstOther = counts.firstOther
	if len(counts.okTimes) > 0 {
		slices.Sort(counts.okTimes)
		load.OKp50ms = float64(admissionload.Quantile(counts.okTimes, 0.50).Microseconds()) / 1000
		load.OKp99ms = float64(admissionload.Quantile(counts.okTimes, 0.99).Microseconds()) / 1000
	}
	load.MaxAnswerBytes = counts.maxBytes.Load()
	if after, err := srv.metrics(ctx); err == nil {
		ms := func(name string, labels map[string]string, q float64) float64 {
			return 1000 * bucketQuantile(before.buckets(name, labels), after.buckets(name, labels), q)
		}
		ok := map[string]string{"code": "200"}
		load.ServerP50ms, load.ServerP99ms = ms(explainDurationMetric, ok, 0.50), ms(explainDurationMetric, ok, 0.99)
		load.PlanWaitP99ms = ms(explainWaitMetric, map[string]string{"for": "plan"}, 0.99)
		load.TurnWaitP99ms = ms(explainWaitMetric, map[string]string{"for": "turn"}, 0.99)
	}
	if load.OK == 0 && load.Other > 0 {
		return load, fmt.Errorf("%d explaining callers got no explanation (%d limited, %d other; first: %s)", load.Callers, load.Limited, load.Other, load.FirstOther)
	}
	return load, nil
}

// cpuSeconds is the CPU time (user and system) process pid has used, 0 if it cannot be read.
func cpuSeconds(pid int) float64 {
	proc, err := procfs.NewProc(pid)
	if err != nil {
		return 0
	}
	st, err := proc.Stat()
	if err != nil {
		return 0
	}
	return st.CPUTime()
}
