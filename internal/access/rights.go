package access

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/client-go/kubernetes"

	"github.com/pvguard/pvguard/policy"
)

// AdmissionRights answers whether the requester of an admission review may read an object
// (webhook.ReadRights), so that a denial names to a cluster admin what it hides from a tenant. It
// asks the apiserver with SubjectAccessReviews through Kubernetes' delegating authorizer, and
// never makes a review wait long: answers are cached (allowed or denied, CacheTTL), questions not
// in the cache are limited to Rate a second across all requesters (Burst at once), and each waits
// at most Timeout. A question beyond the budget goes unanswered, and the message is then the one
// for a reader of the request alone.
type AdmissionRights struct {
	authz   authorizer.Authorizer
	timeout time.Duration
	ttl     time.Duration
	lim     *rate.Limiter
	now     func() time.Time

	// cache stands in front of lim: the delegating authorizer caches its answers too, but only
	// behind the call that lim counts, so a cached answer would still spend the budget.
	mu    sync.Mutex
	cache map[rightsKey]rightsAnswer
}

// AdmissionRightsOptions configure AdmissionRights; zero fields take the defaults.
type AdmissionRightsOptions struct {
	// Client sends the SubjectAccessReviews (give it a token bucket of its own); Authorizer,
	// when set, is used instead (tests).
	Client     kubernetes.Interface
	Authorizer authorizer.Authorizer
	// CacheTTL (default 10 s), Rate (default 20 a second), Burst (default 40), Timeout (default
	// 250 ms).
	CacheTTL time.Duration
	Rate     rate.Limit
	Burst    int
	Timeout  time.Duration
}

type rightsKey struct {
	user, groups, verb, resource, namespace string
}

type rightsAnswer struct {
	allowed bool
	expires time.Time
}

// maxRightsCache bounds the cached answers; beyond it the cache starts afresh.
const maxRightsCache = 10000

// NewAdmissionRights builds AdmissionRights.
func NewAdmissionRights(o AdmissionRightsOptions) (*AdmissionRights, error) {
	if o.CacheTTL == 0 {
		o.CacheTTL = 10 * time.Second
	}
	if o.Rate == 0 {
		o.Rate = 20
	}
	if o.Burst == 0 {
		o.Burst = 40
	}
	if o.Timeout == 0 {
		o.Timeout = 250 * time.Millisecond
	}
	if o.Authorizer == nil {
		if o.Client == nil {
			return nil, errors.New("access: no client for SubjectAccessReviews")
		}
		authz, err := authorizerfactory.DelegatingAuthorizerConfig{
			SubjectAccessReviewClient: o.Client.AuthorizationV1(),
			AllowCacheTTL:             o.CacheTTL,
			DenyCacheTTL:              o.CacheTTL,
			// No retries: an unanswered question costs a less helpful message, never a wait.
			WebhookRetryBackoff: &wait.Backoff{Duration: 10 * time.Millisecond, Steps: 1},
		}.New()
		if err != nil {
			return nil, fmt.Errorf("access: building the authorizer: %w", err)
		}
		o.Authorizer = authz
	}
	return &AdmissionRights{authz: o.Authorizer, timeout: o.Timeout, ttl: o.CacheTTL, lim: rate.NewLimiter(o.Rate, o.Burst),
		now: time.Now, cache: map[rightsKey]rightsAnswer{}}, nil
}

// May implements webhook.ReadRights.
func (r *AdmissionRights) May(ctx context.Context, u policy.UserInfo, verb, resource, namespace string) (allowed, answered bool) {
	key := rightsKey{user: u.Username, groups: fmt.Sprint(u.Groups), verb: verb, resource: resource, namespace: namespace}
	now := r.now()
	r.mu.Lock()
	if a, ok := r.cache[key]; ok && now.Before(a.expires) {
		r.mu.Unlock()
		return a.allowed, true
	}
	r.mu.Unlock()
	if !r.lim.Allow() {
		return false, false
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	d, _, err := r.authz.Authorize(ctx, authorizer.AttributesRecord{
		User: &user.DefaultInfo{Name: u.Username, Groups: u.Groups}, Verb: verb,
		APIGroup: apiGroup(resource), APIVersion: "*", Resource: resource, Namespace: namespace, ResourceRequest: true})
	if err != nil && d != authorizer.DecisionAllow {
		return false, false
	}
	allowed = d == authorizer.DecisionAllow
	r.mu.Lock()
	if len(r.cache) >= maxRightsCache {
		r.cache = map[rightsKey]rightsAnswer{}
	}
	r.cache[key] = rightsAnswer{allowed: allowed, expires: now.Add(r.ttl)}
	r.mu.Unlock()
	return allowed, true
}
