package web_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/pvguard/pvguard/audit"
	"github.com/pvguard/pvguard/clusterstate"
	"github.com/pvguard/pvguard/internal/clusterview"
	"github.com/pvguard/pvguard/internal/web"
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
	r := audit.NewRunner(audit.RunnerOptions{Cache: c, Live: clusterview.New(c, c).LiveView, Engine: func() *policy.Engine { return policy.NewEngine(nil) }, Log: logr.Discard(),
		Now: func() time.Time { return time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC) }})
	if err := r.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	h := web.DashboardHandler(r, c, logr.Discard())

	rec := testobj.HTTPGet(h, "/")
	if rec.Code != http.StatusOK || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") {
		t.Fatalf("GET /: %d %s", rec.Code, rec.Header().Get("Content-Type"))
	}
	page := rec.Body.String()
	for _, want := range []string{
		`<svg id="chart"`, `<title>PVG021: 1</title>`, `<title>PVG024: 1</title>`, // chart bars by rule
		`data-action="audit"`, "PersistentVolumeClaim team-b/lost", // findings rows
		`<td>pv-db</td><td>Bound</td><td>5Gi</td>`, "<td>team-a/db</td><td>Bound</td>", // binding table
		`id="filter"`, "2026-11-23 08:00:00 UTC",
		`<a href="explain/pvc/team-b/lost">team-b/lost</a></td><td>Lost</td>`, // pending claims, linked
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(page, "explain/pvc/team-a/db") {
		t.Error("the bound claim team-a/db is listed as pending")
	}
	if strings.Contains(page, "http://") || strings.Contains(page, "https://") {
		t.Error("the page refers to an outside address; nothing outside the cluster can be reached")
	}
	if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("no restrictive CSP: %q", csp)
	}

	rec = testobj.HTTPGet(h, "/nope")
	if rec.Code != http.StatusNotFound {
		t.Errorf("GET /nope: %d", rec.Code)
	}
}

// TestRenderDashboardPending: the pending claims are the claims not bound (a Bound claim without
// bind-completed is not done binding); a file (`pvguard audit -o html`) lists them without links,
// since no explain pages sit beside it.
func TestRenderDashboardPending(t *testing.T) {
	st := clusterstate.New([]*corev1.PersistentVolumeClaim{
		testobj.PVC("team-b", "wait", testobj.ClaimClass("fast"), testobj.Request("5Gi")),
		testobj.PVC("team-a", "db", testobj.ClaimBoundTo("pv-db")),
		testobj.PVC("team-a", "half", testobj.ClaimPhase(corev1.ClaimBound)),
	}, nil, nil, nil)
	pending := audit.PendingOf(st)
	if len(pending) != 2 || pending[0].Name != "half" || pending[1] != (audit.PendingClaim{Namespace: "team-b", Name: "wait", Class: "fast", Request: "5Gi"}) {
		t.Fatalf("pending %+v, want team-a/half and team-b/wait", pending)
	}
	for _, links := range []bool{false, true} {
		var b strings.Builder
		if err := web.RenderDashboard(&b, web.Page{Pending: pending, ExplainLinks: links}); err != nil {
			t.Fatal(err)
		}
		page := b.String()
		if !strings.Contains(page, "<td>fast</td><td>5Gi</td>") || !strings.Contains(page, "team-b/wait") {
			t.Errorf("links %v: the pending claims are not listed", links)
		}
		if got := strings.Contains(page, `<a href="explain/pvc/team-b/wait">`); got != links {
			t.Errorf("links %v: the page links the claim: %v", links, got)
		}
	}
	var b strings.Builder
	if err := web.RenderDashboard(&b, web.Page{}); err != nil || !strings.Contains(b.String(), "Every claim is bound.") {
		t.Errorf("no pending claims: %v, %q", err, b.String())
	}
}
