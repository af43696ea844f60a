package cli

import (
	"context"
	"math"
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
)

func TestMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		name, limit, gomemlimit string
		want                    int64
		wantErr                 bool
	}{
		{name: "unset", want: 0},
		{name: "quantity", limit: "1Gi", want: 966367641},
		{name: "downward API bytes", limit: "536870912", want: 483183820},
		{name: "GOMEMLIMIT wins", limit: "1Gi", gomemlimit: "800MiB", want: 0},
		{name: "not a quantity", limit: "lots", wantErr: true},
		{name: "zero", limit: "0", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := memoryLimit(tc.limit, tc.gomemlimit)
			if (err != nil) != tc.wantErr {
				t.Fatalf("memoryLimit(%q, %q) error = %v, want error %v", tc.limit, tc.gomemlimit, err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("memoryLimit(%q, %q) = %d, want %d", tc.limit, tc.gomemlimit, got, tc.want)
			}
		})
	}
}

// TestLimitLocalReadMemory: the local read's soft limit is set unless GOMEMLIMIT is.
func TestLimitLocalReadMemory(t *testing.T) {
	before := debug.SetMemoryLimit(math.MaxInt64)
	defer debug.SetMemoryLimit(before)
	limitLocalReadMemory("")
	if got := debug.SetMemoryLimit(-1); got != localReadMemoryLimit {
		t.Errorf("limit %d, want %d", got, localReadMemoryLimit)
	}
	debug.SetMemoryLimit(math.MaxInt64)
	limitLocalReadMemory("1GiB")
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("with GOMEMLIMIT set, limit %d, want it unchanged", got)
	}
}

func TestGCPercent(t *testing.T) {
	for _, tc := range []struct {
		name, gogc string
		flag, want int
		wantErr    bool
	}{
		{name: "default", flag: defaultGCPercent, want: defaultGCPercent},
		{name: "given", flag: 50, want: 50},
		{name: "Go's default given", flag: 100, want: 100},
		{name: "GOGC wins", flag: 50, gogc: "200", want: 0},
		{name: "GOGC off wins", flag: 50, gogc: "off", want: 0},
		{name: "too low", flag: minGCPercent - 1, wantErr: true},
		{name: "negative", flag: -1, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := gcPercent(tc.flag, tc.gogc)
			if (err != nil) != tc.wantErr {
				t.Fatalf("gcPercent(%d, %q) error = %v, want error %v", tc.flag, tc.gogc, err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("gcPercent(%d, %q) = %d, want %d", tc.flag, tc.gogc, got, tc.want)
			}
		})
	}
}

// TestApplyGCPercent: the flag turns the headroom off for the start, whose goal is then the
// soft limit (startHeap), and returns the server's share of it, whose end sets the steady
// headroom, unless GOGC is set.
func TestApplyGCPercent(t *testing.T) {
	beforePct, beforeLimit := debug.SetGCPercent(100), debug.SetMemoryLimit(math.MaxInt64)
	defer func() { debug.SetGCPercent(beforePct); debug.SetMemoryLimit(beforeLimit) }()
	start, steady, err := applyGCPercent(40, "", logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	if got, limit := debug.SetGCPercent(-1), debug.SetMemoryLimit(-1); got != -1 || limit < minStartGoal || limit == math.MaxInt64 || steady != 40 {
		t.Errorf("GC percent %d and soft limit %d for the start, %d steady; want off, a limit and 40", got, limit, steady)
	}
	start.end()
	start.end() // a second end of one server's share is nothing
	if got, limit := debug.SetGCPercent(100), debug.SetMemoryLimit(-1); got != 40 || limit != math.MaxInt64 {
		t.Errorf("after the start GC percent %d and soft limit %d, want 40 and none", got, limit)
	}
	start, steady, err = applyGCPercent(40, "100", logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	if got := debug.SetGCPercent(100); got != 100 || steady != 0 || start != nil {
		t.Errorf("with GOGC set, GC percent %d and steady %d, want them unchanged (100) and none", got, steady)
	}
	start.end() // nothing to end
	start.listed(5)
}

// TestStartHeapGoal: the start's limit is the heap the announced objects will take grown by the
// headroom (at most the cap, and half a soft limit set before) until the live heap grown by the
// headroom passes it, plus what the runtime holds besides the heap; a small cluster's start is
// not given a large cluster's goal.
func TestStartHeapGoal(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name      string
		limit     int64
		live      uint64
		announced int64
		want      int64
	}{
		{name: "nothing announced", limit: math.MaxInt64, live: 0, want: minStartGoal + 10*mib},
		{name: "nothing announced, a live heap", limit: math.MaxInt64, live: 100 * mib, want: 155 * mib},
		{name: "18,500 objects", limit: math.MaxInt64, live: 10 * mib, announced: 18500, want: 18500*liveBytesPerObject*145/100 + 10*mib},
		{name: "200,000 objects: the cap", limit: math.MaxInt64, live: 100 * mib, announced: 200000, want: 512 * mib},
		{name: "live heap past the least goal", limit: math.MaxInt64, live: 400 * mib, announced: 200000, want: 590 * mib},
		{name: "under a limit, the cap halved", limit: 600 * mib, live: 100 * mib, announced: 200000, want: 300 * mib},
		{name: "under a limit, the headroom", limit: 600 * mib, live: 300 * mib, announced: 200000, want: 445 * mib},
		{name: "never above the limit", limit: 600 * mib, live: 500 * mib, announced: 200000, want: 600 * mib},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &startHeap{most: 512 * mib, limit: tc.limit, pct: 45}
			if got := h.goal(heapReading{live: tc.live, nonHeap: 10 * mib}, tc.announced); got != tc.want {
				t.Errorf("goal(%d MiB live, 10 MiB besides, %d announced) = %d, want %d", tc.live/mib, tc.announced, got, tc.want)
			}
		})
	}
}

// TestStartHeapFollowsTheLiveHeap: the soft limit follows the live heap and the announced
// objects while the start lasts, two servers of one process share the start and the last to end
// it restores the limit.
func TestStartHeapFollowsTheLiveHeap(t *testing.T) {
	beforePct, beforeLimit := debug.SetGCPercent(100), debug.SetMemoryLimit(math.MaxInt64)
	defer func() { debug.SetGCPercent(beforePct); debug.SetMemoryLimit(beforeLimit) }()
	h := beginStartHeap(1<<30, 50)
	other := beginStartHeap(1<<30, 50)
	if other != h {
		t.Fatal("a second server began a start goal of its own")
	}
	wait := func(ok func(int64) bool) int64 {
		deadline := time.Now().Add(5 * time.Second)
		for !ok(debug.SetMemoryLimit(-1)) && time.Now().Before(deadline) {
			time.Sleep(followEvery)
		}
		return debug.SetMemoryLimit(-1)
	}
	// The goal follows the live heap: above the 64 MiB kept grown by the headroom, near the live
	// heap and what the runtime holds besides it (which other goroutines of the test binary
	// move a little).
	keep := make([]byte, 64<<20)
	runtime.GC()
	got := wait(func(l int64) bool { return l >= 96<<20 })
	r := readHeap(heapSamples())
	if want := int64(r.live)*3/2 + int64(r.nonHeap); got < 96<<20 || got > want+want/10 {
		t.Fatalf("soft limit %d with %d live and %d besides the heap, want about %d", got, r.live, r.nonHeap, want)
	}
	runtime.KeepAlive(keep)
	// Announced objects raise it: 400,000 objects will take 800 MB, 1.2 GB with the headroom, at
	// most the cap.
	h.announced.Add(400000)
	if got := wait(func(l int64) bool { return l >= 1<<30 }); got < 1<<30 {
		t.Fatalf("soft limit %d with 400,000 objects announced, want at least the cap %d", got, 1<<30)
	}
	h.end(30)
	if got := debug.SetGCPercent(-1); got != -1 {
		t.Errorf("GC percent %d with one server still starting, want off", got)
	}
	other.end(30)
	if got, limit := debug.SetGCPercent(100), debug.SetMemoryLimit(-1); got != 30 || limit != math.MaxInt64 {
		t.Errorf("after the last start ended GC percent %d and soft limit %d, want 30 and none", got, limit)
	}
}

type syncedCache bool

func (c syncedCache) WaitForCacheSync(context.Context) bool { return bool(c) }

// TestSteadyHeadroomAfterTheStart: the start ends once the cache synced and the first audit
// ended (or its budget passed), not before, and never when the cache did not sync.
func TestSteadyHeadroomAfterTheStart(t *testing.T) {
	var ended atomic.Int32
	end := func() { ended.Add(1) }
	announced := func() int64 { return 0 }
	audit := make(chan struct{})
	h := steadyHeadroom{cache: syncedCache(true), audit: audit, budget: time.Hour, end: end, announced: announced, pct: 30, log: logr.Discard()}
	done := make(chan error)
	go func() { done <- h.Start(context.Background()) }()
	select {
	case <-done:
		t.Fatal("ended before the first audit ended")
	case <-time.After(50 * time.Millisecond):
	}
	if got := ended.Load(); got != 0 {
		t.Fatalf("the start ended %d times before the first audit ended, want 0", got)
	}
	close(audit)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := ended.Load(); got != 1 {
		t.Errorf("the start ended %d times after the first audit, want 1", got)
	}

	h = steadyHeadroom{cache: syncedCache(true), budget: time.Millisecond, end: end, announced: announced, pct: 30, log: logr.Discard(), audit: make(chan struct{})}
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := ended.Load(); got != 2 {
		t.Errorf("the start ended %d times after the budget, want 2", got)
	}

	h = steadyHeadroom{cache: syncedCache(false), end: end, announced: announced, pct: 30, log: logr.Discard()}
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := ended.Load(); got != 2 {
		t.Errorf("the start ended though the cache never synced (%d ends, want 2)", got)
	}
}
