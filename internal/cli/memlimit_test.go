package cli

import (
	"context"
	"math"
	"time"

	"runtime/debug"
	"testing"

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

// TestApplyGCPercent: the flag sets half as much again as its headroom for the start and returns
// the steady one, unless GOGC is set.
func TestApplyGCPercent(t *testing.T) {
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)
	steady, err := applyGCPercent(40, "", logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	if got := debug.SetGCPercent(100); got != 60 || steady != 40 {
		t.Errorf("GC percent %d for the start, %d steady; want 60 and 40", got, steady)
	}
	steady, err = applyGCPercent(40, "100", logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	if got := debug.SetGCPercent(100); got != 100 || steady != 0 {
		t.Errorf("with GOGC set, GC percent %d and steady %d, want them unchanged (100) and none", got, steady)
	}
}

type syncedCache bool

func (c syncedCache) WaitForCacheSync(context.Context) bool { return bool(c) }

// TestSteadyHeadroomAfterTheStart: the steady headroom is set once the cache synced and the first
// audit ended (or its budget passed), not before, and never when the cache did not sync.
func TestSteadyHeadroomAfterTheStart(t *testing.T) {
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)
	audit := make(chan struct{})
	h := steadyHeadroom{cache: syncedCache(true), audit: audit, budget: time.Hour, pct: 30, log: logr.Discard()}
	done := make(chan error)
	debug.SetGCPercent(60)
	go func() { done <- h.Start(context.Background()) }()
	select {
	case <-done:
		t.Fatal("set before the first audit ended")
	case <-time.After(50 * time.Millisecond):
	}
	if got := debug.SetGCPercent(60); got != 60 {
		t.Fatalf("GC percent %d before the first audit ended, want the start's 60", got)
	}
	close(audit)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := debug.SetGCPercent(100); got != 30 {
		t.Errorf("GC percent %d after the first audit, want 30", got)
	}

	debug.SetGCPercent(60)
	h = steadyHeadroom{cache: syncedCache(true), budget: time.Millisecond, pct: 30, log: logr.Discard(), audit: make(chan struct{})}
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := debug.SetGCPercent(100); got != 30 {
		t.Errorf("GC percent %d after the budget, want 30", got)
	}

	debug.SetGCPercent(60)
	h = steadyHeadroom{cache: syncedCache(false), pct: 30, log: logr.Discard()}
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := debug.SetGCPercent(100); got != 60 {
		t.Errorf("GC percent %d though the cache never synced, want the start's 60", got)
	}
}
