package access

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/errgroup"
	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/client-go/kubernetes"
)

// Options configure a Guard.
type Options struct {
	// Authenticator checks the request's bearer token; Authorizer answers what the caller may
	// list. NewGuard builds both from Client when they are nil.
	Authenticator authenticator.Request
	Authorizer    authorizer.Authorizer
	// Client is the cluster's client: TokenReviews and SubjectAccessReviews go to its apiserver,
	// as they do for kube-apiserver's aggregated servers and the kubelet.
	Client kubernetes.Interface
	// CacheTTL is how long a token's review and an access review are cached (default
	// 10 s), allowed or denied, as Kubernetes' aggregated apiservers cache theirs.
	CacheTTL time.Duration
	// Namespaces lists the namespaces whose claims the caller could be allowed to read: those of
	// the cluster's claims and of volumes' claim references (the informer cache's).
	Namespaces func(ctx context.Context) ([]string, error)
	// ExplainRate and ExplainBurst bound each caller's explanations (default 1 a second, 5 at
	// once); beyond them a caller gets 429.
	ExplainRate  rate.Limit
	ExplainBurst int
	Log          logr.Logger
}

// Guard authenticates and authorizes callers of the read endpoints.
type Guard struct {
	o Options

	mu       sync.Mutex
	limiters map[string]*rate.Limiter
}

// maxLimiters bounds the per-caller limiters kept; beyond it they start afresh.
const maxLimiters = 10000

// NewGuard builds a guard with Kubernetes' delegating authenticator (TokenReview) and authorizer
// (SubjectAccessReview), each caching its answers.
func NewGuard(o Options) (*Guard, error) {
	if o.CacheTTL == 0 {
		o.CacheTTL = 10 * time.Second
	}
	if o.ExplainRate == 0 {
		o.ExplainRate = 1
	}
	if o.ExplainBurst == 0 {
		o.ExplainBurst = 5
	}
	backoff := &wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 3}
	if o.Authenticator == nil {
		if o.Client == nil {
			return nil, errors.New("access: no client for TokenReviews")
		}
		authn, _, err := authenticatorfactory.DelegatingAuthenticatorConfig{
			TokenAccessReviewClient:  o.Client.AuthenticationV1(),
			TokenAccessReviewTimeout: 10 * time.Second,
			CacheTTL:                 o.CacheTTL,
			WebhookRetryBackoff:      backoff,
		}.New()
		if err != nil {
			return nil, fmt.Errorf("access: building the token authenticator: %w", err)
		}
		o.Authenticator = authn
	}
	if o.Authorizer == nil {
		if o.Client == nil {
			return nil, errors.New("access: no client for SubjectAccessReviews")
		}
		authz, err := authorizerfactory.DelegatingAuthorizerConfig{
			SubjectAccessReviewClient: o.Client.AuthorizationV1(),
			AllowCacheTTL:             o.CacheTTL,
			DenyCacheTTL:              o.CacheTTL,
			WebhookRetryBackoff:       backoff,
		}.New()
		if err != nil {
			return nil, fmt.Errorf("access: building the authorizer: %w", err)
		}
		o.Authorizer = authz
	}
	return &Guard{o: o, limiters: map[string]*rate.Limiter{}}, nil
}

// ReaderFor asks what u may list: claims in every namespace or in each of the cluster's
// namespaces, volumes and classes. The authorizer caches each answer per user and question.
func (g *Guard) ReaderFor(ctx context.Context, u user.Info) (*Reader, error) {
	may := func(ctx context.Context, resource, namespace string) (bool, error) {
		d, _, err := g.o.Authorizer.Authorize(ctx, authorizer.AttributesRecord{User: u, Verb: "list",
			APIGroup: apiGroup(resource), APIVersion: "*", Resource: resource, Namespace: namespace, ResourceRequest: true})
		return d == authorizer.DecisionAllow, err
	}
	r := NewReader(u.GetName(), false, nil, false, false)
	var err1, err2, err3 error
	if r.AllClaims, err1 = may(ctx, "persistentvolumeclaims", ""); err1 == nil || r.AllClaims {
		err1 = nil
	}
	if r.Volumes, err2 = may(ctx, "persistentvolumes", ""); r.Volumes {
		err2 = nil
	}
	if r.Classes, err3 = may(ctx, "storageclasses", ""); r.Classes {
		err3 = nil
	}
	if err := errors.Join(err1, err2, err3); err != nil {
		return nil, err
	}
	if r.AllClaims || g.o.Namespaces == nil {
		return r, nil
	}
	namespaces, err := g.o.Namespaces(ctx)
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	eg, ectx := errgroup.WithContext(ctx)
	eg.SetLimit(8)
	for _, ns := range namespaces {
		eg.Go(func() error {
			ok, err := may(ectx, "persistentvolumeclaims", ns)
			if ok {
				mu.Lock()
				r.namespaces[ns] = true
				mu.Unlock()
				return nil
			}
			return err
		})
	}
	if err := eg.Wait(); err != nil {
		return nil, err
	}
	return r, nil
}

func apiGroup(resource string) string {
	if resource == "storageclasses" {
		return "storage.k8s.io"
	}
	return ""
}

// Authenticate wraps next: a request without a valid bearer token gets 401, one whose caller
// may read nothing pvguard shows 403; the others reach next with their Reader in the context
// (FromContext).
func (g *Guard) Authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		resp, ok, err := g.o.Authenticator.AuthenticateRequest(req)
		if err != nil {
			g.o.Log.V(1).Info("authentication failed", "error", err.Error())
		}
		if err != nil || !ok || resp == nil || resp.User == nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="pvguard"`)
			http.Error(w, "pvguard: a valid bearer token is required (kubectl create token, or your own)", http.StatusUnauthorized)
			return
		}
		rd, err := g.ReaderFor(req.Context(), resp.User)
		if err != nil {
			g.o.Log.Error(err, "authorizing", "user", resp.User.GetName())
			http.Error(w, "pvguard: cannot ask the apiserver what you may read; try again", http.StatusServiceUnavailable)
			return
		}
		if rd.None() {
			http.Error(w, fmt.Sprintf("pvguard: %s may not list persistentvolumeclaims, persistentvolumes or storageclasses", resp.User.GetName()), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, req.WithContext(WithReader(req.Context(), rd)))
	})
}

// LimitExplanations wraps next (behind Authenticate): each caller may ask for ExplainRate
// explanations a second, ExplainBurst at once; beyond that 429. Only GET and HEAD count: other
// methods compute nothing (405).
func (g *Guard) LimitExplanations(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			next.ServeHTTP(w, req)
			return
		}
		lim := g.limiter(FromContext(req.Context()).User)
		if r := lim.Reserve(); !r.OK() || r.Delay() > 0 {
			delay := time.Second
			if r.OK() {
				delay = r.Delay()
				r.Cancel()
			}
			w.Header().Set("Retry-After", strconv.Itoa(int(delay.Seconds())+1))
			http.Error(w, "pvguard: too many explanations from you; try again shortly", http.StatusTooManyRequests)
			return
		}
		next.ServeHTTP(w, req)
	})
}

func (g *Guard) limiter(user string) *rate.Limiter {
	g.mu.Lock()
	defer g.mu.Unlock()
	l, ok := g.limiters[user]
	if !ok {
		if len(g.limiters) >= maxLimiters {
			g.limiters = map[string]*rate.Limiter{}
		}
		l = rate.NewLimiter(g.o.ExplainRate, g.o.ExplainBurst)
		g.limiters[user] = l
	}
	return l
}
