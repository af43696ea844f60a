package audit_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/pvguard/pvguard/audit"
	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/test/testobj"
)

func TestDashboard(t *testing.T) {
	bound := testobj.PVC("team-a", "db", testobj.ClaimBoundTo("pv-db"))
	objs := []*corev1.PersistentVolume{
		testobj.PV("pv-db", testobj.BoundTo(bound), testobj.Capacity("5Gi")),
		testobj.PV("pv-failed", testobj.Phase(corev1.VolumeFailed)),
	}
	c := fake.NewClientBuilder().WithObjects(objs[0], objs[1], bound, testobj.PVC("team-b", "lost", testobj.ClaimPhase(corev1.ClaimLost))).Build()
	r := audit.NewRunner(audit.Options{Cache: c, Live: c, Engine: func() *policy.Engine { return policy.NewEngine(nil) }, Log: logr.Discard(),
		Now: func() time.Time { return time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC) }})
	if err := r.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	h := audit.DashboardHandler(r)

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	if rec.Code != http.StatusOK || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") {
		t.Fatalf("GET /: %d %s", rec.Code, rec.Header().Get("Content-Type"))
	}
	page := rec.Body.String()
	for _, want := range []string{
		`<svg id="chart"`, `<title>PVG021: 1</title>`, `<title>PVG024: 1</title>`, // chart bars by rule
		`data-action="audit"`, "PersistentVolumeClaim team-b/lost", // findings rows
		`<td>pv-db</td><td>Bound</td><td>5Gi</td>`, "<td>team-a/db</td><td>Bound</td>", // binding table
		`id="filter"`, "2026-11-23 08:00:00 UTC",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(page, "http://") || strings.Contains(page, "https://") {
		t.Error("the page refers to an outside address; nothing outside the cluster can be reached")
	}
	if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("no restrictive CSP: %q", csp)
	}

	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/nope", nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("GET /nope: %d", rec.Code)
	}
}
