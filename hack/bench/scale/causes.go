package main

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"math"
	"os"
	gometrics "runtime/metrics"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/procfs"
	"k8s.io/client-go/kubernetes"
)

// The histograms a window of reviews reads: pvguard's decision of one review, its whole request
// (body read, fair queue, decision, answer written) and how long its goroutines waited for a
// core of its own (the Go scheduler's latency).
const (
	admissionDurationMetric = "pvguard_admission_review_duration_seconds"
	admissionRequestMetric  = "pvguard_admission_request_duration_seconds"
	schedLatencyMetric      = "go_sched_latencies_seconds"
)

// slowBound is where a review counts as slow: 10 ms, a bound of both of pvguard's review
// histograms. The scheduler's histogram has its own bounds; the first at or above it is used
// (ReviewCauses.SchedBound says which).
const slowBound = 0.01

// reviewCauses says where the time of the reviews measured in one window went: which of them
// pvguard took over 10 ms to decide and to answer whole, server side; how often its goroutines
// waited that long for one of its cores (GOMAXPROCS); how long its threads, and the bench's own,
// waited for one of the machine's CPUs (the kernel's run-queue delay, /proc/PID/task/*/schedstat);
// and how busy the machine's CPUs were. A review slow client side and fast whole server side was
// slow on its way (the bench's own wait, the connection); one slow whole and fast to decide waited
// in pvguard (a core, the fair queue, the body).
type reviewCauses struct {
	// AdmissionSlow of AdmissionServed reviews (the warm-up's with them) took pvguard longer
	// than 10 ms to decide, RequestsSlow to answer whole.
	AdmissionSlow   uint64 `json:"admission_slow"`
	AdmissionServed uint64 `json:"admission_served"`
	RequestsSlow    uint64 `json:"admission_requests_slow"`
	// RequestsP99 is the p99 of the window's whole requests server side, as the bound of the
	// histogram's bucket it falls in (seconds): pvguard's part of the reviews' tail, beside the
	// client's p99s, which also hold the apiserver's and the machine's part.
	RequestsP99 float64 `json:"admission_requests_p99"`
	// SchedSlow of SchedAll times a goroutine of pvguard was made runnable it waited longer than
	// SchedBound seconds to run.
	SchedSlow  uint64  `json:"sched_slow"`
	SchedAll   uint64  `json:"sched_all"`
	SchedBound float64 `json:"sched_bound"`
	// BenchSchedSlow of BenchSchedAll times a goroutine of the bench itself (the reviews' timer
	// among them) was made runnable it waited at least BenchSchedBound seconds for one of the
	// bench's Ps: the client's own part of a slow review when the callers' goroutines hold them.
	BenchSchedSlow  uint64  `json:"bench_sched_slow"`
	BenchSchedAll   uint64  `json:"bench_sched_all"`
	BenchSchedBound float64 `json:"bench_sched_bound"`
	// ServerRunDelaySeconds and BenchRunDelaySeconds are the time pvguard's threads and the
	// bench's spent runnable, waiting for a CPU, over WindowSeconds; MachineBusy is the share of
	// the machine's CPU time that was not idle.
	ServerRunDelaySeconds float64 `json:"server_run_delay_seconds"`
	BenchRunDelaySeconds  float64 `json:"bench_run_delay_seconds"`
	MachineBusy           float64 `json:"machine_busy"`
	WindowSeconds         float64 `json:"window_seconds"`
}

func (c reviewCauses) String() string {
	return fmt.Sprintf("%d of %d reviews over 10 ms to decide, %d to answer whole, p99 whole at most %.2f ms; %d of %d goroutine wakes waited over %.1f ms for a core; "+
		"the bench's %d of %d over %.1f ms; run-queue wait over %.1f s: pvguard %.0f ms, the bench %.0f ms; machine %.0f%% busy",
		c.AdmissionSlow, c.AdmissionServed, c.RequestsSlow, c.RequestsP99*1000, c.SchedSlow, c.SchedAll, c.SchedBound*1000,
		c.BenchSchedSlow, c.BenchSchedAll, c.BenchSchedBound*1000, c.WindowSeconds, c.ServerRunDelaySeconds*1000, c.BenchRunDelaySeconds*1000, c.MachineBusy*100)
}

// reviewWindow is what a window of reviews starts from.
type reviewWindow struct {
	at                      time.Time
	scrape                  metrics
	serverDelay, benchDelay time.Duration
	busy, all               float64
	benchSched              *gometrics.Float64Histogram
}

// openWindow reads pvguard's metrics and the counters the window's causes are the rise of.
func (s *server) openWindow(ctx context.Context) (reviewWindow, error) {
	m, err := s.metrics(ctx)
	if err != nil {
		return reviewWindow{}, err
	}
	w := reviewWindow{at: time.Now(), scrape: m, serverDelay: runDelay(s.pid), benchDelay: runDelay(os.Getpid()), benchSched: benchSchedLatencies()}
	w.busy, w.all = machineCPU()
	return w, nil
}

// closeWindow reads them again and returns what rose in between.
func (s *server) closeWindow(ctx context.Context, w reviewWindow) (reviewCauses, error) {
	m, err := s.metrics(ctx)
	if err != nil {
		return reviewCauses{}, err
	}
	busy, all := machineCPU()
	c := reviewCauses{WindowSeconds: time.Since(w.at).Seconds(),
		ServerRunDelaySeconds: (runDelay(s.pid) - w.serverDelay).Seconds(),
		BenchRunDelaySeconds:  (runDelay(os.Getpid()) - w.benchDelay).Seconds()}
	if all > w.all {
		c.MachineBusy = (busy - w.busy) / (all - w.all)
	}
	c.AdmissionSlow, c.AdmissionServed, _ = over(w.scrape, m, admissionDurationMetric, slowBound)
	c.RequestsSlow, _, _ = over(w.scrape, m, admissionRequestMetric, slowBound)
	c.RequestsP99 = quantileBound(w.scrape, m, admissionRequestMetric, 0.99)
	c.SchedSlow, c.SchedAll, c.SchedBound = over(w.scrape, m, schedLatencyMetric, slowBound)
	c.BenchSchedSlow, c.BenchSchedAll, c.BenchSchedBound = histogramOver(w.benchSched, benchSchedLatencies(), slowBound)
	return c, nil
}

// benchSchedLatencies is the bench's own scheduler latency histogram so far (runtime/metrics).
func benchSchedLatencies() *gometrics.Float64Histogram {
	s := []gometrics.Sample{{Name: "/sched/latencies:seconds"}}
	gometrics.Read(s)
	if s[0].Value.Kind() != gometrics.KindFloat64Histogram {
		return nil
	}
	return s[0].Value.Float64Histogram()
}

// histogramOver counts the observations of a runtime/metrics histogram between before and after,
// and those of them in buckets whose lower bound is at or above the first bucket boundary at or
// above le (returned): a count that never overstates the slow ones.
func histogramOver(before, after *gometrics.Float64Histogram, le float64) (slow, all uint64, bound float64) {
	if before == nil || after == nil || len(before.Counts) != len(after.Counts) {
		return 0, 0, le
	}
	bound = math.Inf(1)
	for i, n := range after.Counts {
		d := n - before.Counts[i]
		all += d
		if lower := after.Buckets[i]; lower >= le {
			bound = min(bound, lower)
			slow += d
		}
	}
	return slow, all, bound
}

// over counts the observations of histogram name between the scrapes before and after, and
// those of them above the first bound at or above le (returned).
func over(before, after metrics, name string, le float64) (slow, all uint64, bound float64) {
	b, a := before.buckets(name, nil), after.buckets(name, nil)
	count := func(bs []bucket, le float64) (uint64, float64) {
		for _, x := range bs {
			if x.UpperBound >= le {
				return x.Count, x.UpperBound
			}
		}
		return 0, math.Inf(1)
	}
	inf := math.Inf(1)
	allAfter, _ := count(a, inf)
	allBefore, _ := count(b, inf)
	fastAfter, bound := count(a, le)
	fastBefore, _ := count(b, le)
	all = allAfter - allBefore
	return all - (fastAfter - fastBefore), all, bound
}

// quantileBound is the bound of the bucket of histogram name that its q quantile fell in between
// the scrapes before and after: the least bound at or below which at least q of the observations
// fell (+Inf when only the last bucket holds it, 0 without observations).
func quantileBound(before, after metrics, name string, q float64) float64 {
	b, a := before.buckets(name, nil), after.buckets(name, nil)
	earlier := map[float64]uint64{}
	for _, x := range b {
		earlier[x.UpperBound] = x.Count
	}
	var all uint64
	for _, x := range a {
		if math.IsInf(x.UpperBound, 1) {
			all = x.Count - earlier[x.UpperBound]
		}
	}
	if all == 0 {
		return 0
	}
	for _, x := range a { // cumulative, in increasing bounds
		if float64(x.Count-earlier[x.UpperBound]) >= q*float64(all) {
			return x.UpperBound
		}
	}
	return math.Inf(1)
}

// runDelay is the time the threads of process pid have spent runnable, waiting for a CPU (the
// second field of each thread's schedstat); 0 when it cannot be read. A thread that ended takes
// its share with it, which for a Go process (threads are kept) is little.
func runDelay(pid int) time.Duration {
	threads, err := procfs.AllThreads(pid)
	if err != nil {
		return 0
	}
	var d time.Duration
	for _, t := range threads {
		if st, err := t.Schedstat(); err == nil {
			d += time.Duration(st.WaitingNanoseconds)
		}
	}
	return d
}

// machineCPU is the machine's CPU time so far: busy (neither idle nor waiting for I/O) and all,
// in seconds; zeros when /proc/stat cannot be read.
func machineCPU() (busy, all float64) {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return 0, 0
	}
	st, err := fs.Stat()
	if err != nil {
		return 0, 0
	}
	c := st.CPUTotal
	all = c.User + c.Nice + c.System + c.Idle + c.Iowait + c.IRQ + c.SoftIRQ + c.Steal
	return all - c.Idle - c.Iowait, all
}

// processCPU is the CPU time (user and system) each process of the machine has used so far, by
// pid, with its command's name; processes that cannot be read are left out.
type processCPU map[int]struct {
	comm string
	cpu  float64
}

// readProcessCPU reads processCPU now.
func readProcessCPU() processCPU {
	out := processCPU{}
	procs, err := procfs.AllProcs()
	if err != nil {
		return out
	}
	for _, p := range procs {
		st, err := p.Stat()
		if err != nil {
			continue
		}
		out[p.PID] = struct {
			comm string
			cpu  float64
		}{st.Comm, st.CPUTime()}
	}
	return out
}

// busiest says which commands used the most CPU between before and after (a process that
// started meanwhile counts whole), at most n of them, leaving out pid: "kube-apiserver 6.10 s,
// etcd 2.95 s".
func busiest(before, after processCPU, skip, n int) string {
	byComm := map[string]float64{}
	for pid, a := range after {
		if pid == skip {
			continue
		}
		byComm[a.comm] += a.cpu - before[pid].cpu
	}
	comms := make([]string, 0, len(byComm))
	for c, used := range byComm {
		if used >= 0.005 {
			comms = append(comms, c)
		}
	}
	slices.SortFunc(comms, func(a, b string) int { return cmp.Compare(byComm[b], byComm[a]) })
	var parts []string
	for _, c := range comms[:min(n, len(comms))] {
		parts = append(parts, fmt.Sprintf("%s %.2f s", c, byComm[c]))
	}
	return strings.Join(parts, ", ")
}

// apiRuntime is the apiserver's account of its Go runtime (its /metrics, runtime/metrics
// through component-base's Go collector): how many cycles its collector ran and how much CPU
// they took, which says whether a start that cost the apiserver more CPU than another paid it in
// collection. The runtime adds up its CPU classes as each cycle ends: the collector's share is
// that of the cycles counted, and the other classes are not read (they hold the time since the
// last cycle, whenever it was).
type apiRuntime struct {
	GCCPUSeconds  float64 `json:"gc_cpu_seconds"`
	GCCycles      float64 `json:"gc_cycles"`
	HeapGoalBytes float64 `json:"heap_goal_bytes"`
	HeapLiveBytes float64 `json:"heap_live_bytes"`
}

// readAPIRuntime scrapes the apiserver's /metrics.
func readAPIRuntime(ctx context.Context, cs kubernetes.Interface) (apiRuntime, error) {
	raw, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return apiRuntime{}, fmt.Errorf("reading the apiserver's metrics: %w", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		return apiRuntime{}, fmt.Errorf("parsing the apiserver's metrics: %w", err)
	}
	m := metrics(families)
	return apiRuntime{
		GCCPUSeconds:  m.value("go_cpu_classes_gc_total_cpu_seconds_total", nil),
		GCCycles:      m.value("go_gc_cycles_total_gc_cycles_total", nil),
		HeapGoalBytes: m.value("go_gc_heap_goal_bytes", nil),
		HeapLiveBytes: m.value("go_gc_heap_live_bytes", nil),
	}, nil
}

// since is what the apiserver's runtime spent from before to r, with before's heap.
func (r apiRuntime) since(before apiRuntime) apiRuntime {
	return apiRuntime{
		GCCPUSeconds:  r.GCCPUSeconds - before.GCCPUSeconds,
		GCCycles:      r.GCCycles - before.GCCycles,
		HeapGoalBytes: before.HeapGoalBytes,
		HeapLiveBytes: before.HeapLiveBytes,
	}
}

func (r apiRuntime) String() string {
	return fmt.Sprintf("its collector ran %.0f cycles, %.2f s of CPU; its live heap %s, goal %s before",
		r.GCCycles, r.GCCPUSeconds, mib(uint64(r.HeapLiveBytes)), mib(uint64(r.HeapGoalBytes)))
}
