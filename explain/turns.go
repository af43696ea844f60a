package explain

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/semaphore"
)

// This file bounds what the server's explanations take of its cores and memory: one is computed
// at a time, a few wait their turn, and the rest are told to ask again. A question waits for its
// plan of the pool (Plans.forClaim) and reads its claim's provisioner's Leases before it takes its
// turn, so that a caller whose question waits for a plan (a claim they just changed) holds up no
// one else's.

// Defaults of ServeOptions.Backlog and ServeOptions.BacklogWait.
const (
	defaultBacklog     = 8
	defaultBacklogWait = 30 * time.Second
)

// BusyError is a question the server will not wait to compute: as many questions already wait
// their turn as it keeps (ServeOptions.Backlog), or this one waited past ServeOptions.BacklogWait.
// The caller may ask again after RetryAfter.
type BusyError struct{ RetryAfter time.Duration }

func (e *BusyError) Error() string {
	return "the server is computing other explanations: ask again in a moment"
}

// turns are the explanations' one turn, taken in the order asked (semaphore.Weighted is FIFO).
type turns struct {
	sem     *semaphore.Weighted
	waiting atomic.Int64
	backlog int64
	wait    time.Duration
	// waited observes how long each question waited for its plan ("plan") and its turn ("turn").
	waited *prometheus.HistogramVec
}

func newTurns(o ServeOptions) *turns {
	t := &turns{sem: semaphore.NewWeighted(1), backlog: int64(o.Backlog), wait: o.BacklogWait,
		waited: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "pvguard_explain_wait_seconds",
			Help:    "How long an explanation waited for its plan of the pool (for=plan) and for its turn to be computed (for=turn).",
			Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}}, []string{"for"})}
	if t.backlog <= 0 {
		t.backlog = defaultBacklog
	}
	if t.wait <= 0 {
		t.wait = defaultBacklogWait
	}
	if o.Registry != nil {
		o.Registry.MustRegister(t.waited)
	}
	return t
}

// waitedFor records a wait of what ("plan", "turn") that began at start.
func (t *turns) waitedFor(what string, start time.Time) {
	t.waited.WithLabelValues(what).Observe(time.Since(start).Seconds())
}

// take waits for the turn, at most the backlog's wait and behind at most the backlog; it returns
// the function that gives the turn back.
func (t *turns) take(ctx context.Context) (func(), error) {
	start := time.Now()
	if !t.sem.TryAcquire(1) {
		if t.waiting.Add(1) > t.backlog {
			t.waiting.Add(-1)
			return nil, &BusyError{RetryAfter: time.Second}
		}
		wctx, cancel := context.WithTimeout(ctx, t.wait)
		err := t.sem.Acquire(wctx, 1)
		cancel()
		t.waiting.Add(-1)
		switch {
		case err != nil && ctx.Err() != nil:
			return nil, fmt.Errorf("waiting for a turn to explain: %w", ctx.Err())
		case err != nil:
			return nil, &BusyError{RetryAfter: time.Second}
		}
	}
	t.waitedFor("turn", start)
	return func() { t.sem.Release(1) }, nil
}
