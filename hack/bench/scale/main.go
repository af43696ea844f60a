// Command scale measures a real `pvguard serve` process against a real kube-apiserver holding N
// volume/claim pairs of realistic shape: time to ready, the first full audit, an
// incremental audit after one change, admission latency with that cache, the binder's plan over
// a batch of pending claims, and memory (RSS and Go heap, peak and steady). Per size it starts
// etcd and kube-apiserver (test/controlplane), fills them through the apiserver as kubectl, the
// CSI provisioner and kube-controller-manager would, and then runs one fresh child per binder
// mode. Results and their reading are in docs/benchmarks.md, "Scale".
//
//	go run ./hack/bench/scale -pairs 0,10000,50000,100000 -json scale.json
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/procfs"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/pvguard/pvguard/binder"
	"github.com/pvguard/pvguard/internal/devcluster"
)

type config struct {
	sizes           []int
	modes           []binder.Mode
	pvguard         string
	baseline        string
	baseModes       []binder.Mode // the modes baseline runs in, before modes
	env             []string
	args            []string
	pending         int
	workers         int
	reviews         int
	reviewRate      float64
	warmup          int
	idle            time.Duration
	planBudget      time.Duration
	etcdQuota       int64
	jsonPath        string
	keep            bool
	profiles        string
	cpuProfiles     string
	explainProfiles string
	explain         explainOptions
	cli             []cliBinary
	cliRuns         int
	upstream        time.Duration
}

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, " ") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	var c config
	var pairs, modes string
	var env, args listFlag
	flag.StringVar(&pairs, "pairs", "2000", "comma-separated cluster sizes in volume/claim pairs (0: an empty cluster, the admission baseline)")
	flag.StringVar(&modes, "modes", "off,shadow,active", "comma-separated binder modes, one fresh `pvguard serve` each")
	flag.StringVar(&c.pvguard, "pvguard", "", "pvguard binary (default: go build ./cmd/pvguard into the run's temporary directory)")
	flag.StringVar(&c.baseline, "baseline", "", "another pvguard binary (e.g. built from an older commit) run first against the same objects, in the modes of -baseline-modes, for a before/after on one fill")
	var baseModes string
	flag.StringVar(&baseModes, "baseline-modes", "off", "comma-separated binder modes the -baseline binary runs in, each before the modes of -modes")
	flag.Var(&env, "env", "extra environment for pvguard serve, KEY=VALUE (repeatable), e.g. -env GOMEMLIMIT=900MiB -env GOGC=50")
	flag.Var(&args, "arg", "extra pvguard serve flag (repeatable), e.g. -arg=--kube-api-qps=200")
	flag.IntVar(&c.pending, "pending", 10000, "pending claims (and half as many free volumes) the binder plans over in shadow and active modes (0 skips)")
	flag.IntVar(&c.workers, "workers", 64, "parallel writers filling the apiserver")
	flag.IntVar(&c.reviews, "reviews", 2000, "timed admission reviews per case, sent one at a time")
	flag.Float64Var(&c.reviewRate, "review-rate", 0, "timed admission reviews a second per case (0: back to back); paced, the reviews leave the cores to what runs beside them")
	flag.IntVar(&c.warmup, "warmup", 200, "untimed admission reviews per case first")
	flag.DurationVar(&c.planBudget, "plan-budget", 4*time.Minute, "how long to wait for the batch's first plans to end, and then for the five measured plans (an active binder with a backlog plans seldom)")
	flag.DurationVar(&c.idle, "idle", 10*time.Second, "idle time after the startup audits before the steady-state memory sample")
	flag.Int64Var(&c.etcdQuota, "etcd-quota", 8<<30, "etcd --quota-backend-bytes (its 2 GiB default fills up near 100k pairs)")
	flag.StringVar(&c.jsonPath, "json", "", "also write the raw results to this JSON file")
	flag.StringVar(&c.profiles, "heap-profiles", "", "write each child's heap profile at steady state (after the startup audits and -idle) to DIR/heap-PAIRS-MODE.pprof, through its --profiling")
	flag.StringVar(&c.cpuProfiles, "cpu-profiles", "", "record each child's CPU profile from its start until its first full audit is seen to DIR/cpu-PAIRS-MODE.perf.data with `perf record -g` (the server's own profiles are served only once its cache has synced); read with `perf report -i FILE`")
	flag.StringVar(&c.explainProfiles, "explain-cpu-profiles", "", "with -explainers, write each child's Go CPU profile of the 20 s after -explain-warm, while the callers ask, to DIR/explain-cpu-PAIRS-MODE.pprof, through its --profiling")
	flag.IntVar(&c.explain.callers, "explainers", 0, "after the admission measurement, start this many concurrent callers (each with a ServiceAccount token of its own) asking for explanations of pending claims in a loop, and measure the admission reviews again while they run (0: skip)")
	flag.DurationVar(&c.explain.warm, "explain-warm", 5*time.Second, "how long the explaining callers run before the admission reviews are measured again")
	flag.BoolVar(&c.explain.retryAfter, "explain-retry-after", false, "the explaining callers wait out a 429's Retry-After, as kubectl does (default: they ask again at once)")
	flag.DurationVar(&c.explain.rest, "explain-rest", 0, "with -explainers, leave pvguard at rest this long before the callers start, so that the RSS at rest (the highest since the steady sample) spans its collector's cycle")
	var cliBins string
	flag.StringVar(&cliBins, "cli", "", "after the fill, measure `explain pvc` of a pending claim run as a user runs it (wall time, peak RSS) by these binaries, LABEL=PATH[,LABEL=PATH...] (\"new\" for the one built or given with -pvguard)")
	flag.IntVar(&c.cliRuns, "cli-runs", 3, "runs of each -cli binary")
	flag.DurationVar(&c.upstream, "upstream", 0, "before pvguard's runs, time the apiserver's lists of every volume and claim and run kube-controller-manager with only its persistentvolume-binder-controller against the same objects for this long after it synced, for its sync time and RSS (0 skips)")
	flag.BoolVar(&c.keep, "keep", false, "keep the temporary directory (logs of pvguard, kube-apiserver and etcd)")
	flag.Parse()
	c.env, c.args = env, args
	var err error
	if c.sizes, err = parseSizes(pairs); err == nil {
		c.modes, err = parseModes(modes)
	}
	if err == nil {
		c.baseModes, err = parseModes(baseModes)
	}
	if err == nil {
		c.cli, err = parseCLI(cliBins)
	}
	if err == nil && (c.workers <= 0 || c.reviews <= 0 || c.reviewRate < 0 || c.warmup < 0 || c.pending < 0 || c.explain.callers < 0) {
		err = errors.New("-workers and -reviews must be positive, -review-rate, -warmup, -pending and -explainers not negative")
	}
	for _, e := range c.env {
		if err == nil && !strings.Contains(e, "=") {
			err = fmt.Errorf("-env %q: want KEY=VALUE", e)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "scale bench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c); err != nil {
		fmt.Fprintln(os.Stderr, "scale bench:", err)
		os.Exit(1)
	}
}

func parseSizes(s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("-pairs %q: want non-negative integers such as 0,10000", part)
		}
		out = append(out, n)
	}
	return out, nil
}

func parseModes(s string) ([]binder.Mode, error) {
	var out []binder.Mode
	if s == "none" { // only the -cli measurement
		return nil, nil
	}
	for _, m := range strings.Split(s, ",") {
		switch mode := binder.Mode(strings.TrimSpace(m)); mode {
		case binder.ModeOff, binder.ModeShadow, binder.ModeActive:
			out = append(out, mode)
		default:
			return nil, fmt.Errorf("-modes: unknown binder mode %q (want off, shadow, active)", m)
		}
	}
	return out, nil
}

// header describes where and with what the numbers were taken.
type header struct {
	Date     string   `json:"date"`
	Command  string   `json:"command"`
	CPUs     int      `json:"cpus"`
	MemTotal uint64   `json:"mem_total_bytes"`
	Go       string   `json:"go"`
	PVGuard  string   `json:"pvguard"`
	Env      []string `json:"env,omitempty"`
	Args     []string `json:"args,omitempty"`
}

// sizeResult is one cluster size: how it was filled and each mode's measurements.
type sizeResult struct {
	Pairs int `json:"pairs"`
	// Seconds is the wall time of the size: control plane, fill and every mode.
	Seconds float64      `json:"seconds"`
	Fill    fillStats    `json:"fill"`
	Modes   []modeResult `json:"modes"`
	CLI     []cliResult  `json:"cli,omitempty"`
	// Upstream is kube-controller-manager's binder on the same objects (-upstream).
	Upstream *upstreamResult `json:"upstream,omitempty"`
}

type output struct {
	Header       header       `json:"header"`
	Sizes        []sizeResult `json:"sizes"`
	TotalSeconds float64      `json:"total_seconds"`
}

func run(ctx context.Context, c config) error {
	start := time.Now()
	// The control plane's client libraries log through controller-runtime's root logger.
	ctrllog.SetLogger(logr.Discard())
	assets, err := devcluster.AssetsDir()
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "pvguard-scale-")
	if err != nil {
		return fmt.Errorf("creating the temporary directory: %w", err)
	}
	if c.keep {
		fmt.Fprintln(os.Stderr, "logs in", tmp)
	} else {
		defer os.RemoveAll(tmp)
	}
	if c.pvguard == "" {
		if c.pvguard, err = buildPVGuard(ctx, tmp); err != nil {
			return err
		}
	}
	out := output{Header: header{
		Date: time.Now().UTC().Format(time.RFC3339), Command: strings.Join(os.Args, " "),
		CPUs: runtime.NumCPU(), Go: goVersion(ctx), PVGuard: binaryVersion(ctx, c.pvguard), Env: c.env, Args: c.args,
	}}
	if fs, err := procfs.NewDefaultFS(); err == nil {
		if mi, err := fs.Meminfo(); err == nil && mi.MemTotalBytes != nil {
			out.Header.MemTotal = *mi.MemTotalBytes
		}
	}
	for _, n := range c.sizes {
		sizeStart := time.Now()
		res, err := runSize(ctx, c, assets, filepath.Join(tmp, fmt.Sprintf("n%d", n)), n)
		res.Seconds = time.Since(sizeStart).Seconds()
		out.Sizes = append(out.Sizes, res)
		if err != nil {
			writeReport(os.Stdout, out)
			return fmt.Errorf("%d pairs: %w", n, err)
		}
	}
	out.TotalSeconds = time.Since(start).Seconds()
	writeReport(os.Stdout, out)
	if c.jsonPath != "" {
		data, err := json.MarshalIndent(out, "", "  ")
		if err != nil {
			return fmt.Errorf("encoding results: %w", err)
		}
		if err := os.WriteFile(c.jsonPath, append(data, '\n'), 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", c.jsonPath, err)
		}
	}
	return nil
}

func goVersion(ctx context.Context) string {
	out, err := exec.CommandContext(ctx, "go", "env", "GOVERSION").Output()
	if err != nil {
		return runtime.Version()
	}
	return strings.TrimSpace(string(out))
}

// runSize starts a control plane, fills it with n pairs and measures every mode against it.
func runSize(ctx context.Context, c config, assets, dir string, n int) (res sizeResult, err error) {
	res.Pairs = n
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return res, fmt.Errorf("creating %s: %w", dir, err)
	}
	cp, err := devcluster.StartWith(assets, devcluster.Options{LogDir: dir, EtcdFlags: map[string]string{
		"quota-backend-bytes": strconv.FormatInt(c.etcdQuota, 10),
	}})
	if err != nil {
		return res, err
	}
	defer func() {
		if stopErr := cp.Stop(); stopErr != nil && err == nil {
			err = fmt.Errorf("stopping the control plane: %w", stopErr)
		}
	}()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, cp.KubeConfig, 0o600); err != nil {
		return res, fmt.Errorf("writing the kubeconfig: %w", err)
	}
	cfg := rest.CopyConfig(cp.Config)
	cfg.QPS, cfg.Burst = 10000, 10000
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return res, fmt.Errorf("creating the fill client: %w", err)
	}
	f := &filler{cs: cs, workers: c.workers, log: os.Stderr}
	if err := f.base(ctx); err != nil {
		return res, err
	}
	if res.Fill, err = f.pairs(ctx, n); err != nil {
		return res, err
	}
	fmt.Fprintf(os.Stderr, "filled %d pairs (%d volumes, %d claims) in %.1f s: %.0f pairs/s, %.0f writes/s\n",
		n, res.Fill.Volumes, res.Fill.Claims, res.Fill.Seconds, res.Fill.PairsPerS, res.Fill.WritesPerS)
	if err := f.createFixtures(ctx); err != nil {
		return res, err
	}
	cases, err := reviewCases(ctx, cs)
	if err != nil {
		return res, err
	}
	fillPending := 1 // the fixture's
	for i := range n {
		if shapeOf(i) == shapePending && !specOf(i).local {
			fillPending++
		}
	}
	if len(c.cli) > 0 {
		bins := slices.Clone(c.cli)
		for i := range bins {
			if bins[i].path == "new" {
				bins[i].path = c.pvguard
			}
		}
		if res.CLI, err = measureCLI(ctx, bins, c.cliRuns, kubeconfig, fixtureNamespace+"/"+fixturePending, n, os.Stderr); err != nil {
			return res, err
		}
	}
	// Upstream's binder runs first, on the objects as filled: pvguard's shadow and active runs
	// add a batch of pending claims and free volumes.
	if c.upstream > 0 {
		u, err := measureUpstream(ctx, assets, dir, kubeconfig, cp.Config, c.upstream)
		if err != nil {
			return res, fmt.Errorf("kube-controller-manager: %w", err)
		}
		res.Upstream = &u
		fmt.Fprintf(os.Stderr, "[%d upstream] lists %.2f s (JSON, gzip), %.2f s (protobuf, gzip), %.2f s (protobuf, uncompressed); kube-controller-manager synced %.2f s, peak RSS %s, steady %s\n",
			n, u.ListJSONSeconds, u.ListProtobufSeconds, u.ListProtobufPlainSeconds, u.SyncedSeconds, mib(u.PeakRSS), mib(u.SteadyRSS))
	}
	var runs []child
	if c.baseline != "" {
		for _, mode := range c.baseModes {
			runs = append(runs, child{c.baseline, mode, string(mode) + " (baseline)"})
		}
	}
	for _, mode := range c.modes {
		runs = append(runs, child{c.pvguard, mode, string(mode)})
	}
	for _, ru := range runs {
		mode := ru.mode
		r, err := measureMode(ctx, modeConfig{
			serve:  serveConfig{binary: ru.binary, mode: mode, dir: dir, kube: kubeconfig, env: c.env, args: c.args, heapProfile: heapProfile(c.profiles, n, ru), explainProfile: explainProfile(c.explainProfiles, n, ru), cpuProfile: cpuProfile(c.cpuProfiles, n, ru)},
			filler: f, cases: cases, pairs: n, pending: c.pending, fillPending: fillPending,
			warmup: c.warmup, reviews: c.reviews, reviewRate: c.reviewRate, idle: c.idle, planBudget: c.planBudget, log: os.Stderr,
			explain: c.explain,
		})
		r.Mode = ru.label
		res.Modes = append(res.Modes, r)
		if err != nil {
			return res, fmt.Errorf("binder %s: %w", ru.label, err)
		}
	}
	return res, nil
}

// writeReport prints the header and one markdown row per size and mode.
func writeReport(w io.Writer, o output) {
	h := o.Header
	fmt.Fprintf(w, "# pvguard serve against a filled apiserver (%s)\n\n", h.Date)
	fmt.Fprintf(w, "machine: %d CPUs, %.1f GiB; %s; %s\n", h.CPUs, float64(h.MemTotal)/(1<<30), h.Go, h.PVGuard)
	fmt.Fprintf(w, "command: %s\n", h.Command)
	if len(h.Env) > 0 || len(h.Args) > 0 {
		fmt.Fprintf(w, "serve env: %v, extra flags: %v\n", h.Env, h.Args)
	}
	fmt.Fprintln(w)
	for _, s := range o.Sizes {
		fmt.Fprintf(w, "- %d pairs: %d volumes, %d claims (%d bound, %d released, %d pending, %d available); filled in %.1f s, %.0f pairs/s, %.0f writes/s; %.0f s for the size in all\n",
			s.Pairs, s.Fill.Volumes, s.Fill.Claims, s.Fill.Bound, s.Fill.Released, s.Fill.Pending, s.Fill.Available, s.Fill.Seconds, s.Fill.PairsPerS, s.Fill.WritesPerS, s.Seconds)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| pairs | binder | ready (pvguard's CPU) | first full audit (server) | ready -> audit seen (pvguard's CPU since the start) | startup incremental | 1 change: incremental | pvc-create p50/p99 | pvc-update | pv-create | pv-update | plan: median / max (pending) | peak RSS | peak heap in use | steady RSS | steady heap in use |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, s := range o.Sizes {
		for _, r := range s.Modes {
			lat := map[string]string{}
			for _, l := range r.Admission {
				lat[l.Case] = fmt.Sprintf("%.2f / %.2f ms", l.P50ms, l.P99ms)
			}
			plan := "-"
			switch p := r.Plan; {
			case p != nil && len(p.Triggered) > 0:
				plan = fmt.Sprintf("%.0f / %.0f ms (%.0f)", p.MedianSeconds*1000, p.MaxSeconds*1000, p.Triggered[len(p.Triggered)-1].Pending)
			case p != nil && p.FirstWhole != nil && p.FirstWhole.Plans > 0:
				plan = fmt.Sprintf("first of the whole batch %.0f ms (%.0f); then %s", p.FirstWhole.Seconds*1000, p.FirstWhole.Pending, p.Note)
			case p != nil:
				plan = fmt.Sprintf("none measured (%s); longest <= %s s", p.Note, p.MaxAtMost)
			}
			fmt.Fprintf(w, "| %d | %s | %.2f s (%.2f s) | %.2f s | %.2f s (%.2f s) | %d, %.2f s | %.1f ms | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
				r.Pairs, r.Mode, r.ReadySeconds, r.ReadyCPUSeconds, r.FullAuditSeconds, r.ReadyToAuditSeconds, r.AuditCPUSeconds, r.StartupIncrementalCount, r.StartupIncrementalSeconds,
				r.IncrementalSeconds*1000, lat["pvc-create"], lat["pvc-update"], lat["pv-create"], lat["pv-update"], plan,
				mib(r.Memory.PeakRSS), mib(r.Memory.PeakHeapInuse), mib(r.Steady.RSS), mib(r.Steady.HeapInuse))
		}
	}
	writeUpstreamReport(w, o)
	writeExplainReport(w, o)
	var cli []cliResult
	for _, s := range o.Sizes {
		cli = append(cli, s.CLI...)
	}
	writeCLIReport(w, cli)
	if o.TotalSeconds > 0 {
		fmt.Fprintf(w, "\nwhole run: %.0f s\n", o.TotalSeconds)
	}
}

// writeUpstreamReport prints, when -upstream ran, the lists' time and kube-controller-manager's
// binder on the same objects.
func writeUpstreamReport(w io.Writer, o output) {
	var shown bool
	for _, s := range o.Sizes {
		shown = shown || s.Upstream != nil
	}
	if !shown {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| pairs | lists of all volumes and claims: JSON gzip / protobuf gzip / protobuf uncompressed | kube-controller-manager (PV binder only): synced | peak RSS | steady RSS | ran |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	for _, s := range o.Sizes {
		if u := s.Upstream; u != nil {
			fmt.Fprintf(w, "| %d | %.2f / %.2f / %.2f s | %.2f s | %s | %s | %.0f s |\n", s.Pairs, u.ListJSONSeconds, u.ListProtobufSeconds, u.ListProtobufPlainSeconds, u.SyncedSeconds, mib(u.PeakRSS), mib(u.SteadyRSS), u.RanSeconds)
		}
	}
}

// child is one pvguard serve run: its binary, binder mode, and label in the table.
type child struct {
	binary string
	mode   binder.Mode
	label  string
}

// heapProfile is where a run's heap profile goes: "" when -heap-profiles is not set, and for the
// baseline, an older binary that may not have --profiling.
func heapProfile(dir string, pairs int, ru child) string { return goProfile(dir, "heap", pairs, ru) }

// explainProfile is where a run's CPU profile under the explaining callers goes: "" when
// -explain-cpu-profiles is not set, and for the baseline, as heapProfile.
func explainProfile(dir string, pairs int, ru child) string {
	return goProfile(dir, "explain-cpu", pairs, ru)
}

// goProfile is DIR/KIND-PAIRS-MODE.pprof, a profile read through the child's --profiling: none
// without a directory or for the baseline.
func goProfile(dir, kind string, pairs int, ru child) string {
	if dir == "" || ru.label != string(ru.mode) {
		return ""
	}
	return filepath.Join(dir, fmt.Sprintf("%s-%d-%s.pprof", kind, pairs, ru.mode))
}

// cpuProfile is where a run's CPU profile goes: "" when -cpu-profiles is not set.
func cpuProfile(dir string, pairs int, ru child) string {
	if dir == "" {
		return ""
	}
	label := strings.NewReplacer(" ", "-", "(", "", ")", "").Replace(ru.label)
	return filepath.Join(dir, fmt.Sprintf("cpu-%d-%s.perf.data", pairs, label))
}

// writeExplainReport prints, when callers asked for explanations, the admission latency without
// and with them side by side, and what the callers were answered.
func writeExplainReport(w io.Writer, o output) {
	var shown bool
	for _, s := range o.Sizes {
		for _, r := range s.Modes {
			shown = shown || r.Explain != nil
		}
	}
	if !shown {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| pairs | binder | callers | explanations 200 (/s, p50, p99) | server side p50, p99 (p99 waits: plan, turn) | largest answer | 429 (/s) | other, in flight at stop | pvguard CPU, RSS before (highest at rest) -> peak | pvc-create p50/p99: alone -> with callers | pvc-update | pv-create | pv-update |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, s := range o.Sizes {
		for _, r := range s.Modes {
			e := r.Explain
			if e == nil {
				continue
			}
			alone, loaded := map[string]latency{}, map[string]latency{}
			for _, l := range r.Admission {
				alone[l.Case] = l
			}
			for _, l := range e.Admission {
				loaded[l.Case] = l
			}
			cell := func(name string) string {
				a, b := alone[name], loaded[name]
				return fmt.Sprintf("%.2f / %.2f -> %.2f / %.2f ms", a.P50ms, a.P99ms, b.P50ms, b.P99ms)
			}
			fmt.Fprintf(w, "| %d | %s | %d | %d (%.1f/s, %.1f ms, %.1f ms) | %.1f ms, %.1f ms (%.1f, %.1f ms) | %.1f KB | %d (%.0f/s) | %d, %d | %.2f cores, %s (rest peak %s) -> %s | %s | %s | %s | %s |\n",
				r.Pairs, r.Mode, e.Callers, e.OK, e.OKPerS, e.OKp50ms, e.OKp99ms, e.ServerP50ms, e.ServerP99ms, e.PlanWaitP99ms, e.TurnWaitP99ms,
				float64(e.MaxAnswerBytes)/1000, e.Limited, e.LimitedPerS, e.Other, e.InFlight,
				e.ServerCPUSeconds/e.Seconds, mib(e.RSSBefore), mib(e.RSSRestPeak), mib(e.PeakRSS),
				cell("pvc-create"), cell("pvc-update"), cell("pv-create"), cell("pv-update"))
		}
	}
}
