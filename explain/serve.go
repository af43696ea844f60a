package explain

import (
	"context"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/binder"
	"github.com/pvguard/pvguard/internal/access"
	"github.com/pvguard/pvguard/policy"
)

// ServeOptions configure the explain endpoints (API, Pages).
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
}

// explainer computes explanations for the HTTP endpoints: the same functions `pvguard explain`
// calls (Claim, Volume) on the same reads (ReadInput).
type explainer struct{ o ServeOptions }

func newExplainer(o ServeOptions) *explainer {
	if o.Now == nil {
		o.Now = time.Now
	}
	return &explainer{o: o}
}

// explainError is a request that cannot be explained, with its HTTP status.
type explainError struct {
	status int
	msg    string
}

func (e *explainError) Error() string { return e.msg }

// checkName refuses a name that no object of the kind can have (400), naming the field.
func checkName(field, value string, dns1123 func(string) []string) error {
	if errs := dns1123(value); len(errs) > 0 {
		return &explainError{status: http.StatusBadRequest, msg: fmt.Sprintf("%s %q is not valid: %s", field, value, strings.Join(errs, "; "))}
	}
	return nil
}

func (x *explainer) input(ctx context.Context) (Input, error) {
	in, err := ReadInput(ctx, x.o.Cache, nil, "")
	if err != nil {
		return Input{}, fmt.Errorf("reading the informer cache: %w", err)
	}
	in.Now = x.o.Now()
	if x.o.PlanState != nil {
		in.PendingFree, in.InFlight = x.o.PlanState(in.Now)
	}
	if x.o.Engine != nil {
		in.Policy, in.Identity = x.o.Engine(), x.o.Identity
		if x.o.View != nil {
			in.View = x.o.View(ctx)
		}
	}
	return in, nil
}

func (x *explainer) claim(ctx context.Context, namespace, name string, page candidatePage) (*Explanation, error) {
	if err := checkName("namespace", namespace, validation.IsDNS1123Label); err != nil {
		return nil, err
	}
	if err := checkName("name", name, validation.IsDNS1123Subdomain); err != nil {
		return nil, err
	}
	rd := access.FromContext(ctx)
	if !rd.Claims(namespace) {
		return nil, &explainError{status: http.StatusForbidden,
			msg: fmt.Sprintf("%s may not list persistentvolumeclaims in namespace %s", rd.User, namespace)}
	}
	snap, err := x.snapshot(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	in, err := x.planInput(ctx, snap, namespace, name)
	if err != nil {
		return nil, err
	}
	c, err := findClaim(in.State, namespace, name)
	if err != nil {
		return nil, &explainError{status: http.StatusNotFound, msg: err.Error()}
	}
	xi := *snap.x
	xi.in = in
	e, t := explainTable(&xi, snap.p, c, shownClosest)
	e.Refused = refusals(in.Events, c)
	var aud policy.Audience
	if !rd.Full() {
		aud = rd.Audience(in.state(), nil)
	}
	if next := listed(e, t, aud, page); next >= 0 {
		e.Continue = continueToken(next)
	}
	t.release()
	if aud != nil {
		policy.Redact(e, aud)
	}
	return e, nil
}

// planInput is the plan's read with this request's policy engine and leases.
func (x *explainer) planInput(ctx context.Context, snap *snapshot, namespace, name string) (Input, error) {
	in := snap.in
	if x.o.Engine != nil {
		in.Policy, in.Identity = x.o.Engine(), x.o.Identity
		if x.o.View != nil {
			in.View = x.o.View(ctx)
		}
	}
	if x.o.Leases != nil {
		if err := ReadProvisionerLeases(ctx, x.o.Leases, &in, namespace, name); err != nil {
			return in, err
		}
	}
	return in, nil
}

// snapshot is the plan an explanation of claim namespace/name reads: the server's current one
// (Plans.forClaim), or one made for the request.
func (x *explainer) snapshot(ctx context.Context, namespace, name string) (*snapshot, error) {
	if x.o.Plans != nil {
		return x.o.Plans.forClaim(ctx, x.o.Cache, namespace, name)
	}
	return readSnapshot(ctx, x.o)
}

// Paging the candidates (docs/explain.md, "Candidates on the API").
const (
	defaultCandidateLimit = 500
	maxCandidateLimit     = 5000
)

// continueToken is the token of the page that starts at offset.
func continueToken(offset int) string {
	return base64.RawURLEncoding.EncodeToString([]byte("o" + strconv.Itoa(offset)))
}

// parsePage reads the candidates a request asks for: the closest (no query), or
// candidates=all with limit and continue.
func parsePage(q url.Values) (candidatePage, error) {
	bad := func(format string, args ...any) error {
		return &explainError{status: http.StatusBadRequest, msg: fmt.Sprintf(format, args...)}
	}
	var page candidatePage
	switch q.Get("candidates") {
	case "":
		if q.Has("limit") || q.Has("continue") {
			return page, bad("limit and continue page the full table: add candidates=all")
		}
		return page, nil
	case "all":
	default:
		return page, bad("candidates=%q: the only value is all", q.Get("candidates"))
	}
	page.all, page.limit = true, defaultCandidateLimit
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > maxCandidateLimit {
			return page, bad("limit=%q: want a number from 1 to %d", l, maxCandidateLimit)
		}
		page.limit = n
	}
	if tok := q.Get("continue"); tok != "" {
		b, err := base64.RawURLEncoding.DecodeString(tok)
		n, err2 := 0, errors.New("no offset")
		if err == nil && len(b) > 1 && b[0] == 'o' {
			n, err2 = strconv.Atoi(string(b[1:]))
		}
		if err != nil || err2 != nil || n < 0 {
			return page, bad("continue=%q is not a token this server gave", tok)
		}
		page.offset = n
	}
	return page, nil
}

func (x *explainer) volume(ctx context.Context, name string) (*VolumeExplanation, error) {
	if err := checkName("name", name, validation.IsDNS1123Subdomain); err != nil {
		return nil, err
	}
	in, err := x.input(ctx)
	if err != nil {
		return nil, err
	}
	// A volume the caller may not read is answered as one that does not exist: whether it does
	// is not theirs to know.
	rd := access.FromContext(ctx)
	if pv, _ := in.state().PersistentVolume(name); pv != nil && !rd.Volume(pv) {
		return nil, &explainError{status: http.StatusNotFound, msg: fmt.Sprintf("%v %s", ErrUnknownVolume, name)}
	}
	e, err := Volume(in, name, x.o.Now())
	if errors.Is(err, ErrUnknownVolume) {
		return nil, &explainError{status: http.StatusNotFound, msg: err.Error()}
	}
	if err == nil {
		volumeForReader(rd, in, e)
	}
	return e, err
}

// status is the HTTP status of an error: the request's fault, or the server's (logged).
func (x *explainer) status(err error, what string) (int, string) {
	var ee *explainError
	if errors.As(err, &ee) {
		return ee.status, ee.msg
	}
	x.o.Log.Error(err, "explaining", "object", what)
	return http.StatusInternalServerError, "explaining " + what + ": " + err.Error()
}

// API serves explanations as JSON, the shapes `pvguard explain ... -o json` prints
// (Explanation, VolumeExplanation): GET /pvc/{namespace}/{name} and
// GET /pv/{name}, relative to where it is mounted (the server mounts it at /api/v1/explain). An
// unknown object is a 404 and a malformed name a 400, each with {"error": "..."} naming it.
func API(o ServeOptions) http.Handler {
	x := newExplainer(o)
	r := chi.NewRouter()
	r.Get("/pvc/{namespace}/{name}", func(w http.ResponseWriter, req *http.Request) {
		ns, name := chi.URLParam(req, "namespace"), chi.URLParam(req, "name")
		page, err := parsePage(req.URL.Query())
		var e *Explanation
		if err == nil {
			e, err = x.claim(req.Context(), ns, name, page)
		}
		x.writeJSON(w, e, err, "PersistentVolumeClaim "+ns+"/"+name)
	})
	r.Get("/pv/{name}", func(w http.ResponseWriter, req *http.Request) {
		name := chi.URLParam(req, "name")
		e, err := x.volume(req.Context(), name)
		x.writeJSON(w, e, err, "PersistentVolume "+name)
	})
	return r
}

func (x *explainer) writeJSON(w http.ResponseWriter, v any, err error, what string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if err != nil {
		status, msg := x.status(err, what)
		if status == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", "5")
		}
		w.WriteHeader(status)
		v = map[string]string{"error": msg}
	}
	// As `pvguard explain -o json` writes it.
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// PageCSP is the Content-Security-Policy of the explain pages and of the dashboard that links to
// them (internal/web): nothing is loaded from anywhere, the page's own style and script run.
const PageCSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"

//go:embed explain.html
var explainHTML string

var explainTemplate = template.Must(template.New("explain").Parse(explainHTML))

// explainPage is what explain.html shows: a claim's explanation, a volume's, or an error.
type explainPage struct {
	Title string
	// Root is the dashboard's path relative to the page, so the links work wherever the server
	// is reached (a port-forward, or a proxy that adds a prefix).
	Root string
	// JSON is the same explanation's API path, relative to the page; Path the API path to show.
	JSON, Path string
	Claim      *Explanation
	Rows       []Candidate
	Others     string
	Checks     []Check
	Volume     *VolumeExplanation
	Error      string
	// Filtered says what the page leaves out for its reader, and why (access.Reader.Filtered).
	Filtered []string
}

// Pages serves the explanations as pages, self-contained as the dashboard is and with its
// Content-Security-Policy: GET /pvc/{namespace}/{name} and GET /pv/{name}, relative to where it
// is mounted (the server mounts it at /explain, where the dashboard's pending claims link). A
// page shows what `pvguard explain` prints: the state, the candidate table with a column per
// check, the volumes of other classes in one line, and the verdict.
func Pages(o ServeOptions) http.Handler {
	x := newExplainer(o)
	r := chi.NewRouter()
	r.Get("/pvc/{namespace}/{name}", func(w http.ResponseWriter, req *http.Request) {
		ns, name := chi.URLParam(req, "namespace"), chi.URLParam(req, "name")
		path := "api/v1/explain/pvc/" + ns + "/" + name
		p := explainPage{Title: "PersistentVolumeClaim " + ns + "/" + name, Root: "../../../",
			JSON: "../../../" + path, Path: "/" + path, Checks: Checks}
		e, err := x.claim(req.Context(), ns, name, candidatePage{})
		if err == nil {
			p.Claim = e
			p.Rows, p.Others = e.Table()
		}
		x.writePage(w, req, p, err)
	})
	r.Get("/pv/{name}", func(w http.ResponseWriter, req *http.Request) {
		name := chi.URLParam(req, "name")
		path := "api/v1/explain/pv/" + name
		p := explainPage{Title: "PersistentVolume " + name, Root: "../../", JSON: "../../" + path, Path: "/" + path}
		e, err := x.volume(req.Context(), name)
		p.Volume = e
		x.writePage(w, req, p, err)
	})
	return r
}

func (x *explainer) writePage(w http.ResponseWriter, req *http.Request, p explainPage, err error) {
	p.Filtered = access.FromContext(req.Context()).Filtered()
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", PageCSP)
	if err != nil {
		status, msg := x.status(err, p.Title)
		p.Error = msg
		w.WriteHeader(status)
	}
	if err := explainTemplate.Execute(w, p); err != nil {
		x.o.Log.Error(err, "rendering an explain page", "object", p.Title)
	}
}
