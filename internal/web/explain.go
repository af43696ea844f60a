package web

import (
	_ "embed"
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

	"github.com/pvguard/pvguard/explain"
	"github.com/pvguard/pvguard/internal/access"
)

// This file serves the explanations package explain computes (explain.Service) as JSON and as
// pages, and says which HTTP status each of its errors is. What a caller may read of an
// explanation is cut by package explain (explain/visible.go), for the reader the guard set.

// Paging the candidates (docs/explain.md, "Candidates on the API").
const (
	defaultCandidateLimit = 500
	maxCandidateLimit     = 5000
)

// PageCSP is the Content-Security-Policy of the explain pages and of the dashboard that links to
// them: nothing is loaded from anywhere, the page's own style and script run.
const PageCSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"

// badRequest is a query the API cannot read: 400, with its message.
type badRequest struct{ msg string }

func (e *badRequest) Error() string { return e.msg }

// explainFailure is what a caller is told of an explanation that failed: the HTTP status, the
// message, and for a server not ready yet when to ask again.
type explainFailure struct {
	status     int
	msg        string
	retryAfter time.Duration
}

// explainFailed is the failure err is: the request's fault (400, 404), the caller's rights (403),
// the server's first plan not made yet (503), too many questions waiting their turn (429), or the
// server's (500, logged).
func explainFailed(err error, what string, log logr.Logger) explainFailure {
	var (
		bad       *badRequest
		invalid   *explain.InvalidNameError
		forbidden *explain.ForbiddenError
		notReady  *explain.NotReadyError
		busy      *explain.BusyError
	)
	switch {
	case errors.As(err, &bad), errors.As(err, &invalid):
		return explainFailure{status: http.StatusBadRequest, msg: err.Error()}
	case errors.As(err, &forbidden):
		return explainFailure{status: http.StatusForbidden, msg: err.Error()}
	case errors.Is(err, explain.ErrUnknownClaim), errors.Is(err, explain.ErrUnknownVolume):
		return explainFailure{status: http.StatusNotFound, msg: err.Error()}
	case errors.As(err, &notReady):
		return explainFailure{status: http.StatusServiceUnavailable, msg: err.Error(), retryAfter: notReady.RetryAfter}
	case errors.As(err, &busy):
		return explainFailure{status: http.StatusTooManyRequests, msg: err.Error(), retryAfter: busy.RetryAfter}
	}
	log.Error(err, "explaining", "object", what)
	return explainFailure{status: http.StatusInternalServerError, msg: "explaining " + what + ": " + err.Error()}
}

// parsePage reads the candidates a request asks for: the closest (no query), or
// candidates=all with limit and continue.
func parsePage(q url.Values) (explain.CandidatePage, error) {
	bad := func(format string, args ...any) error {
		return &badRequest{msg: fmt.Sprintf(format, args...)}
	}
	var page explain.CandidatePage
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
	page.All, page.Limit = true, defaultCandidateLimit
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > maxCandidateLimit {
			return page, bad("limit=%q: want a number from 1 to %d", l, maxCandidateLimit)
		}
		page.Limit = n
	}
	if tok := q.Get("continue"); tok != "" {
		n, ok := explain.ContinueOffset(tok)
		if !ok {
			return page, bad("continue=%q is not a token this server gave", tok)
		}
		page.Offset = n
	}
	return page, nil
}

// ExplainAPIHandler serves x's explanations as JSON, the shapes `pvguard explain ... -o json`
// prints (explain.Explanation, explain.VolumeExplanation): GET /pvc/{namespace}/{name} and
// GET /pv/{name}, relative to where it is mounted (the server mounts it at PathExplainAPI), each
// for the caller the guard set (access.FromContext). An unknown object is a 404 and a malformed
// name a 400, each with {"error": "..."} naming it; log is told of the server's errors.
func ExplainAPIHandler(x *explain.Service, log logr.Logger) http.Handler {
	r := chi.NewRouter()
	r.Get("/pvc/{namespace}/{name}", func(w http.ResponseWriter, req *http.Request) {
		ns, name := chi.URLParam(req, "namespace"), chi.URLParam(req, "name")
		page, err := parsePage(req.URL.Query())
		var e *explain.Explanation
		if err == nil {
			e, err = x.Claim(req.Context(), access.FromContext(req.Context()), ns, name, page)
		}
		writeExplainJSON(w, e, err, "PersistentVolumeClaim "+ns+"/"+name, log)
	})
	r.Get("/pv/{name}", func(w http.ResponseWriter, req *http.Request) {
		name := chi.URLParam(req, "name")
		e, err := x.Volume(req.Context(), access.FromContext(req.Context()), name)
		writeExplainJSON(w, e, err, "PersistentVolume "+name, log)
	})
	return r
}

// retryAfterSeconds is d as a Retry-After header's whole seconds, rounded up.
func retryAfterSeconds(d time.Duration) string {
	return strconv.Itoa(int((d + time.Second - 1) / time.Second))
}

func writeExplainJSON(w http.ResponseWriter, v any, err error, what string, log logr.Logger) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if err != nil {
		f := explainFailed(err, what, log)
		if f.retryAfter > 0 {
			w.Header().Set("Retry-After", retryAfterSeconds(f.retryAfter))
		}
		w.WriteHeader(f.status)
		v = map[string]string{"error": f.msg}
	}
	// As `pvguard explain -o json` writes it.
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

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
	Claim      *explain.Explanation
	Rows       []explain.Candidate
	Others     string
	Checks     []explain.Check
	Volume     *explain.VolumeExplanation
	Error      string
	// Filtered says what the page leaves out for its reader, and why (access.Reader.Filtered).
	Filtered []string
}

// ExplainPagesHandler serves x's explanations as pages, self-contained as the dashboard is and
// with its Content-Security-Policy: GET /pvc/{namespace}/{name} and GET /pv/{name}, relative to
// where it is mounted (the server mounts it at PathExplainPages, where the dashboard's pending
// claims link). A page shows what `pvguard explain` prints: the state, the candidate table with
// a column per check, the volumes of other classes in one line, and the verdict. Errors have the
// API's statuses; log is told of the server's.
func ExplainPagesHandler(x *explain.Service, log logr.Logger) http.Handler {
	api := strings.TrimPrefix(PathExplainAPI, "/")
	r := chi.NewRouter()
	r.Get("/pvc/{namespace}/{name}", func(w http.ResponseWriter, req *http.Request) {
		ns, name := chi.URLParam(req, "namespace"), chi.URLParam(req, "name")
		path := api + "/pvc/" + ns + "/" + name
		p := explainPage{Title: "PersistentVolumeClaim " + ns + "/" + name, Root: "../../../",
			JSON: "../../../" + path, Path: "/" + path, Checks: explain.Checks}
		e, err := x.Claim(req.Context(), access.FromContext(req.Context()), ns, name, explain.CandidatePage{})
		if err == nil {
			p.Claim = e
			p.Rows, p.Others = e.Table()
		}
		writeExplainPage(w, req, p, err, log)
	})
	r.Get("/pv/{name}", func(w http.ResponseWriter, req *http.Request) {
		name := chi.URLParam(req, "name")
		path := api + "/pv/" + name
		p := explainPage{Title: "PersistentVolume " + name, Root: "../../", JSON: "../../" + path, Path: "/" + path}
		e, err := x.Volume(req.Context(), access.FromContext(req.Context()), name)
		p.Volume = e
		writeExplainPage(w, req, p, err, log)
	})
	return r
}

func writeExplainPage(w http.ResponseWriter, req *http.Request, p explainPage, err error, log logr.Logger) {
	p.Filtered = access.FromContext(req.Context()).Filtered()
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", PageCSP)
	if err != nil {
		f := explainFailed(err, p.Title, log)
		p.Error = f.msg
		if f.retryAfter > 0 {
			w.Header().Set("Retry-After", retryAfterSeconds(f.retryAfter))
		}
		w.WriteHeader(f.status)
	}
	if err := explainTemplate.Execute(w, p); err != nil {
		log.Error(err, "rendering an explain page", "object", p.Title)
	}
}
