package webhook

import (
	"container/list"
	"context"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// FairQueueOptions size the fair queue of admission reviews.
type FairQueueOptions struct {
	// Concurrency is how many reviews are judged at once (the seats).
	Concurrency int
	// PerRequester is how many seats one requester may hold at once: less than Concurrency, so
	// that a requester whose reviews are slow (each waiting out its live-read budget) cannot hold
	// every seat and another requester's review always finds one.
	PerRequester int
	// QueueLength is how many reviews of one requester may wait; a review beyond it is refused
	// at once.
	QueueLength int
	// MaxWaiting is how many reviews may wait in all; a review beyond it is refused at once.
	MaxWaiting int
	// MaxWaitingBytes bounds the bodies of the reviews waiting in all (0: no bound beyond
	// MaxWaiting reviews of at most maxReviewBytes each); a requester's waiting bodies get the
	// share QueueLength has of MaxWaiting, so that one requester's large objects cannot take
	// the memory others' reviews wait in.
	MaxWaitingBytes int64
}

// DefaultFairQueueOptions are the defaults of --review-concurrency,
// --review-concurrency-per-requester, --review-queue-length and --review-max-waiting.
func DefaultFairQueueOptions() FairQueueOptions {
	return FairQueueOptions{Concurrency: 32, PerRequester: 16, QueueLength: 50, MaxWaiting: 500, MaxWaitingBytes: 256 << 20}
}

// FairQueue queues admission reviews per requester (the review's userInfo.username) before any
// rule runs, and hands a bounded number of seats to the requesters with waiting reviews: each free
// seat goes to the oldest review of the requester holding the fewest seats at the moment (ties in
// round robin). A requester that sends hundreds of reviews at once fills its own queue and waits
// its turns, while another requester's review is dispatched at the next free seat. A requester
// holds at most PerRequester seats.
//
// k8s.io/apiserver's fair queuing (fairqueuing/queueset, API Priority and Fairness) was the first
// choice and is not used: its package links its metrics package, which links the apiserver's
// storage layer (the etcd v3 client) and component-base's metrics test utilities into the pvguard
// binary, and reports into component-base's global registry. Its shuffle sharding solves a
// problem pvguard does not have (a fixed number of queues for unboundedly many flows): here a
// requester's queue exists only while it has reviews waiting or being judged, and MaxWaiting
// bounds them all.
type FairQueue struct {
	o       FairQueueOptions
	metrics *queueMetrics

	mu           sync.Mutex
	free         int              // seats not held
	waiting      int              // reviews waiting, all requesters
	waitingBytes int64            // their bodies' sizes
	flows        map[string]*flow // requesters with reviews waiting or judged
	turns        *list.List       // of *flow with reviews waiting, in round-robin order
	next         *list.Element    // the flow whose turn is next
}

// flow is one requester's queue.
type flow struct {
	name    string
	held    int        // seats held
	bytes   int64      // the sizes of its waiting reviews' bodies
	waiters *list.List // of *waiter, oldest first
	turn    *list.Element
}

type waiter struct {
	ready   chan struct{} // closed when the waiter is given a seat
	granted bool
	size    int64
}

// NewFairQueue builds the queue; its gauges and counters register with reg (nil: none).
func NewFairQueue(o FairQueueOptions, reg prometheus.Registerer) (*FairQueue, error) {
	if o.Concurrency < 1 || o.PerRequester < 1 || o.PerRequester > o.Concurrency || o.QueueLength < 1 || o.MaxWaiting < o.QueueLength || o.MaxWaitingBytes < 0 {
		return nil, fmt.Errorf("fair queue: want concurrency %d >= seats per requester %d >= 1, waiting in all %d >= queue length %d >= 1 and waiting bytes %d >= 0",
			o.Concurrency, o.PerRequester, o.MaxWaiting, o.QueueLength, o.MaxWaitingBytes)
	}
	return &FairQueue{o: o, metrics: newQueueMetrics(reg), free: o.Concurrency, flows: map[string]*flow{}, turns: list.New()}, nil
}

// Queue outcomes: why a review was not judged.
const (
	queueFull    = "queue-full" // its queue (or all queues) was full when it arrived
	queueTimeout = "time-out"   // it waited past its budget (waitCtx ended)
)

// Do runs fn in a seat once the requester's turn comes, and reports "" when it ran. It does not
// run fn, and reports why, when the requester's queue or the queue as a whole is full, or when
// waitCtx ends before a seat is free (the review's budget for waiting; fn's own work is bounded
// by the context it closes over).
func (q *FairQueue) Do(waitCtx context.Context, requester string, fn func()) (refused string) {
	return q.DoSized(waitCtx, requester, 0, fn)
}

// DoSized is Do for a review whose body is size bytes: it may wait only while the bodies waiting,
// of all requesters and of this one, stay within MaxWaitingBytes and the requester's share of it.
func (q *FairQueue) DoSized(waitCtx context.Context, requester string, size int64, fn func()) (refused string) {
	q.mu.Lock()
	f := q.flows[requester]
	if f == nil {
		f = &flow{name: requester, waiters: list.New()}
		q.flows[requester] = f
	}
	// A free seat means nobody who may take one is waiting (release hands seats to waiters).
	if q.free > 0 && f.held < q.o.PerRequester && f.waiters.Len() == 0 {
		q.take(f)
		q.mu.Unlock()
		q.run(f, fn)
		return ""
	}
	if f.waiters.Len() >= q.o.QueueLength || q.waiting >= q.o.MaxWaiting || !q.bytesFit(f, size) {
		q.forgetIfIdle(f)
		q.mu.Unlock()
		q.metrics.refused.WithLabelValues(queueFull).Inc()
		return queueFull
	}
	w := &waiter{ready: make(chan struct{}), size: size}
	e := f.waiters.PushBack(w)
	f.bytes += size
	q.waitingBytes += size
	if f.turn == nil {
		f.turn = q.turns.PushBack(f)
	}
	q.waiting++
	q.metrics.waiting.Inc()
	q.mu.Unlock()

	select {
	case <-w.ready:
		q.run(f, fn)
		return ""
	case <-waitCtx.Done():
	}
	q.mu.Lock()
	if w.granted { // given a seat as the wait ended: use it, the review still has its time
		q.mu.Unlock()
		q.run(f, fn)
		return ""
	}
	f.waiters.Remove(e)
	f.bytes -= w.size
	q.waitingBytes -= w.size
	q.waiting--
	q.metrics.waiting.Dec()
	if f.waiters.Len() == 0 {
		q.leaveTurns(f)
	}
	q.forgetIfIdle(f)
	q.mu.Unlock()
	q.metrics.refused.WithLabelValues(queueTimeout).Inc()
	return queueTimeout
}

// bytesFit reports whether a review of size bytes may wait: the waiting bodies in all stay within
// MaxWaitingBytes and f's within its share (QueueLength/MaxWaiting of it). A review is always
// let wait when f has nothing waiting and the whole bound holds it, so that one large review is
// never refused for its size alone. q.mu is held.
func (q *FairQueue) bytesFit(f *flow, size int64) bool {
	if q.o.MaxWaitingBytes == 0 {
		return true
	}
	if q.waitingBytes+size > q.o.MaxWaitingBytes {
		return false
	}
	share := q.o.MaxWaitingBytes * int64(q.o.QueueLength) / int64(q.o.MaxWaiting)
	return f.waiters.Len() == 0 || f.bytes+size <= share
}

// run runs fn in the seat f holds, then hands the seat on.
func (q *FairQueue) run(f *flow, fn func()) {
	q.metrics.executing.Inc()
	defer func() {
		q.metrics.executing.Dec()
		q.release(f)
	}()
	fn()
}

// take gives f a seat; q.mu is held.
func (q *FairQueue) take(f *flow) {
	q.free--
	f.held++
}

// release returns f's seat and hands free seats to the next waiters in turn.
func (q *FairQueue) release(f *flow) {
	q.mu.Lock()
	defer q.mu.Unlock()
	f.held--
	q.free++
	q.forgetIfIdle(f)
	for q.free > 0 && q.dispatchOne() {
	}
}

// dispatchOne gives a seat to the oldest waiter of the waiting flow that holds the fewest seats
// (the least served at the moment; ties in round-robin order from the cursor), among those that
// may hold another, and reports false when none may. q.mu is held.
func (q *FairQueue) dispatchOne() bool {
	var best *list.Element
	e := q.next
	for range q.turns.Len() {
		if e == nil {
			e = q.turns.Front()
		}
		if f := e.Value.(*flow); f.held < q.o.PerRequester && (best == nil || f.held < best.Value.(*flow).held) {
			best = e
		}
		e = e.Next()
	}
	if best == nil {
		return false
	}
	f := best.Value.(*flow)
	q.next = best.Next()
	w := f.waiters.Remove(f.waiters.Front()).(*waiter)
	f.bytes -= w.size
	q.waitingBytes -= w.size
	q.waiting--
	q.metrics.waiting.Dec()
	if f.waiters.Len() == 0 {
		q.leaveTurns(f)
	}
	q.take(f)
	w.granted = true
	close(w.ready)
	return true
}

// leaveTurns takes f, which has nobody waiting, out of the round robin. q.mu is held.
func (q *FairQueue) leaveTurns(f *flow) {
	if f.turn == nil {
		return
	}
	if q.next == f.turn {
		q.next = f.turn.Next()
	}
	q.turns.Remove(f.turn)
	f.turn = nil
}

// forgetIfIdle drops f when it has nothing waiting or judged, so that the flows are only the
// requesters of the moment. q.mu is held.
func (q *FairQueue) forgetIfIdle(f *flow) {
	if f.held == 0 && f.waiters.Len() == 0 {
		delete(q.flows, f.name)
	}
}

// queueMetrics are the fair queue's: reviews waiting and being judged, and reviews refused.
type queueMetrics struct {
	waiting, executing prometheus.Gauge
	refused            *prometheus.CounterVec
}

func newQueueMetrics(reg prometheus.Registerer) *queueMetrics {
	m := &queueMetrics{
		waiting: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pvguard_admission_reviews_waiting",
			Help: "Admission reviews waiting in the fair queue for a seat.",
		}),
		executing: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pvguard_admission_reviews_executing",
			Help: "Admission reviews holding a seat of the fair queue (being judged).",
		}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pvguard_admission_queue_refusals_total",
			Help: "Admission reviews refused unjudged because the requester's queue, or the queue as a whole, was full (queue-full) or because the review waited past its budget (time-out); each was answered with HTTP 429, so the registration's failure policy decided.",
		}, []string{"reason"}),
	}
	if reg != nil {
		reg.MustRegister(m.waiting, m.executing, m.refused)
	}
	return m
}
