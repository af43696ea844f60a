// Package cores keeps a core free for pvguard's admission reviews: its long computations (an
// explanation, the plan of the pool made for explanations, the binder's syncs and plans, the
// audits) hold a seat while they compute, and there is one seat fewer than GOMAXPROCS (at least
// one), so that a review arriving meanwhile finds a P that is not held. The first full audit after
// a start is not on a seat: spread over every core it meets its start-up target.
//
// Why: while goroutines that do not block hold every P, a goroutine made runnable waits until
// one of them is preempted, which the Go runtime does after 10 ms, and bytes that arrive on a
// connection meanwhile are not noticed before the runtime's monitor polls the network, also every
// 10 ms: a review then takes 10 to 40 ms instead of a fraction of one. Yielding does not help
// with the second wait (runtime.Gosched takes the yielding goroutine up again before the network
// is polled), and a pause on a timer costs a millisecond on an otherwise idle P (the network
// poller's timeout is in milliseconds). With a P left free, its thread waits in the network
// poller and takes up a review as it arrives (docs/benchmarks.md, "A core for the reviews").
//
// A seat is held while computing, not while waiting: a holder steps away from its seat around an
// API call (Away). Seats are taken per unit of work (one binder sync, one explanation, one plan,
// one block of a full audit's objects on each of its goroutines), in the order asked, and an
// explanation hands its seat to whoever waits after each millisecond of its work (Pacer), so that
// a flood of explanations cannot hold the binder's syncs back for longer than that. The audits
// are background work (Background): they wait for seats in turn, but an explanation does not
// hand its seat over to them, so that a periodic audit does not slow the explanations down.
package cores

import (
	"context"
	"runtime"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"
)

// Seats are the seats of one process's long computations. A nil *Seats has no bound: every Take
// goes on at once.
type Seats struct {
	sem     *semaphore.Weighted // FIFO: a seat handed back goes to the longest waiter
	waiting atomic.Int64
	// urgent counts the waiters a Pacer hands its seat over to: all but background work's.
	urgent atomic.Int64
}

// New makes n seats (at least one).
func New(n int) *Seats {
	return &Seats{sem: semaphore.NewWeighted(int64(max(n, 1)))}
}

// ForProcess makes one seat fewer than the process's GOMAXPROCS, at least one.
func ForProcess() *Seats { return New(runtime.GOMAXPROCS(0) - 1) }

type seatKey struct{}

// seat is a holder's seat, carried by its context.
type seat struct {
	s          *Seats
	held       bool
	background bool // work that can wait: no Pacer hands its seat over to it (Background)
}

// Take waits for a seat and returns a context that carries it (for Away and NewPacer) and the
// function that gives it back. When ctx ends first, the caller goes on without a seat (it is
// about to stop anyway).
func (s *Seats) Take(ctx context.Context) (context.Context, func()) { return s.hold(ctx, false) }

// Background is Take for work that can wait (the periodic audits): it waits for a seat in the
// same order as every holder, but a Pacer does not hand its seat over to it, so that an
// explanation's table runs at its own pace beside it rather than at a share of one seat.
func (s *Seats) Background(ctx context.Context) (context.Context, func()) { return s.hold(ctx, true) }

// hold is Take, or Background when background is set.
func (s *Seats) hold(ctx context.Context, background bool) (context.Context, func()) {
	if s == nil {
		return ctx, func() {}
	}
	st := &seat{s: s, background: background}
	st.take(ctx)
	return context.WithValue(ctx, seatKey{}, st), st.give
}

func (st *seat) take(ctx context.Context) {
	if st.s.sem.TryAcquire(1) {
		st.held = true
		return
	}
	st.s.waiting.Add(1)
	if !st.background {
		st.s.urgent.Add(1)
		defer st.s.urgent.Add(-1)
	}
	st.held = st.s.sem.Acquire(ctx, 1) == nil
	st.s.waiting.Add(-1)
}

func (st *seat) give() {
	if st.held {
		st.held = false
		st.s.sem.Release(1)
	}
}

// Turns is what background work spread over goroutines calls around each block of its work (a
// full audit's blocks of objects): each call waits for a seat (Background) and returns what
// gives it back. With nil seats a call takes nothing.
func (s *Seats) Turns(ctx context.Context) func() (give func()) {
	return func() func() {
		_, give := s.Background(ctx)
		return give
	}
}

// Waiting is how many holders wait for a seat now.
func (s *Seats) Waiting() int64 {
	if s == nil {
		return 0
	}
	return s.waiting.Load()
}

// Holding reports whether ctx carries a seat its holder holds now.
func Holding(ctx context.Context) bool {
	st, ok := ctx.Value(seatKey{}).(*seat)
	return ok && st.held
}

// Away gives back the seat ctx carries, if any, while its holder waits on something other than a
// core (an API call), and returns the function that takes a seat again.
func Away(ctx context.Context) (back func()) {
	st, ok := ctx.Value(seatKey{}).(*seat)
	if !ok || !st.held {
		return func() {}
	}
	st.give()
	return func() { st.take(ctx) }
}

// Every is how much work a Pacer lets go by before it hands its seat to a waiting holder.
const Every = time.Millisecond

// checkEvery is how many steps go by between two readings of the clock: a step is a loop's turn
// over one object (about a microsecond), a clock reading about 20 ns.
const checkEvery = 32

// Pacer hands the seat of a long computation (the one its context carries) to the next waiting
// holder after each Every of work, and waits for a seat again, so that a long computation (an
// explanation's table of every volume) holds up the short ones (the binder's syncs) for a
// millisecond, not for all of it. The computation calls Step once per unit of work (a volume). A
// Pacer belongs to one goroutine; a nil Pacer, or one without a seat in its context, does nothing.
type Pacer struct {
	ctx   context.Context
	st    *seat
	due   time.Time
	steps uint32
	now   func() time.Time // the clock (tests replace it)
}

// NewPacer paces the computation of ctx's seat.
func NewPacer(ctx context.Context) *Pacer {
	st, _ := ctx.Value(seatKey{}).(*seat)
	return &Pacer{ctx: ctx, st: st, now: time.Now}
}

// Step counts one unit of work; after each Every of it, if another holder waits for a seat (not
// background work's: Background), it hands over its own and waits its turn again.
func (p *Pacer) Step() {
	if p == nil || p.st == nil {
		return
	}
	if p.steps++; p.steps%checkEvery != 0 {
		return
	}
	now := p.now()
	switch {
	case p.due.IsZero():
	case now.Before(p.due):
		return
	case p.st.s.urgent.Load() > 0 && p.st.held:
		p.st.give()
		p.st.take(p.ctx)
		now = p.now()
	}
	p.due = now.Add(Every)
}
