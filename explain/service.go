package explain

import (
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/binder"
	"github.com/pvguard/pvguard/clusterstate"
	"github.com/pvguard/pvguard/internal/access"
	"github.com/pvguard/pvguard/internal/cores"
	"github.com/pvguard/pvguard/policy"
)

// This file answers the server's questions (Service): the explanations of claims and volumes,
// each cut down to what its caller may read, as values, and as typed errors what keeps a question
// from an answer. internal/web serves them over HTTP (its explain.go says which status each error
// is).

// reads are the kinds beyond the typed reads that the engine's rules read, which the pairs are
// judged on.
func (o ServeOptions) reads() []clusterstate.Kind {
	if o.Engine == nil {
		return nil
	}
	return o.Engine().Reads()
}

// ServeOptions configure the explanations the server answers (Service) and its plan (NewPlans).
type ServeOptions struct {
	// Cache is what explanations read claims, volumes, classes and nodes from: the server's
	// informer cache, which the webhooks, the audit and the binder read too.
	Cache client.Reader
	// PlanState, when set, is the state of the binder running in this process
	// (binder.Binder.PlanState), so that an explanation plans as the binder does.
	PlanState func(now time.Time) (pendingFree bool, inFlight binder.InFlight)
	// Engine, when set, is the server's current policy engine: the POLICY column judges each
	// pair as the binder would before binding it, as Identity (the binder's user), against
	// View's objects (nil: a view over what was read). A volume's findings are its audit's.
	Engine   func() *policy.Engine
	Identity policy.UserInfo
	View     func(ctx context.Context) policy.View
	// Leases, when set, reads the Leases named for a waiting claim's provisioner
	// (ReadProvisionerLeases): the informer cache holds none (there is one per node), so it is
	// the live reader, one filtered request per explanation of a claim with a provisioner.
	Leases client.Reader
	// Now is the clock a volume's explanation is judged at (default time.Now).
	Now func() time.Time
	Log logr.Logger
	// Plans, when set, is the server's one plan of the pool (NewPlans, kept current by
	// WatchChanges), which every explanation of a claim reads; without it each reads the cache
	// and plans the pool again.
	Plans *Plans
	// Binder, when set, is the binder running in this process: while it plans, Plans is its plan.
	Binder BinderPlans
	// Backlog is how many questions may wait for their turn while one is computed (default 8):
	// a question beyond them, or one that waited BacklogWait (default 30s), is a BusyError.
	Backlog     int
	BacklogWait time.Duration
	// Registry, when set, receives the explanations' metrics (pvguard_explain_wait_seconds).
	Registry prometheus.Registerer
	// Seats are the process's seats for its long computations (internal/cores): an explanation
	// computes its table, and the plan of the pool for explanations is made, on one. nil: no bound.
	Seats *cores.Seats
}

// Service computes the server's explanations: the same functions `pvguard explain` calls (Claim,
// Volume) on the same reads (ReadInput), for a caller who may read only part of the cluster, one
// at a time (turns.go).
type Service struct {
	o     ServeOptions
	turns *turns
}

// NewService returns the explanations of o's cache.
func NewService(o ServeOptions) *Service {
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Service{o: o, turns: newTurns(o)}
}

// InvalidNameError is a question about a name that no object of the kind can have.
type InvalidNameError struct {
	// Field is what the name is (namespace, name), Value the name asked for.
	Field, Value string
	// Reasons are why no object can have it (Kubernetes' name validation).
	Reasons []string
}

func (e *InvalidNameError) Error() string {
	return fmt.Sprintf("%s %q is not valid: %s", e.Field, e.Value, strings.Join(e.Reasons, "; "))
}

// ForbiddenError is a question about a claim in a namespace whose claims the caller may not list.
type ForbiddenError struct{ User, Namespace string }

func (e *ForbiddenError) Error() string {
	return fmt.Sprintf("%s may not list persistentvolumeclaims in namespace %s", e.User, e.Namespace)
}

// NotReadyError is a question asked before the server's first plan of the pool was made, past the
// wait for it (PlansOptions.FirstWait): the caller may ask again after RetryAfter.
type NotReadyError struct{ RetryAfter time.Duration }

func (e *NotReadyError) Error() string {
	return "the pool's first plan is still being made: ask again in a few seconds"
}

// checkName refuses a name that no object of the kind can have, naming the field.
func checkName(field, value string, dns1123 func(string) []string) error {
	if errs := dns1123(value); len(errs) > 0 {
		return &InvalidNameError{Field: field, Value: value, Reasons: errs}
	}
	return nil
}

func (s *Service) input(ctx context.Context) (Input, error) {
	in, err := ReadInput(ctx, s.o.Cache, nil, "", s.o.reads()...)
	if err != nil {
		return Input{}, fmt.Errorf("reading the informer cache: %w", err)
	}
	in.Now = s.o.Now()
	if s.o.PlanState != nil {
		in.PendingFree, in.InFlight = s.o.PlanState(in.Now)
	}
	if s.o.Engine != nil {
		in.Policy, in.Identity = s.o.Engine(), s.o.Identity
		if s.o.View != nil {
			in.View = s.o.View(ctx)
		}
	}
	return in, nil
}

// Claim explains claim namespace/name to the caller rd, listing the candidates page says, cut down
// to what rd may read. Its errors: an InvalidNameError, a ForbiddenError when rd may not list the
// namespace's claims, ErrUnknownClaim (errors.Is) for a claim that does not exist, a
// NotReadyError before the server's first plan, a BusyError when too many questions wait their
// turn; any other is the server's. The question waits for its plan and reads its leases before
// it takes its turn.
func (s *Service) Claim(ctx context.Context, rd *access.Reader, namespace, name string, page CandidatePage) (*Explanation, error) {
	if err := checkName("namespace", namespace, validation.IsDNS1123Label); err != nil {
		return nil, err
	}
	if err := checkName("name", name, validation.IsDNS1123Subdomain); err != nil {
		return nil, err
	}
	if page.All && (page.Limit < 1 || page.Offset < 0) {
		return nil, fmt.Errorf("candidates %+v: want a limit of 1 or more from an offset of 0 or more", page)
	}
	if !rd.Claims(namespace) {
		return nil, &ForbiddenError{User: rd.User, Namespace: namespace}
	}
	var done func()
	var err error
	if s.o.Plans == nil { // the question plans the pool itself, which is what the turn bounds
		if done, err = s.turns.take(ctx); err != nil {
			return nil, err
		}
		defer done()
	}
	start := time.Now()
	snap, err := s.snapshot(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	s.turns.waitedFor("plan", start)
	in, err := s.planInput(ctx, snap, namespace, name)
	if err != nil {
		return nil, err
	}
	if done == nil {
		if done, err = s.turns.take(ctx); err != nil {
			return nil, err
		}
		defer done()
	}
	ctx, give := s.o.Seats.Take(ctx)
	defer give()
	c, err := findClaim(in.State, namespace, name)
	if err != nil {
		return nil, err
	}
	xi := *snap.x
	xi.in, xi.pace = in, cores.NewPacer(ctx)
	e, t := explainTable(&xi, snap.p, c, shownClosest)
	e.Refused = refusals(in.Events, c)
	aud := audienceOf(rd, in.state())
	if next := listed(e, t, aud, page); next >= 0 {
		e.Continue = continueToken(next)
	}
	t.release()
	if aud.Audience != nil {
		policy.Redact(e, aud.Audience)
	}
	return e, nil
}

// audienceOf is the audience of rd over state s (none for a reader of everything), with the key
// of rd's rights: what it may list (access.Reader), which is all its audience reads by.
func audienceOf(rd *access.Reader, s *clusterstate.State) audience {
	if rd.Full() {
		return audience{}
	}
	rights := fmt.Sprintf("claims %t %s; volumes %t", rd.AllClaims, strings.Join(rd.Namespaces(), ","), rd.Volumes)
	return audience{Audience: rd.Audience(s, nil), rights: rights}
}

// planInput is the plan's read with this request's policy engine and leases.
func (s *Service) planInput(ctx context.Context, snap *snapshot, namespace, name string) (Input, error) {
	in := snap.in
	if s.o.Engine != nil {
		in.Policy, in.Identity = s.o.Engine(), s.o.Identity
		if s.o.View != nil {
			in.View = s.o.View(ctx)
		}
	}
	if s.o.Leases != nil {
		if err := ReadProvisionerLeases(ctx, s.o.Leases, &in, namespace, name); err != nil {
			return in, err
		}
	}
	return in, nil
}

// snapshot is the plan an explanation of claim namespace/name reads: the server's current one
// (Plans.forClaim), or one made for the question.
func (s *Service) snapshot(ctx context.Context, namespace, name string) (*snapshot, error) {
	if s.o.Plans != nil {
		return s.o.Plans.forClaim(ctx, s.o.Cache, namespace, name)
	}
	return readSnapshot(ctx, s.o)
}

// continueToken is the token of the page that starts at offset (Explanation.Continue).
func continueToken(offset int) string {
	return base64.RawURLEncoding.EncodeToString([]byte("o" + strconv.Itoa(offset)))
}

// ContinueOffset is the offset of the page a token of Explanation.Continue starts, and whether
// the token is one this package gives.
func ContinueOffset(token string) (int, bool) {
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || len(b) < 2 || b[0] != 'o' {
		return 0, false
	}
	n, err := strconv.Atoi(string(b[1:]))
	return n, err == nil && n >= 0
}

// Volume explains volume name to the caller rd, cut down to what rd may read. Its errors: an
// InvalidNameError, ErrUnknownVolume (errors.Is) for a volume that does not exist or that rd may
// not read (whether it exists is not theirs to know), a BusyError when too many questions wait
// their turn; any other is the server's.
func (s *Service) Volume(ctx context.Context, rd *access.Reader, name string) (*VolumeExplanation, error) {
	if err := checkName("name", name, validation.IsDNS1123Subdomain); err != nil {
		return nil, err
	}
	done, err := s.turns.take(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	in, err := s.input(ctx)
	if err != nil {
		return nil, err
	}
	_, give := s.o.Seats.Take(ctx)
	defer give()
	if pv, _ := in.state().PersistentVolume(name); pv != nil && !rd.Volume(pv) {
		return nil, fmt.Errorf("%w %s", ErrUnknownVolume, name)
	}
	e, err := Volume(in, name, s.o.Now())
	if err == nil {
		volumeForReader(rd, in, e)
	}
	return e, err
}
