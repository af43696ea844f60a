package web_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/pvguard/pvguard/internal/access"
	"github.com/pvguard/pvguard/internal/web"
	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/test/testobj"
	"github.com/pvguard/pvguard/webhook"
)

// testGuard knows three tokens: an admin who may list everything, a tenant who may list the
// claims of team-a, and a caller who may list nothing.
func testGuard() *access.Guard {
	return access.NewStaticGuard(
		access.StaticTokens{"admin-token": "admin", "tenant-token": "tenant", "nobody-token": "nobody"},
		access.StaticRules{"admin": {"persistentvolumeclaims", "persistentvolumes", "storageclasses"},
			"tenant": {"persistentvolumeclaims/team-a"}},
		func(context.Context) ([]string, error) { return []string{"team-a", "team-b"}, nil })
}

func withToken(req *http.Request, token string) *http.Request {
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return req
}

// whoami answers with the reader the guard passed on.
var whoami = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	rd := access.FromContext(r.Context())
	_, _ = io.WriteString(w, rd.User+" "+strings.Join(rd.Namespaces(), ","))
})

// TestReadEndpointsNeedAToken: the report, the dashboard and the explanations answer 401
// without a valid bearer token and 403 to a caller who may list nothing they show; the webhooks
// and probes take none.
func TestReadEndpointsNeedAToken(t *testing.T) {
	opts := web.Options{Report: whoami, Dashboard: whoami, ExplainAPI: whoami, ExplainPages: whoami, Access: testGuard(),
		Engines: webhook.StaticEngine{E: policy.NewEngine(nil)}, Views: webhook.StaticView{V: testobj.NewView()}}
	h := web.NewServer(opts).Handler()
	read := []string{"/", "/api/v1/report", web.PathExplainAPI + "/pvc/team-a/data", web.PathExplainPages + "/pv/pv-1"}
	for _, path := range read {
		for token, want := range map[string]int{"": 401, "forged": 401, "nobody-token": 403, "tenant-token": 200, "admin-token": 200} {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, withToken(httptest.NewRequest(http.MethodGet, path, nil), token))
			if rec.Code != want {
				t.Errorf("GET %s with token %q: HTTP %d, want %d: %s", path, token, rec.Code, want, rec.Body)
			}
			if want == 401 && !strings.HasPrefix(rec.Header().Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("GET %s with token %q: 401 without WWW-Authenticate: Bearer", path, token)
			}
			if token == "tenant-token" && want == 200 && rec.Body.String() != "tenant team-a" {
				t.Errorf("GET %s as the tenant: the handler saw %q, want the tenant's reader (team-a)", path, rec.Body)
			}
		}
	}
	for path, want := range map[string]int{"/healthz": 200, "/readyz": 200, "/metrics": 200} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != want {
			t.Errorf("GET %s without a token: HTTP %d, want %d", path, rec.Code, want)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, webhook.PathValidatePV, strings.NewReader("{}")))
	if rec.Code == http.StatusUnauthorized || rec.Code == http.StatusForbidden {
		t.Errorf("POST %s without a token: HTTP %d: the webhooks must not ask for one", webhook.PathValidatePV, rec.Code)
	}

	// Without a guard the read endpoints are closed, never open.
	opts.Access = nil
	h = web.NewServer(opts).Handler()
	for _, path := range read {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, withToken(httptest.NewRequest(http.MethodGet, path, nil), "admin-token"))
		if rec.Code != http.StatusUnauthorized {
			t.Errorf("GET %s without a guard: HTTP %d, want 401", path, rec.Code)
		}
	}
}

// TestExplanationsPerCallerLimit: one caller asking for explanations beyond their burst gets 429
// while another caller still gets theirs.
func TestExplanationsPerCallerLimit(t *testing.T) {
	h := web.NewServer(web.Options{ExplainAPI: whoami, Access: testGuard()}).Handler()
	get := func(token string) int {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, withToken(httptest.NewRequest(http.MethodGet, web.PathExplainAPI+"/pv/pv-1", nil), token))
		return rec.Code
	}
	limited := 0
	for range 20 {
		if get("tenant-token") == http.StatusTooManyRequests {
			limited++
		}
	}
	if limited == 0 {
		t.Fatal("20 explanations at once from one caller: none got 429")
	}
	if code := get("admin-token"); code != http.StatusOK {
		t.Errorf("another caller: HTTP %d, want 200 (the limit is per caller)", code)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, withToken(httptest.NewRequest(http.MethodDelete, web.PathExplainAPI+"/pv/pv-1", nil), "tenant-token"))
	if rec.Code == http.StatusTooManyRequests {
		t.Error("a DELETE, which computes nothing, counted against the caller's explanations")
	}
}
