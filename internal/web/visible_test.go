package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
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
)

const (
	uidOfA = "aaaaaaaa-0000-4000-8000-00000000000a"
	uidOfB = "bbbbbbbb-0000-4000-8000-00000000000b"
)

// tenants is a cluster of two tenants: each has a claim bound to a volume of another class (a
// PVG007 finding on the claim), and team-b a pending claim with a selected node and a volume
// pre-bound to it; team-a has a pending claim that team-b's volumes are candidates for. A
// volume is Failed (a volume finding).
func tenants(t *testing.T) (*audit.Runner, client.Client) {
	t.Helper()
	boundA := testobj.PVC("team-a", "claim-of-a", testobj.ClaimClass("gold"), testobj.ClaimUID(uidOfA), testobj.ClaimBoundTo("vol-a"))
	boundB := testobj.PVC("team-b", "claim-of-b", testobj.ClaimClass("gold"), testobj.ClaimUID(uidOfB), testobj.ClaimBoundTo("vol-b"))
	pendingB := testobj.PVC("team-b", "pending-of-b", testobj.ClaimClass("gold"), testobj.Request("5Gi"),
		testobj.ClaimMeta(testobj.Annotation("volume.kubernetes.io/selected-node", "node-of-b")))
	objs := []client.Object{boundA, boundB, pendingB,
		testobj.PVC("team-a", "pending-of-a", testobj.ClaimClass("gold"), testobj.Request("5Gi")),
		testobj.PV("vol-a", testobj.Class("silver"), testobj.BoundTo(boundA)),
		testobj.PV("vol-b", testobj.Class("silver"), testobj.BoundTo(boundB)),
		testobj.PV("vol-b-reserved", testobj.Class("gold"), testobj.Capacity("5Gi"), testobj.ClaimRef("team-b", "pending-of-b", "")),
		testobj.PV("vol-failed", testobj.Phase(corev1.VolumeFailed)),
	}
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(objs...).Build()
	r := audit.NewRunner(audit.RunnerOptions{Cache: c, Live: clusterview.New(c, c).LiveView, Engine: func() *policy.Engine { return policy.NewEngine(nil) }, Log: logr.Discard(),
		Now: func() time.Time { return testobj.ExplainNow }})
	if err := r.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	return r, c
}

// TestTenantSeesOnlyItsOwn: team-a's tenant (who may list the claims of team-a only) gets its own
// findings, claims and explanations from every endpoint, and no namespace, name, uid or node of
// team-b's, even where team-b's volumes are candidates for its claim; a cluster reader gets all.
func TestTenantSeesOnlyItsOwn(t *testing.T) {
	r, c := tenants(t)
	eo := explain.ServeOptions{Cache: c, Now: func() time.Time { return testobj.ExplainNow }, Log: logr.Discard()}
	handlers := map[string]http.Handler{"report": web.ReportHandler(r, c, logr.Discard()), "dashboard": web.DashboardHandler(r, c, logr.Discard()),
		"api": web.ExplainAPIHandler(explain.NewService(eo), logr.Discard()), "pages": web.ExplainPagesHandler(explain.NewService(eo), logr.Discard())}
	type get struct{ handler, path string }
	own := []get{{"report", "/"}, {"dashboard", "/"},
		{"api", "/pvc/team-a/pending-of-a"}, {"pages", "/pvc/team-a/pending-of-a"},
		{"api", "/pvc/team-a/claim-of-a"}, {"pages", "/pvc/team-a/claim-of-a"},
		{"api", "/pv/vol-a"}, {"pages", "/pv/vol-a"}}
	tenant := access.NewReader("tenant-a", false, []string{"team-a"}, false, false)
	bodies := map[get]string{}
	for _, g := range own {
		rec := testobj.HTTPGetAs(tenant, handlers[g.handler], g.path)
		if rec.Code != http.StatusOK {
			t.Fatalf("%s %s as the tenant: HTTP %d: %s", g.handler, g.path, rec.Code, rec.Body)
		}
		bodies[g] = rec.Body.String()
		// A caller who may not list volumes is shown only those of its namespace, everywhere:
		// an explanation counts the others instead of listing them.
		secrets := []string{"team-b", "claim-of-b", "pending-of-b", uidOfB, "node-of-b", "vol-failed", "vol-b"}
		for _, secret := range secrets {
			if i := strings.Index(bodies[g], secret); i >= 0 {
				t.Errorf("%s %s as team-a's tenant shows %q: ...%s...", g.handler, g.path, secret, bodies[g][max(0, i-100):min(len(bodies[g]), i+60)])
			}
		}
	}
	// What the tenant must see, so that nothing above was vacuous.
	var rep audit.Report
	if err := json.Unmarshal([]byte(bodies[get{"report", "/"}]), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Filtered) == 0 {
		t.Error("the tenant's report does not say what it left out")
	}
	if len(rep.Findings) == 0 || rep.Summary.Objects != 3 {
		t.Errorf("the tenant's report: %d findings over %d objects, want its claim's over 3 (two claims, one volume)", len(rep.Findings), rep.Summary.Objects)
	}
	for _, f := range rep.Findings {
		if f.Namespace != "team-a" {
			t.Errorf("the tenant's report has %s on %s %s/%s", f.Rule, f.Kind, f.Namespace, f.Object)
		}
	}
	for g, want := range map[get][]string{
		{"dashboard", "/"}:                    {"claim-of-a", "pending-of-a", "<td>vol-a</td>", `id="filtered"`, "may not list persistentvolumes"},
		{"api", "/pvc/team-a/pending-of-a"}:   {"1 volume of class gold you cannot read: 1 bound", "1 volume of class silver you cannot read: 1 bound"},
		{"pages", "/pvc/team-a/pending-of-a"}: {"1 volume of class gold you cannot read: 1 bound", `id="filtered"`},
		{"pages", "/pv/vol-a"}:                {"team-a/claim-of-a"},
	} {
		for _, s := range want {
			if !strings.Contains(bodies[g], s) {
				t.Errorf("%s %s as the tenant lacks %q", g.handler, g.path, s)
			}
		}
	}
	// team-b's objects: its claims are forbidden, its volumes do not exist for team-a.
	for g, want := range map[get]int{{"api", "/pvc/team-b/claim-of-b"}: 403, {"pages", "/pvc/team-b/pending-of-b"}: 403,
		{"api", "/pv/vol-b"}: 404, {"pages", "/pv/vol-b-reserved"}: 404, {"api", "/pv/vol-failed"}: 404} {
		if rec := testobj.HTTPGetAs(tenant, handlers[g.handler], g.path); rec.Code != want {
			t.Errorf("%s %s as team-a's tenant: HTTP %d, want %d", g.handler, g.path, rec.Code, want)
		}
	}

	// A tenant who may list volumes too sees them all, but still not team-b's claims.
	withVolumes := access.NewReader("tenant-a", false, []string{"team-a"}, true, false)
	dash := testobj.HTTPGetAs(withVolumes, handlers["dashboard"], "/").Body.String()
	for _, s := range []string{"<td>vol-b</td>", "<td>vol-failed</td>", policy.HiddenClaim} {
		if !strings.Contains(dash, s) {
			t.Errorf("the dashboard for a tenant who may list volumes lacks %q", s)
		}
	}
	if strings.Contains(dash, "claim-of-b") || strings.Contains(dash, "team-b") {
		t.Error("the dashboard for a tenant who may list volumes names team-b's claims")
	}

	// The cluster reader sees everything, and nothing is said to be filtered.
	reader := access.Everything("reader")
	for _, g := range []get{{"report", "/"}, {"dashboard", "/"}, {"api", "/pvc/team-b/pending-of-b"}} {
		body := testobj.HTTPGetAs(reader, handlers[g.handler], g.path).Body.String()
		for _, s := range []string{"team-b", "claim-of-b"} {
			if g.handler != "api" && !strings.Contains(body, s) {
				t.Errorf("%s %s as a cluster reader lacks %q", g.handler, g.path, s)
			}
		}
		if strings.Contains(body, `id="filtered"`) || strings.Contains(body, policy.HiddenClaim) {
			t.Errorf("%s %s as a cluster reader says something was filtered", g.handler, g.path)
		}
	}
	if body := testobj.HTTPGetAs(reader, handlers["api"], "/pvc/team-b/pending-of-b").Body.String(); !strings.Contains(body, "node-of-b") {
		t.Error("a cluster reader's explanation of team-b's pending claim lacks its selected node")
	}

	// A request that reached a handler without the guard reads nothing.
	rec := testobj.HTTPGetAs(&access.Reader{}, handlers["api"], "/pvc/team-a/claim-of-a")
	if rec.Code != http.StatusForbidden {
		t.Errorf("an explanation without a reader: HTTP %d, want 403", rec.Code)
	}
}

// TestBindingRowsCarryClaimsOnlyAsTexts: the dashboard's volume rows hold as plain text only what
// the volume says of itself; the claim it points at and that claim's phase are rendered per
// caller (policy.Redact).
func TestBindingRowsCarryClaimsOnlyAsTexts(t *testing.T) {
	want := []string{"Binding.Volume", "Binding.VolumePhase", "Binding.Capacity", "Binding.Class", "Binding.ReclaimPolicy"}
	if got := policy.PlainFields(reflect.TypeFor[audit.Binding]()); !slices.Equal(got, want) {
		t.Errorf("the plain fields of a Binding are %q, want the reviewed %q: a field that may name a claim must be a policy.Text", got, want)
	}
}
