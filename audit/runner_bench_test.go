package audit_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"

	"github.com/pvguard/pvguard/audit"
	"github.com/pvguard/pvguard/internal/clusterview"
	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/test/gen"
	"github.com/pvguard/pvguard/test/storecache"
)

// BenchmarkRunnerFullAudit times the server's full audit (Runner.RunOnce) of a generated cluster
// held in informer stores, as `pvguard serve` reads its cache, and reports the heap the runner
// keeps between audits (retained-B: the live heap after the audits and a collection, less the
// live heap before the runner was made). AUDIT_BENCH_OBJECTS sets the size (default 20,000).
//
//	go test ./audit/ -run '^$' -bench RunnerFullAudit -benchtime 5x -memprofile mem.out -memprofilerate 1
func BenchmarkRunnerFullAudit(b *testing.B) {
	n := benchObjects(b)
	st := gen.Inventory(n)
	storecache.Cut(st) // shaped and shared as the server caches them
	c := storecache.New(st)
	// The state's lookups the live reads make build its indexes: built now, they are not counted.
	_, _ = st.PersistentVolume("")
	_, _ = st.PersistentVolumeClaim("", "")
	_, _ = st.Node("")
	before := liveHeap()
	r := audit.NewRunner(audit.RunnerOptions{Cache: c, Live: clusterview.New(c, storecache.Reader{State: st}).LiveView,
		Engine: func() *policy.Engine { return policy.NewEngine(nil) }, Log: logr.Discard(), Now: func() time.Time { return gen.InventoryNow }})
	ctx := context.Background()
	b.ReportAllocs()
	cpu := cpuTime(b)
	for b.Loop() {
		if err := r.RunOnce(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	// The process's CPU time (every thread, the collector's included) moves less with what else
	// runs on the machine than the wall time does.
	b.ReportMetric(float64(cpuTime(b)-cpu)/float64(b.N), "cpu-ns/op")
	if found, _, _ := r.LatestFindings(); len(found) != gen.InventoryFindings(n) {
		b.Fatalf("%d findings, want %d", len(found), gen.InventoryFindings(n))
	}
	retained := liveHeap() - before
	if path := os.Getenv("AUDIT_BENCH_HEAP_PROFILE"); path != "" {
		writeHeapProfile(b, path)
	}
	runtime.KeepAlive(r)
	runtime.KeepAlive(c)
	runtime.KeepAlive(st)
	b.ReportMetric(float64(retained), "retained-B")
	b.ReportMetric(float64(retained)/float64(n), "retained-B/object")
}

// BenchmarkRunnerIncrementalAudit times an incremental audit (Runner.RunPending after Changed)
// of a share of a generated cluster's claims and volumes, as after a relist, beside the full
// audit of the same cluster (BenchmarkRunnerFullAudit) that the runner does instead once the
// changes reach that share (fullAuditShare). AUDIT_BENCH_OBJECTS sets the size (default 20,000).
//
//	go test ./audit/ -run '^$' -bench RunnerIncrementalAudit -benchtime 3x
func BenchmarkRunnerIncrementalAudit(b *testing.B) {
	n := benchObjects(b)
	st := gen.Inventory(n)
	storecache.Cut(st)
	c := storecache.New(st)
	if err := clusterview.SetupIndexes(context.Background(), c, nil); err != nil {
		b.Fatal(err)
	}
	views := clusterview.New(c, storecache.Reader{State: st})
	var changed []any
	for _, o := range st.Objects() {
		switch o.(type) {
		case *corev1.PersistentVolume, *corev1.PersistentVolumeClaim:
			changed = append(changed, o)
		}
	}
	engine := policy.NewEngine(nil) // the server's current engine, made once per config
	for _, percent := range []int{1, 5, 10, 25, 100} {
		b.Run(fmt.Sprintf("changed=%d%%", percent), func(b *testing.B) {
			r := audit.NewRunner(audit.RunnerOptions{Cache: c, Live: views.LiveView, View: views.CacheView,
				Engine: func() *policy.Engine { return engine }, Log: logr.Discard(), Now: func() time.Time { return gen.InventoryNow }})
			ctx := context.Background()
			if err := r.RunOnce(ctx); err != nil {
				b.Fatal(err)
			}
			some := changed[:len(changed)*percent/100]
			b.ReportAllocs()
			cpu := cpuTime(b)
			for b.Loop() {
				r.Changed(some...)
				if err := r.RunPending(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(cpuTime(b)-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}

// benchObjects is the benchmarks' cluster size: AUDIT_BENCH_OBJECTS, default 20,000.
func benchObjects(b *testing.B) int {
	s := os.Getenv("AUDIT_BENCH_OBJECTS")
	if s == "" {
		return 20000
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		b.Fatalf("AUDIT_BENCH_OBJECTS: %v", err)
	}
	return n
}

// writeHeapProfile writes the heap profile (inuse_space is what is live now, the runner's results
// among it) while the runner is alive: -memprofile is written after the benchmark, when it is not.
func writeHeapProfile(b *testing.B, path string) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.WriteHeapProfile(f); err != nil {
		b.Fatal(err)
	}
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// liveHeap is the heap in use after a full collection.
func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
