package webhook

import (
	"context"
	"errors"

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
