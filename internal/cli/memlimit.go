package cli

import (
	"context"
	"fmt"
	"math"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
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
// gcPercent's headroom) and returns the server's share of it, whose end sets the steady headroom
// (steady) once the start is over (nil: the runtime's own, GOGC being set).
func applyGCPercent(flag int, gogc string, log logr.Logger) (start *serverStart, steady int, err error) {
	pct, err := gcPercent(flag, gogc)
	if err != nil || pct == 0 {
		if gogc != "" && flag != defaultGCPercent {
			log.Info("GOGC is set; --gc-percent left unused", "GOGC", gogc)
		}
		return nil, 0, err
	}
	return &serverStart{h: beginStartHeap(startHeapCap, startGCPercent(pct)), pct: pct}, pct, nil
}

// serverStart is one server's share of the start's goal.
type serverStart struct {
	h    *startHeap
	pct  int
	once sync.Once
}

// end ends the server's share of the start's goal (once; nil: none); the last share's end sets
// the steady headroom.
func (s *serverStart) end() {
	if s != nil {
		s.once.Do(func() { s.h.end(s.pct) })
	}
}

// announced is how many objects the informers' first lists announced so far.
func (s *serverStart) announced() int64 {
	if s == nil {
		return 0
	}
	return s.h.announced.Load()
}

// listed counts the objects an informer's first list announces (cachelist.CutWhereListed).
func (s *serverStart) listed(n int64) {
	if s != nil {
		s.h.announced.Add(n)
	}
}

// startGCPercent is the headroom while the cache fills and the first full audit runs: half as
// much again as the steady one. The heap then grows from nothing to the cache's size, and at the
// steady headroom of 30 the collector ran about three times as often on the way up as at Go's
// default, each time marking what was already cached: at 100,000 pairs 7 s more CPU, 6.5 s more
// to ready and a first audit 0.4 s longer (docs/benchmarks.md, "The collector's headroom"). The
// start's headroom sets the peak: twice the steady one took it over 700 MiB with the binder on.
func startGCPercent(steady int) int { return steady * 3 / 2 }

// startHeapCap bounds the start's least goal (startHeap.goal), the runtime's memory besides the
// heap included; halved under a container's limit.
const startHeapCap = 512 << 20

// liveBytesPerObject is the live heap a cached object and its share of the indexes and the
// audit's results take: 364 MB for 185,000 volumes and claims at 100,000 pairs
// (docs/benchmarks.md, "What the cache keeps"). The start's least goal is the heap the objects
// its lists announce will take, grown by the start's headroom.
const liveBytesPerObject = 2000

// startHeap is the collector's goal while the cache fills: the larger of the live heap grown by
// its headroom and the heap the objects the informers' first lists announce will take once
// cached, grown likewise (at most startHeapCap, or half the soft limit set before), and never
// above that limit. While the live heap is small, a headroom in percent has the collector run
// every few megabytes the lists decode, each run marking everything cached so far; the announced
// size lets it wait for the heap the cache will reach anyway. Go has no least goal of its own,
// so the collector's headroom is off and the goal is the soft memory limit (plus what the
// runtime holds besides the heap, which the limit counts too), which follow moves; end restores
// the limit and sets the steady headroom.
type startHeap struct {
	most, limit int64
	pct         int
	// announced counts the objects the informers' first lists hold (listed).
	announced  atomic.Int64
	stop, done chan struct{}
}

// startHeaps is the process's start goal: the collector's settings are the process's, and one
// process may run several servers (the end-to-end tests do), so the first server to begin the
// goal sets it and the last to end it restores the settings.
var startHeaps struct {
	sync.Mutex
	h *startHeap
	n int
}

// beginStartHeap sets the start's goal (its least part at most most; pct, the headroom) and
// follows the live heap until the last server that began it ends it.
func beginStartHeap(most int64, pct int) *startHeap {
	startHeaps.Lock()
	defer startHeaps.Unlock()
	if startHeaps.n++; startHeaps.h == nil {
		h := &startHeap{most: most, limit: debug.SetMemoryLimit(-1), pct: pct, stop: make(chan struct{}), done: make(chan struct{})}
		debug.SetMemoryLimit(h.limitFor(readHeap(heapSamples())))
		debug.SetGCPercent(-1)
		go h.follow()
		startHeaps.h = h
	}
	return startHeaps.h
}

// minStartGoal is the least goal before anything is announced: Go's own least heap.
const minStartGoal = 4 << 20

// goal is the soft limit that has the collector let the start's heap reach its goal, with r read
// of the runtime and announced objects announced: the limit counts the runtime's memory besides
// the heap (r.nonHeap) too. The announced objects' part is at most the cap (half a limit set
// before), all of it counted; never above the limit set before.
func (h *startHeap) goal(r heapReading, announced int64) int64 {
	nonHeap := int64(r.nonHeap)
	least := min(h.most, announced*liveBytesPerObject*int64(100+h.pct)/100+nonHeap)
	if h.limit != math.MaxInt64 {
		least = min(least, h.limit/2)
	}
	return min(h.limit, max(minStartGoal+nonHeap, least, int64(r.live)*int64(100+h.pct)/100+nonHeap))
}

// heapReading is what follow reads of the runtime: the live heap after the last collection, and
// the memory the soft limit counts besides the heap.
type heapReading struct{ live, nonHeap uint64 }

var heapMetrics = [...]string{"/gc/heap/live:bytes", "/memory/classes/total:bytes", "/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/unused:bytes", "/memory/classes/heap/free:bytes", "/memory/classes/heap/released:bytes"}

// heapSamples are the samples readHeap reads, named.
func heapSamples() []metrics.Sample {
	samples := make([]metrics.Sample, len(heapMetrics))
	for i, name := range heapMetrics {
		samples[i].Name = name
	}
	return samples
}

// readHeap reads samples (heapSamples), reused from one reading to the next.
func readHeap(samples []metrics.Sample) heapReading {
	metrics.Read(samples)
	var v [len(heapMetrics)]uint64
	for i, sm := range samples {
		if sm.Value.Kind() == metrics.KindUint64 {
			v[i] = sm.Value.Uint64()
		}
	}
	r := heapReading{live: v[0]}
	if heap := v[2] + v[3] + v[4] + v[5]; v[1] > heap {
		r.nonHeap = v[1] - heap
	}
	return r
}

// limitFor is the soft limit for r (goal).
func (h *startHeap) limitFor(r heapReading) int64 { return h.goal(r, h.announced.Load()) }

// followEvery is how often the start's goal follows the live heap and the announced objects.
const followEvery = 20 * time.Millisecond

func (h *startHeap) follow() {
	defer close(h.done)
	samples := heapSamples()
	t := time.NewTicker(followEvery)
	defer t.Stop()
	last := int64(-1)
	for {
		select {
		case <-h.stop:
			return
		case <-t.C:
		}
		if l := h.limitFor(readHeap(samples)); l != last {
			debug.SetMemoryLimit(l)
			last = l
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
	// end ends the server's share of the start's goal and sets the steady headroom pct;
	// announced says how many objects the informers' first lists announced.
	end       func()
	announced func() int64
	pct       int
	log       logr.Logger
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
	h.log.Info("collector's headroom set for the steady state", "gcPercent", h.pct, "objectsListsAnnounced", h.announced())
	return nil
}
