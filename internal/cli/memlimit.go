package cli

import (
	"context"
	"fmt"
	"runtime/debug"
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

// applyGCPercent sets the collector's headroom for the start (startGCPercent of gcPercent's) and
// returns the steady one, which steadyHeadroom sets once the start is over (0: the runtime's own,
// GOGC being set).
func applyGCPercent(flag int, gogc string, log logr.Logger) (int, error) {
	pct, err := gcPercent(flag, gogc)
	if err != nil || pct == 0 {
		if gogc != "" && flag != defaultGCPercent {
			log.Info("GOGC is set; --gc-percent left unused", "GOGC", gogc)
		}
		return 0, err
	}
	debug.SetGCPercent(startGCPercent(pct))
	return pct, nil
}

// startGCPercent is the headroom while the cache fills and the first full audit runs: half as
// much again as the steady one. The heap then grows from nothing to the cache's size, and at the
// steady headroom of 30 the collector ran about three times as often on the way up as at Go's
// default, each time marking what was already cached: at 100,000 pairs 7 s more CPU, 6.5 s more
// to ready and a first audit 0.4 s longer (docs/benchmarks.md, "The collector's headroom"). The
// start's headroom sets the peak: twice the steady one took it over 700 MiB with the binder on.
func startGCPercent(steady int) int { return steady * 3 / 2 }

// steadyHeadroom sets the steady headroom once the start is over: the cache synced and the first
// full audit ended (audit nil: the audit is off), or budget after the sync; then it hands the
// memory the start's headroom held back to the system, so the steady RSS does not wait for the
// runtime's background scavenger.
type steadyHeadroom struct {
	cache  interface{ WaitForCacheSync(context.Context) bool }
	audit  <-chan struct{}
	budget time.Duration
	pct    int
	log    logr.Logger
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
	debug.SetGCPercent(h.pct)
	debug.FreeOSMemory()
	h.log.Info("collector's headroom set for the steady state", "gcPercent", h.pct)
	return nil
}
