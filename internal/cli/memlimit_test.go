package cli

import (
	"context"
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
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
// soft limit (startHeap), and returns what ends it and sets the steady headroom, unless GOGC is
// set.
func TestApplyGCPercent(t *testing.T) {
	beforePct, beforeLimit := debug.SetGCPercent(100), debug.SetMemoryLimit(math.MaxInt64)
	defer func() { debug.SetGCPercent(beforePct); debug.SetMemoryLimit(beforeLimit) }()
	end, steady, err := applyGCPercent(40, "", logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	if got, limit := debug.SetGCPercent(-1), debug.SetMemoryLimit(-1); got != -1 || limit < startHeapFloor || limit == math.MaxInt64 || steady != 40 {
		t.Errorf("GC percent %d and soft limit %d for the start, %d steady; want off, at least the floor and 40", got, limit, steady)
	}
	end()
	end() // a second end of one server's is nothing
	if got, limit := debug.SetGCPercent(100), debug.SetMemoryLimit(-1); got != 40 || limit != math.MaxInt64 {
		t.Errorf("after the start GC percent %d and soft limit %d, want 40 and none", got, limit)
	}
	end, steady, err = applyGCPercent(40, "100", logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	if got := debug.SetGCPercent(100); got != 100 || steady != 0 || end != nil {
		t.Errorf("with GOGC set, GC percent %d and steady %d, want them unchanged (100) and none", got, steady)
	}
}

// TestStartHeapGoal: the start's goal is the floor until the live heap grown by the headroom
// passes it, and never above a soft limit set before, under which the floor is at most half of it.
func TestStartHeapGoal(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name  string
		limit int64
		live  uint64
		want  int64
	}{
		{name: "empty heap", limit: math.MaxInt64, live: 0, want: 512 * mib},
		{name: "small live heap", limit: math.MaxInt64, live: 300 * mib, want: 512 * mib},
		{name: "live heap past the floor", limit: math.MaxInt64, live: 400 * mib, want: 580 * mib},
		{name: "under a limit, the floor halved", limit: 600 * mib, live: 100 * mib, want: 300 * mib},
		{name: "under a limit, the headroom", limit: 600 * mib, live: 300 * mib, want: 435 * mib},
		{name: "never above the limit", limit: 600 * mib, live: 500 * mib, want: 600 * mib},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &startHeap{floor: 512 * mib, limit: tc.limit, pct: 45}
			if got := h.goal(tc.live); got != tc.want {
				t.Errorf("goal(%d MiB) = %d MiB, want %d MiB", tc.live/mib, got/mib, tc.want/mib)
			}
		})
	}
}

// TestStartHeapFollowsTheLiveHeap: the soft limit follows the live heap while the start lasts,
// two servers of one process share the start and the last to end it restores the limit.
func TestStartHeapFollowsTheLiveHeap(t *testing.T) {
	beforePct, beforeLimit := debug.SetGCPercent(100), debug.SetMemoryLimit(math.MaxInt64)
	defer func() { debug.SetGCPercent(beforePct); debug.SetMemoryLimit(beforeLimit) }()
	const floor = 1 << 20 // below any test binary's live heap: the headroom sets the goal
	h := beginStartHeap(floor, 50)
	other := beginStartHeap(floor, 50)
	if other != h {
		t.Fatal("a second server began a start goal of its own")
	}
	// The goal follows the live heap: above the 64 MiB kept grown by the headroom, and near the
	// live heap the runtime reports (which other goroutines of the test binary move a little).
	keep := make([]byte, 64<<20)
	runtime.GC()
	deadline := time.Now().Add(5 * time.Second)
	for debug.SetMemoryLimit(-1) < 96<<20 && time.Now().Before(deadline) {
		time.Sleep(followEvery)
	}
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(sample)
	live := int64(sample[0].Value.Uint64())
	if got := debug.SetMemoryLimit(-1); got < 96<<20 || got > live*3/2+live/10 {
		t.Fatalf("soft limit %d with %d live, want 1.5 times the live heap", got, live)
	}
	runtime.KeepAlive(keep)
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
	audit := make(chan struct{})
	h := steadyHeadroom{cache: syncedCache(true), audit: audit, budget: time.Hour, end: end, pct: 30, log: logr.Discard()}
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

	h = steadyHeadroom{cache: syncedCache(true), budget: time.Millisecond, end: end, pct: 30, log: logr.Discard(), audit: make(chan struct{})}
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := ended.Load(); got != 2 {
		t.Errorf("the start ended %d times after the budget, want 2", got)
	}

	h = steadyHeadroom{cache: syncedCache(false), end: end, pct: 30, log: logr.Discard()}
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := ended.Load(); got != 2 {
		t.Errorf("the start ended though the cache never synced (%d ends, want 2)", got)
	}
}
