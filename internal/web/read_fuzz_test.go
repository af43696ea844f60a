package web_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/time/rate"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/pvguard/pvguard/audit"
	"github.com/pvguard/pvguard/explain"
	"github.com/pvguard/pvguard/internal/access"
	"github.com/pvguard/pvguard/internal/clusterview"
	"github.com/pvguard/pvguard/internal/web"
	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/test/testobj"
	"github.com/pvguard/pvguard/webhook"
)

// teamBUID is the uid of team-b's claim: nothing a path can name, so a tenant of team-a that is
// shown it was shown team-b's claim.
const teamBUID = "bbbbbbbb-0000-4000-8000-000000000002"

var readServer = sync.OnceValue(func() http.Handler {
	claimA := testobj.PVC("team-a", "data", testobj.ClaimClass("gold"), testobj.ClaimUID("aaaaaaaa-0000-4000-8000-000000000001"))
	claimB := testobj.PVC("team-b", "data", testobj.ClaimClass("gold"), testobj.ClaimUID(teamBUID))
	objs := []client.Object{claimA, claimB,
		testobj.PV("pv-a", testobj.Class("gold"), testobj.BoundTo(claimA)),
		testobj.PV("pv-b", testobj.Class("silver"), testobj.BoundTo(claimB)),
		testobj.PV("pv-free", testobj.Class("gold")),
		testobj.PVC("team-a", "waiting", testobj.ClaimClass("gold"), testobj.Request("5Gi")),
		testobj.StorageClass("gold", "kubernetes.io/no-provisioner"),
	}
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(objs...).Build()
	r := audit.NewRunner(audit.RunnerOptions{Cache: c, Live: clusterview.New(c, c).LiveView, Engine: func() *policy.Engine { return policy.NewEngine(nil) }, Log: logr.Discard()})
	if err := r.RunOnce(context.Background()); err != nil {
		panic(err)
	}
	rules := access.StaticRules{"admin": {"persistentvolumeclaims", "persistentvolumes", "storageclasses"},
		"tenant": {"persistentvolumeclaims/team-a"}}
	guard, err := access.NewGuard(access.Options{
		Authenticator: access.StaticTokens{"admin-token": "admin", "tenant-token": "tenant", "nobody-token": "nobody"},
		Authorizer:    authorizer.AuthorizerFunc(rules.Authorize),
		Namespaces:    func(context.Context) ([]string, error) { return []string{"team-a", "team-b"}, nil },
		ExplainRate:   rate.Inf,
	})
	if err != nil {
		panic(err)
	}
	eo := explain.ServeOptions{Cache: c, Log: logr.Discard(), Now: func() time.Time { return time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC) }}
	return web.NewServer(web.Options{Report: web.ReportHandler(r, c, logr.Discard()), Dashboard: web.DashboardHandler(r, c, logr.Discard()),
		ExplainAPI: web.ExplainAPIHandler(explain.NewService(eo), logr.Discard()), ExplainPages: web.ExplainPagesHandler(explain.NewService(eo), logr.Discard()), Access: guard,
		Engines: webhook.StaticEngine{E: policy.NewEngine(nil)}, Views: webhook.StaticView{V: testobj.NewView()}}).Handler()
})

// FuzzReadEndpoints: no path, query or caller makes the read endpoints fail (5xx) or panic, and
// team-a's tenant is never shown team-b's claim.
func FuzzReadEndpoints(f *testing.F) {
	for _, seed := range []string{"/", "/api/v1/report", "/api/v1/explain/pvc/team-a/data", "/explain/pvc/team-a/waiting",
		"/explain/pvc/team-b/data", "/api/v1/explain/pv/pv-b", "/explain/pv/pv-a", "/explain/pv/pv-free", "/explain/pvc/team-a/%2e%2e",
		"/api/v1/explain/pvc//", "//explain/pv/../pv/pv-b", "/explain/pvc/team-a/data/extra", "/api/v1/explain/pv/" + strings.Repeat("x", 300),
		"/explain/pvc/TEAM-A/data", "/explain/pvc/team-a/da%00ta", "/validate/persistentvolumes", "/healthz"} {
		for who := range uint8(4) {
			f.Add(seed, "a=1&b=%zz", who)
		}
	}
	tokens := []string{"", "admin-token", "tenant-token", "nobody-token"}
	f.Fuzz(func(t *testing.T, path, query string, who uint8) {
		h := readServer()
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.URL.Path, req.URL.RawPath, req.URL.RawQuery, req.RequestURI = path, "", query, ""
		if tok := tokens[int(who)%len(tokens)]; tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("GET %q ?%q as %q: HTTP %d: %s", path, query, tokens[int(who)%len(tokens)], rec.Code, rec.Body)
		}
		if tokens[int(who)%len(tokens)] == "tenant-token" {
			body := rec.Body.String()
			if strings.Contains(body, teamBUID) || (strings.Contains(body, "team-b/data") && !strings.Contains(path+query, "team-b")) {
				t.Fatalf("GET %q as team-a's tenant shows team-b's claim: %s", path, body)
			}
		}
	})
}
