// Package leaseguard keeps a leader's writes inside the time it provably holds its Lease.
//
// client-go's leader election tells a replica it lost the Lease only when a renewal fails for the
// renew deadline. A replica frozen past its Lease (a long GC pause, a throttled container, a
// frozen VM, SIGSTOP) has a stale view when it wakes, and until its election loop notices, it
// would go on writing from that view while another replica already leads. A Guard judges instead,
// just before each write, from the time of the last renewal that succeeded: the other replicas
// take the Lease no sooner than the lease duration after they saw that renewal, so a replica
// writes only within the renew deadline of its own last renewal, measured on the monotonic clock
// (which runs on while the process is stopped).
package leaseguard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// ErrLeaseLost is returned for a write attempted outside the time the Lease is known to be held.
var ErrLeaseLost = errors.New("this replica no longer provably holds the leader Lease")

// Guard wraps the leader election's lock: it records when a renewal by this replica succeeded,
// and tells whether a write may be made now.
type Guard struct {
	resourcelock.Interface
	// window is how long after the start of a successful renewal a write may be made.
	window time.Duration
	now    func() time.Time

	mu      sync.Mutex
	renewed time.Time // start of the last successful acquire or renewal by this replica; zero when not leading
}

// New wraps lock. window is the time after a successful renewal in which writes may be made: the
// renew deadline, which is shorter than the lease duration (the difference absorbs the rates of
// the replicas' clocks) and after which the election loop stands down in any case.
func New(lock resourcelock.Interface, window time.Duration) *Guard {
	return &Guard{Interface: lock, window: window, now: time.Now}
}

// Create records an acquisition of a Lease that did not exist.
func (g *Guard) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	start := g.now()
	err := g.Interface.Create(ctx, ler)
	g.record(start, ler, err)
	return err
}

// Update records an acquisition or renewal; a release (another holder, or none) ends the time
// writes may be made.
func (g *Guard) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	start := g.now()
	err := g.Interface.Update(ctx, ler)
	g.record(start, ler, err)
	return err
}

func (g *Guard) record(start time.Time, ler resourcelock.LeaderElectionRecord, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case err != nil:
		// A failed renewal proves nothing either way: the last one that succeeded still counts.
	case ler.HolderIdentity == g.Interface.Identity():
		// The other replicas saw this renewal no sooner than it was sent, so the Lease is held
		// for at least the lease duration from start on their clocks.
		g.renewed = start
	default:
		g.renewed = time.Time{}
	}
}

// Check returns nil while this replica provably holds the Lease, else an error wrapping
// ErrLeaseLost that says since when it does not.
func (g *Guard) Check() error {
	g.mu.Lock()
	renewed := g.renewed
	g.mu.Unlock()
	if renewed.IsZero() {
		return fmt.Errorf("%w: not leading", ErrLeaseLost)
	}
	if age := g.now().Sub(renewed); age >= g.window {
		return fmt.Errorf("%w: last renewed %s ago, writes are allowed for %s after a renewal", ErrLeaseLost, age.Round(time.Millisecond), g.window)
	}
	return nil
}

// RoundTripper refuses, without sending it, any request but a read while Check fails. It is the
// last check before a write goes on the wire: after the client's rate limiter, which may hold a
// request for longer than the Lease lasts.
func (g *Guard) RoundTripper(rt http.RoundTripper) http.RoundTripper {
	return roundTripper{g: g, rt: rt}
}

type roundTripper struct {
	g  *Guard
	rt http.RoundTripper
}

func (t roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
	default:
		if err := t.g.Check(); err != nil {
			return nil, fmt.Errorf("%s %s: %w", req.Method, req.URL.Path, err)
		}
	}
	return t.rt.RoundTrip(req)
}
