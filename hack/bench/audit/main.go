// Command audit measures pvguard's audit at scale on synthetic clusters (test/gen.Inventory):
// for each size it times (a) Engine.Audit over the in-memory cluster state, (b) the offline path,
// `pvguard audit -f DIR -o json` (cli.RunAudit) over the same objects written as multi-document
// YAML files, and (c) of that, manifests.Load alone. Each measurement runs in a child process
// of its own, so its peak RSS (getrusage maxrss) is its own; the peak Go heap is sampled with
// runtime.ReadMemStats. See docs/benchmarks.md.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/pvguard/pvguard/clusterstate"
	"github.com/pvguard/pvguard/internal/cli"
	"github.com/pvguard/pvguard/internal/manifests"
	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/test/gen"
)

// result is what a child reports.
type result struct {
	Wall       time.Duration
	CPU        time.Duration // user and system time of the timed part, every thread
	HeapBefore uint64        // live heap when the timed part starts (the cluster state, for the engine)
	PeakHeap   uint64        // peak HeapAlloc sampled during the timed part
	RSSBefore  uint64        // maxrss when the timed part starts (program, and for the engine the cluster state)
	MaxRSS     uint64        // bytes, for the whole child process
	Findings   int
}

func main() {
	sizes := flag.String("sizes", "10000,50000,100000", "object counts (half volumes, half claims)")
	perFile := flag.Int("per-file", 1000, "objects per file")
	format := flag.String("format", "yaml", "manifest files: yaml (multi-document), json (a List per file) or yaml-list (a List per file, as kubectl get -o yaml writes it)")
	keep := flag.String("dir", "", "write the YAML here (kept) instead of a temporary directory")
	profile := flag.String("cpuprofile", "", "write each measurement's CPU profile to PREFIX-<mode>-<size>.pprof")
	runs := flag.Int("runs", 3, "measurements of each kind (each in a new process): the median wall time and the largest memory are shown")
	only := flag.String("modes", "engine,offline,load", "measurements to make: engine, runner (the server's full audit over informer stores), offline, load")
	child := flag.String("child", "", "internal: run one measurement (engine, offline or load)")
	size := flag.Int("size", 0, "internal: objects for -child engine")
	unique := flag.Bool("unique", false, "make every label, annotation, finalizer, size and node affinity unique to its object (gen.Unique): the audit where nothing repeats")
	flag.Parse()

	if *child != "" {
		r, err := measure(*child, *size, *keep, *profile, *unique)
		if err != nil {
			log.Fatal(err)
		}
		if err := json.NewEncoder(os.Stdout).Encode(r); err != nil {
			log.Fatal(err)
		}
		return
	}

	fmt.Printf("%s, GOMAXPROCS %d, load average %s, %s files of %d objects\n\n", runtime.Version(), runtime.GOMAXPROCS(0), loadavg(), *format, *perFile)
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "objects\tpath\twall\tCPU\tper object\tlive heap before\tpeak heap\tRSS before\tmax RSS\tfindings\t")
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			log.Fatalf("-sizes: %v", err)
		}
		dir := *keep
		if dir == "" {
			if dir, err = os.MkdirTemp("", "pvguard-audit-bench-"); err != nil {
				log.Fatal(err)
			}
		} else {
			dir = filepath.Join(dir, strconv.Itoa(n))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				log.Fatal(err)
			}
		}
		write := gen.WriteYAML
		switch *format {
		case "json":
			write = gen.WriteJSON
		case "yaml-list":
			write = gen.WriteYAMLList
		}
		if _, err := write(generate(n, *unique), dir, *perFile); err != nil {
			log.Fatal(err)
		}
		// Written back before it is read: otherwise the kernel flushes the new files to disk
		// during the first measurements, and they time the flush too.
		syscall.Sync()
		debug.FreeOSMemory()
		modes := strings.Split(*only, ",")
		for _, mode := range modes {
			var r result
			var walls, cpus []time.Duration
			for range *runs {
				one, err := runChild(mode, n, dir, *profile, *unique)
				if err != nil {
					log.Fatalf("%s %d: %v", mode, n, err)
				}
				walls = append(walls, one.Wall)
				cpus = append(cpus, one.CPU)
				r = result{HeapBefore: max(r.HeapBefore, one.HeapBefore), PeakHeap: max(r.PeakHeap, one.PeakHeap),
					RSSBefore: max(r.RSSBefore, one.RSSBefore), MaxRSS: max(r.MaxRSS, one.MaxRSS), Findings: one.Findings}
			}
			slices.Sort(walls)
			r.Wall = walls[len(walls)/2]
			slices.Sort(cpus)
			r.CPU = cpus[len(cpus)/2]
			path := map[string]string{"engine": "engine (Engine.Audit)", "runner": "server (Runner.RunOnce, informer stores)", "offline": "offline (RunAudit -o json)",
				"load": "  of which manifests.Load"}[mode]
			findings := strconv.Itoa(r.Findings)
			if mode == "load" {
				findings = "-"
			}
			fmt.Fprintf(tw, "%d\t%s\t%.0f ms\t%.0f ms\t%.1f µs\t%s\t%s\t%s\t%s\t%s\t\n", n, path, ms(r.Wall), ms(r.CPU),
				float64(r.Wall.Nanoseconds())/float64(n)/1e3, mib(r.HeapBefore), mib(r.PeakHeap), mib(r.RSSBefore), mib(r.MaxRSS), findings)
		}
		if *keep == "" {
			os.RemoveAll(dir)
		}
	}
	tw.Flush()
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

func mib(b uint64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

func loadavg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(data))[:3], " ")
}

// runChild runs one measurement in a fresh process of this program.
func runChild(mode string, n int, dir, profile string, unique bool) (result, error) {
	self, err := os.Executable()
	if err != nil {
		return result{}, err
	}
	cmd := exec.Command(self, "-child", mode, "-size", strconv.Itoa(n), "-dir", dir, "-cpuprofile", profile, "-unique="+strconv.FormatBool(unique))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return result{}, err
	}
	var r result
	return r, json.Unmarshal(out, &r)
}

// generate is the benchmark's inventory of n objects.
func generate(n int, unique bool) *clusterstate.State {
	s := gen.Inventory(n)
	if unique {
		gen.Unique(s)
	}
	return s
}

// measure runs one measurement in this (child) process.
func measure(mode string, n int, dir, profile string, unique bool) (result, error) {
	var run func() (int, error)
	switch mode {
	case "engine":
		st := generate(n, unique)
		engine := policy.NewEngine(nil)
		run = func() (int, error) {
			found, err := engine.Audit(st, gen.InventoryNow, nil)
			return len(found), err
		}
	case "runner":
		run = runnerAudit(generate(n, unique))
	case "offline":
		run = func() (int, error) {
			err := cli.RunAudit(cli.AuditFlags{Files: []string{dir}, Output: "json", Now: func() time.Time { return gen.InventoryNow }}, io.Discard, io.Discard)
			return gen.InventoryFindings(n), err
		}
	case "load":
		run = func() (int, error) {
			_, objects, errs := manifests.Load([]string{dir})
			if len(errs) > 0 {
				return 0, errs[0]
			}
			return objects, nil
		}
	default:
		return result{}, fmt.Errorf("unknown mode %q", mode)
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	r := result{HeapBefore: ms.HeapAlloc, PeakHeap: ms.HeapAlloc, RSSBefore: maxRSS()}

	if profile != "" {
		f, err := os.Create(fmt.Sprintf("%s-%s-%d.pprof", profile, mode, n))
		if err != nil {
			return r, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return r, err
		}
		defer pprof.StopCPUProfile()
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var peak uint64
	wg.Go(func() {
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		var ms runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				runtime.ReadMemStats(&ms)
				peak = max(peak, ms.HeapAlloc)
			}
		}
	})
	cpu0 := cpuTime()
	start := time.Now()
	found, err := run()
	r.Wall = time.Since(start)
	r.CPU = cpuTime() - cpu0
	close(stop)
	wg.Wait()
	if err != nil {
		return r, err
	}
	runtime.ReadMemStats(&ms)
	r.PeakHeap = max(r.PeakHeap, peak, ms.HeapAlloc)
	r.Findings = found
	r.MaxRSS = maxRSS()
	return r, nil
}

// cpuTime is the user and system time this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		log.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// maxRSS is this process's peak resident set so far, in bytes: getrusage's maxrss, unless the
// peak of this program's own address space (VmHWM) is lower. Linux carries maxrss across
// fork and exec, so a child's maxrss starts at the parent's peak (which generated the objects).
func maxRSS() uint64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		log.Fatal(err)
	}
	rss := uint64(ru.Maxrss) * 1024 // kilobytes on Linux
	if data, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
				if kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64); err == nil {
					rss = min(rss, kb*1024)
				}
			}
		}
	}
	return rss
}
