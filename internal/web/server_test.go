package web_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/pvguard/pvguard/internal/web"
	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/test/testobj"
	"github.com/pvguard/pvguard/webhook"
)

func TestHealthAndReadiness(t *testing.T) {
	notReady := web.NewServer(web.Options{
		Engines:     webhook.StaticEngine{E: policy.NewEngine(nil)},
		Views:       webhook.StaticView{V: testobj.NewView()},
		ReadyChecks: map[string]func() error{"informer cache": func() error { return errors.New("not synced yet") }},
	}).Handler()
	ready := web.NewServer(web.Options{
		Engines:     webhook.StaticEngine{E: policy.NewEngine(nil)},
		Views:       webhook.StaticView{V: testobj.NewView()},
		ReadyChecks: map[string]func() error{"cache": func() error { return nil }},
	}).Handler()
	for _, tc := range []struct {
		path string
		want int
		h    http.Handler
	}{
		{"/healthz", 200, notReady},
		{"/readyz", 503, notReady},
		{"/readyz", 200, ready},
		{"/metrics", 200, notReady},
	} {
		rec := httptest.NewRecorder()
		tc.h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tc.path, nil))
		if rec.Code != tc.want {
			t.Errorf("GET %s: %d, want %d: %s", tc.path, rec.Code, tc.want, rec.Body.String())
		}
	}
}

// TestExplainRoutes: the explain handlers are mounted at /api/v1/explain and /explain and see
// the path below their mount point; without them those paths are not served.
func TestExplainRoutes(t *testing.T) {
	echo := func(tag string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rctx := chi.RouteContext(r.Context())
			_, _ = io.WriteString(w, tag+" "+rctx.RoutePath)
		})
	}
	with := web.NewServer(web.Options{ExplainAPI: echo("api"), ExplainPages: echo("pages"), Access: testGuard()}).Handler()
	without := web.NewServer(web.Options{}).Handler()
	for path, want := range map[string]string{
		web.PathExplainAPI + "/pvc/team-a/data":   "api /pvc/team-a/data",
		web.PathExplainAPI + "/pv/pv-1":           "api /pv/pv-1",
		web.PathExplainPages + "/pvc/team-a/data": "pages /pvc/team-a/data",
		web.PathExplainPages + "/pv/pv-1":         "pages /pv/pv-1",
	} {
		rec := httptest.NewRecorder()
		with.ServeHTTP(rec, withToken(httptest.NewRequest(http.MethodGet, path, nil), "admin-token"))
		if rec.Code != http.StatusOK || rec.Body.String() != want {
			t.Errorf("GET %s: HTTP %d %q, want %q", path, rec.Code, rec.Body, want)
		}
		rec = httptest.NewRecorder()
		without.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != http.StatusNotFound {
			t.Errorf("GET %s without explain handlers: HTTP %d, want 404", path, rec.Code)
		}
	}
}
