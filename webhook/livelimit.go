package webhook

import (
	"context"
	"errors"
	"sync"

	"golang.org/x/time/rate"
	"k8s.io/client-go/util/flowcontrol"
)

// NewLiveReadRateLimiter is the token bucket of the webhooks' live reads (a rest.Config's
// RateLimiter): client-go's (flowcontrol.NewTokenBucketRateLimiter), except that the live re-read
// confirming a denial (Validator.recheck, which marks its context) takes a token only if one is
// there at once, and otherwise fails without waiting, so that the denial stands on the cache.
//
// A re-read only confirms what the cache already decided; waiting for a token would make each
// review of a flood hold its seat, and queue every other requester's re-reads behind the
// flood's, for the length of the backlog. Reads a review cannot do without (an object missing
// from the cache) still wait, bounded by the review's deadline: client-go's bucket reserves a
// token only if it is due before the context's deadline, and otherwise fails at once without
// taking one.
func NewLiveReadRateLimiter(qps float32, burst int) flowcontrol.RateLimiter {
	return liveReadLimiter{flowcontrol.NewTokenBucketRateLimiter(qps, burst)}
}

type liveReadLimiter struct{ flowcontrol.RateLimiter }

// errNoToken is the live re-read's failure when its bucket has no token at once.
var errNoToken = errors.New("no live-read token at once for a re-read")

type rereadKey struct{}

// asReread marks ctx as a live re-read's.
func asReread(ctx context.Context) context.Context { return context.WithValue(ctx, rereadKey{}, true) }

func (l liveReadLimiter) Wait(ctx context.Context) error {
	if ctx.Value(rereadKey{}) != nil {
		if l.TryAccept() {
			return nil
		}
		return errNoToken
	}
	return l.RateLimiter.Wait(ctx)
}

// DefaultRereadsPerRequester is --live-rereads-per-requester's default: a requester's denials
// re-read live per second (twice as many at once), a fifth of the live reads' default bucket, so
// that no one requester's denials drain the shared bucket and leave everyone else's on the cache.
const DefaultRereadsPerRequester = 10

// maxRereaders bounds the requesters whose allowances are kept; beyond it they start afresh, as
// a flood of made-up names must not grow pvguard's memory.
const maxRereaders = 10000

// rereadShares is each requester's allowance of live re-reads: a requester past it has its
// denials stand on the cache at once, without taking a token of the shared bucket.
type rereadShares struct {
	limit rate.Limit
	burst int

	mu    sync.Mutex
	byWho map[string]*rate.Limiter
}

func newRereadShares(perSecond float64) *rereadShares {
	if perSecond <= 0 {
		perSecond = DefaultRereadsPerRequester
	}
	return &rereadShares{limit: rate.Limit(perSecond), burst: max(1, int(2*perSecond)), byWho: map[string]*rate.Limiter{}}
}

// allow reports whether requester may re-read a denial now, and counts it if so.
func (s *rereadShares) allow(requester string) bool {
	s.mu.Lock()
	l := s.byWho[requester]
	if l == nil {
		if len(s.byWho) >= maxRereaders {
			clear(s.byWho)
		}
		l = rate.NewLimiter(s.limit, s.burst)
		s.byWho[requester] = l
	}
	s.mu.Unlock()
	return l.Allow()
}
