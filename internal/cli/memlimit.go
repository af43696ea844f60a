package cli

import (
	"context"
	"fmt"
	"math"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/resource"
)

// memoryLimitShare is the part of the container's limit given to the Go heap: the rest is for
// what the Go runtime does not count (thread stacks, the binary, fragmentation).
const memoryLimitShare = 0.9

// memoryLimit returns the soft heap limit for a container limit (a Kubernetes quantity, or
// bytes as the downward API gives them), or 0 when none applies: no limit given, or GOMEMLIMIT
// set (the operator's own choice wins).
func memoryLimit(limit, gomemlimit string) (int64, error) {
	if limit == "" || gomemlimit != "" {
		return 0, nil
	}
	q, err := resource.ParseQuantity(limit)
	if err != nil {
		return 0, fmt.Errorf("--memory-limit %q: %w", limit, err)
	}
	if q.Sign() <= 0 {
		return 0, fmt.Errorf("--memory-limit %q: must be positive", limit)
	}
	return int64(float64(q.Value()) * memoryLimitShare), nil
}

// applyMemoryLimit sets the Go heap's soft limit from the container's (see memoryLimit).
func applyMemoryLimit(limit, gomemlimit string, log logr.Logger) error {
	soft, err := memoryLimit(limit, gomemlimit)
	if err != nil || soft == 0 {
		if gomemlimit != "" && limit != "" {
			log.Info("GOMEMLIMIT is set; --memory-limit left unused", "GOMEMLIMIT", gomemlimit)
		}
		return err
	}
	debug.SetMemoryLimit(soft)
	log.Info("Go heap soft limit set", "containerLimit", limit, "softLimitBytes", soft)
	return nil
}

// localReadMemoryLimit is the Go runtime's soft memory limit while `explain pvc` reads the
// cluster itself: the read holds the claims and volumes the binder could still plan and two
// pages of the lists (about 60 MB at 100,000 pairs, of which 15,000 are kept), and the
// collector's default headroom (GOGC 100) would let the heap grow to twice that before
// collecting, for a process that exits a second later. Near the limit the collector runs more
// often (about 5% more CPU at 100,000 pairs); a cluster whose kept objects outgrow it costs more
// collections, not a failure.
const localReadMemoryLimit = 120 << 20

// limitLocalReadMemory sets localReadMemoryLimit, unless GOMEMLIMIT is set (the user's own
// choice wins).
func limitLocalReadMemory(gomemlimit string) {
	if gomemlimit == "" {
		debug.SetMemoryLimit(localReadMemoryLimit)
	}
}

// defaultGCPercent is the collector's headroom pvguard runs with when neither --gc-percent nor
// GOGC says otherwise: a collection starts when the heap has grown by this share of the live
// heap. Go's default, 100, lets the heap in use settle near twice the live heap, and nearly all
// of pvguard's live heap is its cache, which does not turn over; 30 keeps the heap in use near
// 1.3 times it, for one more collection of the cache every few minutes at rest
// (docs/benchmarks.md, "The collector's headroom").
const defaultGCPercent = 30

// gcPercent returns the GOGC value to set from --gc-percent, or 0 to leave the runtime's: GOGC
// set in the environment (the operator's own choice wins).
func gcPercent(flag int, gogc string) (int, error) {
	if gogc != "" {
		return 0, nil
	}
	if flag < minGCPercent {
		return 0, fmt.Errorf("--gc-percent %d: must be at least %d (lower keeps the collector running; use GOGC for anything else)", flag, minGCPercent)
	}
	return flag, nil
}

// minGCPercent is the lowest --gc-percent: below it a cache of 100,000 pairs would be marked
// every few megabytes allocated.
const minGCPercent = 10

// applyGCPercent sets the collector's goal for the start (startHeap, over startGCPercent of
// gcPercent's headroom) and returns what ends it and sets the steady headroom (steady), which
// steadyHeadroom calls once the start is over (nil: the runtime's own, GOGC being set).
func applyGCPercent(flag int, gogc string, log logr.Logger) (endStart func(), steady int, err error) {
	pct, err := gcPercent(flag, gogc)
	if err != nil || pct == 0 {
		if gogc != "" && flag != defaultGCPercent {
			log.Info("GOGC is set; --gc-percent left unused", "GOGC", gogc)
		}
		return nil, 0, err
	}
	h := beginStartHeap(startHeapFloor, startGCPercent(pct))
	var once sync.Once
	return func() { once.Do(func() { h.end(pct) }) }, pct, nil
}

// startGCPercent is the headroom while the cache fills and the first full audit runs: half as
// much again as the steady one. The heap then grows from nothing to the cache's size, and at the
// steady headroom of 30 the collector ran about three times as often on the way up as at Go's
// default, each time marking what was already cached: at 100,000 pairs 7 s more CPU, 6.5 s more
// to ready and a first audit 0.4 s longer (docs/benchmarks.md, "The collector's headroom"). The
// start's headroom sets the peak: twice the steady one took it over 700 MiB with the binder on.
func startGCPercent(steady int) int { return steady * 3 / 2 }

// startHeapFloor is the least heap the collector lets the start reach before it collects: while
// the live heap is small a headroom in percent would have it collect every few megabytes the
// lists decode, each time marking everything cached so far. Below the peak the start reaches
// at 100,000 pairs with the headroom alone; halved under a container's limit (startHeap.goal).
const startHeapFloor = 512 << 20

// startHeap is the collector's goal while the cache fills: the larger of a floor and the live
// heap grown by its headroom, never above the soft limit set before (a container's: the floor is
// then at most half of it). Go has no least goal of its own, so the collector's headroom is off
// and the goal is the soft memory limit, which follow moves as the live heap grows; end restores
// the limit and sets the steady headroom.
type startHeap struct {
	floor, limit int64
	pct          int
	stop, done   chan struct{}
}

// startHeaps is the process's start goal: the collector's settings are the process's, and one
// process may run several servers (the end-to-end tests do), so the first server to begin the
// goal sets it and the last to end it restores the settings.
var startHeaps struct {
	sync.Mutex
	h *startHeap
	n int
}

// beginStartHeap sets the start's goal (floor and pct, the headroom above it) and follows the
// live heap until the last server that began it ends it.
func beginStartHeap(floor int64, pct int) *startHeap {
	startHeaps.Lock()
	defer startHeaps.Unlock()
	if startHeaps.n++; startHeaps.h == nil {
		h := &startHeap{floor: floor, limit: debug.SetMemoryLimit(-1), pct: pct, stop: make(chan struct{}), done: make(chan struct{})}
		debug.SetMemoryLimit(h.goal(0))
		debug.SetGCPercent(-1)
		go h.follow()
		startHeaps.h = h
	}
	return startHeaps.h
}

// goal is the heap the collector may let the start reach with live bytes live after the last
// collection.
func (h *startHeap) goal(live uint64) int64 {
	floor := h.floor
	if h.limit != math.MaxInt64 {
		floor = min(floor, h.limit/2)
	}
	return min(h.limit, max(floor, int64(live)*int64(100+h.pct)/100))
}

// followEvery is how often the start's goal follows the live heap, which changes only when a
// collection ends.
const followEvery = 20 * time.Millisecond

func (h *startHeap) follow() {
	defer close(h.done)
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	t := time.NewTicker(followEvery)
	defer t.Stop()
	last := h.goal(0)
	for {
		select {
		case <-h.stop:
			return
		case <-t.C:
		}
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindUint64 {
			continue
		}
		if g := h.goal(sample[0].Value.Uint64()); g != last {
			debug.SetMemoryLimit(g)
			last = g
		}
	}
}

// end stops following, puts the soft limit back as it was and sets the steady headroom pct, once
// every server that began the goal has ended it (each ends it once).
func (h *startHeap) end(pct int) {
	startHeaps.Lock()
	defer startHeaps.Unlock()
	if startHeaps.n--; startHeaps.n > 0 {
		return
	}
	startHeaps.h = nil
	close(h.stop)
	<-h.done
	debug.SetMemoryLimit(h.limit)
	debug.SetGCPercent(pct)
}

// steadyHeadroom ends the start's goal and sets the steady headroom once the start is over: the
// cache synced and the first full audit ended (audit nil: the audit is off), or budget after the
// sync; then it hands the memory the start held back to the system, so the steady RSS does not
// wait for the runtime's background scavenger.
type steadyHeadroom struct {
	cache  interface{ WaitForCacheSync(context.Context) bool }
	audit  <-chan struct{}
	budget time.Duration
	// end ends the start's goal and sets the steady headroom pct.
	end func()
	pct int
	log logr.Logger
}

func (steadyHeadroom) NeedLeaderElection() bool { return false }

func (h steadyHeadroom) Start(ctx context.Context) error {
	if !h.cache.WaitForCacheSync(ctx) {
		return nil
	}
	if h.audit != nil {
		t := time.NewTimer(h.budget)
		select {
		case <-h.audit:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	if ctx.Err() != nil {
		return nil
	}
	h.end()
	debug.FreeOSMemory()
	h.log.Info("collector's headroom set for the steady state", "gcPercent", h.pct)
	return nil
}
