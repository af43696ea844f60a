// Command binder measures how long pvguard's binder (`pvguard serve --binder=active`, run in
// this process) and kube-controller-manager's persistentvolume-binder controller (bin/, exec'd)
// take to bind N pre-created exact PV/PVC pairs on one test control plane, at the same client
// QPS and burst, alternating which goes first. Results and their reading are in
// docs/benchmarks.md, "Binder vs upstream persistentvolume-binder".
//
//	go run ./hack/bench/binder -pairs 1000 -runs 2 -qps 20:30,200:400
package main

import (
	"context"
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
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/pvguard/pvguard/internal/devcluster"
)

type config struct {
	pairs    int
	runs     int
	rates    []rate
	binders  []string
	timeout  time.Duration
	smoke    int
	creators int
	keepLogs bool
	avail    bool
}

func main() {
	var c config
	var qps, binders string
	flag.IntVar(&c.pairs, "pairs", 1000, "PV/PVC pairs per measurement")
	flag.IntVar(&c.runs, "runs", 1, "rounds over every QPS setting and binder; pvguard goes first in odd rounds, upstream in even ones")
	flag.StringVar(&qps, "qps", "20:30,200:400", "comma-separated qps:burst client limits given to both binders (20:30 is kube-controller-manager's default)")
	flag.StringVar(&binders, "binders", "upstream,pvguard", "binders to measure, of upstream, pvguard and pvguard-half (pvguard at half the QPS and burst: "+
		"its client limits volume and claim requests in separate buckets, upstream's in one)")
	flag.DurationVar(&c.timeout, "timeout", 10*time.Minute, "give up on a measurement after this long and report the claims bound so far")
	flag.IntVar(&c.smoke, "smoke", 5, "pairs each binder must bind before anything is timed (0 skips the check)")
	flag.IntVar(&c.creators, "creators", 16, "parallel requests creating and deleting fixtures")
	flag.BoolVar(&c.avail, "available", false, "mark the volumes Available when creating them, as a binder already running would have (by default they start Pending, as created, and the binder under test makes them Available)")
	flag.BoolVar(&c.keepLogs, "keep-logs", false, "keep kube-controller-manager's logs (their directory is printed)")
	flag.Parse()
	var err error
	if c.rates, err = parseRates(qps); err == nil {
		c.binders, err = parseBinders(binders)
	}
	if err == nil && (c.pairs <= 0 || c.runs <= 0 || c.creators <= 0) {
		err = errors.New("-pairs, -runs and -creators must be positive")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "binder bench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c); err != nil {
		fmt.Fprintln(os.Stderr, "binder bench:", err)
		os.Exit(1)
	}
}

func parseRates(s string) ([]rate, error) {
	var out []rate
	for _, part := range strings.Split(s, ",") {
		q, b, ok := strings.Cut(strings.TrimSpace(part), ":")
		qv, err1 := strconv.ParseFloat(q, 32)
		bv, err2 := strconv.Atoi(b)
		if !ok || err1 != nil || err2 != nil || qv <= 0 || bv <= 0 {
			return nil, fmt.Errorf("-qps %q: want qps:burst pairs such as 20:30,200:400", part)
		}
		out = append(out, rate{qps: float32(qv), burst: bv})
	}
	return out, nil
}

func parseBinders(s string) ([]string, error) {
	var out []string
	for _, b := range strings.Split(s, ",") {
		switch b = strings.TrimSpace(b); b {
		case "upstream", "pvguard", "pvguard-half":
			if !slices.Contains(out, b) {
				out = append(out, b)
			}
		default:
			return nil, fmt.Errorf("-binders: unknown binder %q (want upstream, pvguard, pvguard-half)", b)
		}
	}
	return out, nil
}

// result is one measurement: one binder binding one run's pairs at one rate.
type result struct {
	round   int
	binder  string
	rate    rate
	pairs   int
	bound   int
	first   time.Duration // start to the first Bound claim seen (0: none)
	all     time.Duration // start to every claim Bound, or to the timeout
	timeout bool
	reqs    requests
}

func (r result) afterFirst() time.Duration {
	if r.first == 0 {
		return 0
	}
	return r.all - r.first
}

func run(ctx context.Context, c config) error {
	// Serve and the manager log through the logger they are given; this silences
	// controller-runtime's own root logger (and its "never set" warning).
	ctrllog.SetLogger(logr.Discard())
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	kcm := filepath.Join(root, "bin", "kube-controller-manager")
	if slices.Contains(c.binders, "upstream") {
		if _, err := os.Stat(kcm); err != nil {
			fmt.Fprintln(os.Stderr, "no bin/kube-controller-manager: running hack/build-tools.sh kube-controller-manager")
			cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "build-tools.sh"), "kube-controller-manager")
			cmd.Dir, cmd.Stdout, cmd.Stderr = root, os.Stderr, os.Stderr
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("building kube-controller-manager: %w", err)
			}
		}
	}
	assets, err := devcluster.AssetsDir()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "pvguard-binder-bench-")
	if err != nil {
		return err
	}
	if c.keepLogs {
		fmt.Fprintln(os.Stderr, "kube-controller-manager logs in", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	fmt.Fprintln(os.Stderr, "starting kube-apiserver and etcd from", assets)
	cp, err := devcluster.Start(assets)
	if err != nil {
		return err
	}
	defer func() { _ = cp.Stop() }()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, cp.KubeConfig, 0o600); err != nil {
		return err
	}
	admin := rest.CopyConfig(cp.Config)
	admin.QPS, admin.Burst = 1000, 2000
	admin.ContentType = "application/vnd.kubernetes.protobuf"
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return err
	}

	printEnvironment(os.Stdout, kcm, c)
	b := &bench{c: c, cs: cs, kcm: kcm, kubeconfig: kubeconfig, dir: dir}
	if c.smoke > 0 {
		for _, name := range c.binders {
			r, err := b.measure(ctx, 0, name, c.rates[0], c.smoke)
			if err != nil {
				return fmt.Errorf("smoke check of %s: %w", name, err)
			}
			if r.bound != c.smoke {
				return fmt.Errorf("smoke check: %s bound %d of %d claims in %s; not timing a binder that does not bind", name, r.bound, c.smoke, c.timeout)
			}
			fmt.Fprintf(os.Stderr, "smoke check: %s bound %d/%d pairs in %.1fs\n", name, r.bound, c.smoke, r.all.Seconds())
		}
	}
	var results []result
	for round := 1; round <= c.runs; round++ {
		order := orderFor(round, c.binders)
		for _, q := range c.rates {
			for _, name := range order {
				r, err := b.measure(ctx, round, name, q, c.pairs)
				if err != nil {
					printResults(os.Stdout, results)
					return err
				}
				fmt.Fprintf(os.Stderr, "round %d %-12s %-8s bound %d/%d, first %.1fs, all %.1fs\n",
					round, name, q, r.bound, r.pairs, r.first.Seconds(), r.all.Seconds())
				results = append(results, r)
			}
		}
	}
	printResults(os.Stdout, results)
	return nil
}

// orderFor alternates which binder goes first: pvguard's in odd rounds, upstream in even ones.
func orderFor(round int, binders []string) []string {
	var out []string
	for _, b := range []string{"pvguard", "pvguard-half", "upstream"} {
		if slices.Contains(binders, b) {
			out = append(out, b)
		}
	}
	if round%2 == 0 {
		slices.Reverse(out)
	}
	return out
}

type bench struct {
	c          config
	cs         kubernetes.Interface
	kcm        string
	kubeconfig string
	dir        string
	seq        int
}

func (b *bench) binder(name string) binder {
	switch name {
	case "upstream":
		return &upstream{bin: b.kcm, kubeconfig: b.kubeconfig, logFile: filepath.Join(b.dir, fmt.Sprintf("kcm-%d.log", b.seq))}
	}
	certDir := filepath.Join(b.dir, fmt.Sprintf("certs-%d", b.seq))
	return &pvguard{kubeconfig: b.kubeconfig, certDir: certDir, half: name == "pvguard-half"}
}

// measure creates a fresh run's pairs, starts the binder, polls the claims every 100 ms until all
// are Bound (or the timeout), stops the binder and removes the run's objects.
func (b *bench) measure(ctx context.Context, round int, name string, q rate, pairs int) (result, error) {
	b.seq++
	f := newFixture(b.cs, b.seq, pairs, b.c.creators, b.c.avail)
	res := result{round: round, binder: name, rate: q, pairs: pairs}
	if err := f.create(ctx); err != nil {
		return res, errors.Join(err, f.cleanup(context.Background()))
	}
	err := b.timeBinding(ctx, f, b.binder(name), q, &res)
	if err == nil {
		err = f.verify(ctx)
	}
	return res, errors.Join(err, f.cleanup(context.Background()))
}

func (b *bench) timeBinding(ctx context.Context, f *fixture, bd binder, q rate, res *result) (err error) {
	before, err := scrapeRequests(ctx, b.cs)
	if err != nil {
		return fmt.Errorf("reading apiserver metrics: %w", err)
	}
	start := time.Now()
	if err := bd.start(q); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, bd.stop()) }()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-bd.exited():
			return nil // stop reports why
		case <-tick.C:
		}
		n, err := f.bound(ctx)
		if err != nil {
			return fmt.Errorf("listing claims: %w", err)
		}
		elapsed := time.Since(start)
		res.bound, res.all = n, elapsed
		if n > 0 && res.first == 0 {
			res.first = elapsed
		}
		if n == f.pairs || elapsed > b.c.timeout {
			res.timeout = n < f.pairs
			after, err := scrapeRequests(ctx, b.cs)
			if err != nil {
				return fmt.Errorf("reading apiserver metrics: %w", err)
			}
			res.reqs = after.since(before)
			return nil
		}
	}
}

// moduleRoot is the directory of pvguard's go.mod, found from the working directory up.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.Contains(string(data), "module github.com/pvguard/pvguard\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("run from inside the pvguard module")
		}
		dir = parent
	}
}

func printEnvironment(w io.Writer, kcm string, c config) {
	mem := "?"
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				mem = strings.TrimSpace(v)
			}
		}
	}
	version := "?"
	if out, err := exec.Command(kcm, "--version").Output(); err == nil {
		version = strings.TrimSpace(string(out))
	}
	fmt.Fprintf(w, "# %s, %d CPUs, MemTotal %s, %s %s/%s, kube-controller-manager %s\n",
		time.Now().Format("2006-01-02 15:04"), runtime.NumCPU(), mem, runtime.Version(), runtime.GOOS, runtime.GOARCH, version)
	fmt.Fprintf(w, "# %d pairs, %d round(s), binders %s, volumes created %s\n", c.pairs, c.runs, strings.Join(c.binders, ","),
		map[bool]string{false: "Pending", true: "Available"}[c.avail])
}

func printResults(w io.Writer, results []result) {
	if len(results) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.AlignRight|tabwriter.Debug)
	fmt.Fprintln(tw, "round\tbinder\tqps/burst\tpairs\tbound\tfirst bound s\tall bound s\tbinds/s\tall after first s\twrites\twrites/s\tGETs\t")
	for _, r := range results {
		all := r.all.Seconds()
		note := ""
		if r.timeout {
			note = " (timeout)"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%d\t%.1f\t%.1f%s\t%.1f\t%.1f\t%.0f\t%.1f\t%.0f\t\n",
			r.round, r.binder, r.rate, r.pairs, r.bound, r.first.Seconds(), all, note,
			float64(r.bound)/all, r.afterFirst().Seconds(), r.reqs.writes(), r.reqs.writes()/all, r.reqs.gets())
	}
	tw.Flush()

	fmt.Fprintln(w, "\nupstream time / pvguard time (same round and rate; >1 means pvguard is faster):")
	for _, u := range results {
		if u.binder != "upstream" {
			continue
		}
		for _, p := range results {
			if p.binder != "upstream" && p.round == u.round && p.rate == u.rate {
				fmt.Fprintf(w, "  round %d %-8s %-12s from start %.2fx, after first bound %.2fx\n",
					u.round, u.rate, p.binder, u.all.Seconds()/p.all.Seconds(), ratio(u.afterFirst(), p.afterFirst()))
			}
		}
	}
	fmt.Fprintln(w, "\napiserver requests during each measurement (LIST and WATCH not counted):")
	for _, r := range results {
		fmt.Fprintf(w, "  round %d %-12s %-8s %s\n", r.round, r.binder, r.rate, r.reqs)
	}
}

func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return a.Seconds() / b.Seconds()
}

func (r requests) String() string {
	keys := make([]string, 0, len(r))
	for k := range r {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%.0f", k, r[k]))
	}
	return strings.Join(parts, " ")
}
