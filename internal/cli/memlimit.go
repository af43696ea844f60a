package cli

import (
	"fmt"
	"runtime/debug"

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

// applyGCPercent sets the collector's headroom (see gcPercent).
func applyGCPercent(flag int, gogc string, log logr.Logger) error {
	pct, err := gcPercent(flag, gogc)
	if err != nil || pct == 0 {
		if gogc != "" && flag != defaultGCPercent {
			log.Info("GOGC is set; --gc-percent left unused", "GOGC", gogc)
		}
		return err
	}
	debug.SetGCPercent(pct)
	return nil
}
