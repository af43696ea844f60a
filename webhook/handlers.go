package webhook

import (
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/pvguard/pvguard/policy"
)

// Limits bound what one review may take: how long it may wait for a seat and how long a denial's
// live re-read may take (docs/reliability.md, "Floods").
type Limits struct {
	// Queue, when set, queues every review fairly per requester before any rule runs.
	Queue *FairQueue
	// LiveReadBudget bounds the live re-read that confirms a decision judged on the cache
	// (FreshViewSource), the wait for its client's rate limiter included; when it is spent the
	// cache's decision stands. 0 means DefaultLiveReadBudget.
	LiveReadBudget time.Duration
	// RereadsPerRequester is each requester's allowance of live re-reads a second (twice as many
	// at once); past it the requester's decisions stand on the cache. 0 means
	// DefaultRereadsPerRequester.
	RereadsPerRequester float64
}

// DefaultLiveReadBudget is --live-read-budget's default: an eighth of the chart's 2 s webhook
// timeout.
const DefaultLiveReadBudget = 250 * time.Millisecond

// Handlers are pvguard's admission endpoints by path, for the server to mount (internal/web,
// POST only): a handler for each of Registrations, validating or mutating the registration's
// kind, each judging with the engine and the view of the moment within the limits and counting
// into metrics (nil: none).
func Handlers(engines EngineSource, views ViewSource, metrics *Metrics, log logr.Logger, limits Limits, opts ...ValidatorOption) map[string]http.Handler {
	budget := limits.LiveReadBudget
	if budget <= 0 {
		budget = DefaultLiveReadBudget
	}
	shares := newRereadShares(limits.RereadsPerRequester)
	v := func(k policy.Kind) http.Handler {
		val := NewValidator(k, engines, views, metrics, opts...)
		val.liveReadBudget = budget
		val.rereads = shares
		return Review(val, log, limits.Queue)
	}
	m := func(k policy.Kind) http.Handler {
		return Review(NewMutator(k, engines, views, metrics), log, limits.Queue)
	}
	handlers := map[string]http.Handler{}
	// Paths and kinds do not depend on the rules; only the generated match conditions do.
	for _, r := range Registrations(nil) {
		if r.Mutating {
			handlers[r.Path] = m(r.Kind)
		} else {
			handlers[r.Path] = v(r.Kind)
		}
	}
	return handlers
}

// Review is the endpoint that has h judge AdmissionReviews: it refuses a request that is not one
// at all with a plain HTTP error (reviewGuard), decodes the review itself (reviewHandler), waits
// for the requester's turn in q (nil: no queue), and hands the request to h through
// controller-runtime's admission.Webhook, which recovers panics, with each request's logger
// built lazily (requestLogger). Every review is answered within the timeout the apiserver gives
// it (reviewTimeout).
func Review(h admission.Handler, log logr.Logger, q *FairQueue) http.Handler {
	return reviewGuard(reviewHandler{wh: AdmissionWebhook(h, log), log: log, queue: q})
}

// AdmissionWebhook is the controller-runtime admission.Webhook through which Review hands h each
// decoded request: it answers a panic in h with an error (code 500) and completes the response
// (uid, code, patch), with each request's logger built lazily (requestLogger). pvguard test
// judges writes through it too.
func AdmissionWebhook(h admission.Handler, log logr.Logger) *admission.Webhook {
	wh := &admission.Webhook{Handler: h, RecoverPanic: ptr(true)}
	wh.LogConstructor = func(base logr.Logger, req *admission.Request) logr.Logger {
		return requestLogger(log, req)
	}
	return wh
}

func ptr[T any](v T) *T { return &v }
