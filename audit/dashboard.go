package audit

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/pvguard/pvguard/clusterstate"
	"github.com/pvguard/pvguard/internal/access"
	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/storage"
)

// Binding is one row of the dashboard's PV <-> PVC table.
type Binding struct {
	Volume, VolumePhase, Capacity, Class, ReclaimPolicy string
	Claim, ClaimPhase                                   string
}

// bindingOf is a volume's row: the claim it points at and that claim's phase ("missing" when the
// claim is gone or was re-created).
func bindingOf(pv *corev1.PersistentVolume, v policy.View) (Binding, error) {
	b := Binding{Volume: pv.Name, VolumePhase: string(pv.Status.Phase), Class: storage.VolumeClass(pv),
		ReclaimPolicy: string(pv.Spec.PersistentVolumeReclaimPolicy)}
	if q, ok := pv.Spec.Capacity[corev1.ResourceStorage]; ok {
		b.Capacity = q.String()
	}
	if ref := pv.Spec.ClaimRef; ref != nil {
		b.Claim = ref.Namespace + "/" + ref.Name
		b.ClaimPhase = "missing"
		if !storage.NamesAClaim(ref) {
			return b, nil
		}
		pvc, err := v.PersistentVolumeClaim(ref.Namespace, ref.Name)
		if err != nil {
			return b, fmt.Errorf("reading the claim of %s: %w", pv.Name, err)
		}
		if pvc != nil && (ref.UID == "" || ref.UID == pvc.UID) {
			b.ClaimPhase = string(pvc.Status.Phase)
		}
	}
	return b, nil
}

// PendingClaim is one row of the dashboard's pending claims: a claim not bound.
type PendingClaim struct {
	Namespace, Name, Phase, Class, Request string
}

// pendingOf is the claim's pending row, unless it is bound: Bound and bind-completed, as the
// binders leave a claim whose binding they finished.
func pendingOf(c *corev1.PersistentVolumeClaim) (PendingClaim, bool) {
	if _, done := c.Annotations[storage.AnnBindCompleted]; done && c.Status.Phase == corev1.ClaimBound {
		return PendingClaim{}, false
	}
	p := PendingClaim{Namespace: c.Namespace, Name: c.Name, Phase: string(c.Status.Phase), Class: storage.ClaimClass(c)}
	if q, ok := c.Spec.Resources.Requests[corev1.ResourceStorage]; ok {
		p.Request = q.String()
	}
	return p, true
}

// PendingOf lists the claims of a state that are not bound, by namespace and name.
func PendingOf(s *clusterstate.State) []PendingClaim {
	var out []PendingClaim
	for _, c := range s.Claims() {
		if p, ok := pendingOf(c); ok {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// BindingsOf lists every volume of a state with the claim it points at, by volume name.
func BindingsOf(s *clusterstate.State) []Binding {
	out := make([]Binding, 0, len(s.Volumes()))
	for _, pv := range s.Volumes() {
		b, _ := bindingOf(pv, s) // a state's lookups cannot fail
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Volume < out[j].Volume })
	return out
}

//go:embed dashboard.html
var dashboardHTML string

var dashboardTemplate = template.Must(template.New("dashboard").Parse(dashboardHTML))

// bar is one bar of the findings-by-rule chart, laid out server-side so the page needs no
// charting library (nothing outside the cluster can be reached).
type bar struct {
	Rule  string
	Count int
	Y     int
	Width int
}

// pageCSP is the Content-Security-Policy of the dashboard and the explain pages: nothing is
// loaded from anywhere, the page's own style and script run.
const pageCSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"

// Page is what the dashboard shows.
type Page struct {
	Report   Report
	Bindings []Binding
	Pending  []PendingClaim
	// ExplainLinks makes each pending claim a link to its explain page (explain/pvc/NS/NAME,
	// relative to the dashboard), which the server serves beside it (ExplainPages). A file
	// written by `pvguard audit -o html` has no such pages, and no links.
	ExplainLinks bool
	// Filtered says what the page leaves out for its reader, and why (access.Reader.Filtered).
	Filtered []string
}

// DashboardHandler serves the read-only dashboard: totals, a chart of findings by rule, the
// findings (filterable in the page), the PV <-> PVC bindings and the pending claims of the latest
// audit, each claim linked to its explain page; each caller sees what they may read
// (access.FromContext, set by the guard the server mounts it behind), and what was left out.
func DashboardHandler(r *Runner) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/" {
			http.NotFound(w, req)
			return
		}
		rd := access.FromContext(req.Context())
		v, err := visibilityOf(req.Context(), rd, r.o.Cache)
		if err != nil {
			r.o.Log.Error(err, "filtering the dashboard")
			http.Error(w, "pvguard: cannot filter the dashboard: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Content-Security-Policy", pageCSP)
		_ = RenderDashboard(w, Page{Report: v.report(r.Latest()), Bindings: v.bindings(r.Bindings()), Pending: v.pending(r.Pending()),
			ExplainLinks: true, Filtered: rd.Filtered()})
	})
}

// RenderDashboard writes the dashboard page as one self-contained HTML document (inline style
// and script, no external resources): the server's page and `pvguard audit -o html`.
func RenderDashboard(w io.Writer, p Page) error {
	counts := map[string]int{}
	for _, f := range p.Report.Findings {
		counts[f.Rule]++
	}
	rules := make([]string, 0, len(counts))
	most := 0
	for rule, n := range counts {
		rules = append(rules, rule)
		most = max(most, n)
	}
	sort.Strings(rules)
	bars := make([]bar, len(rules))
	for i, rule := range rules {
		bars[i] = bar{Rule: rule, Count: counts[rule], Y: i * 24, Width: 10 + 400*counts[rule]/most}
	}
	if err := dashboardTemplate.Execute(w, map[string]any{
		"Report": p.Report, "Bars": bars, "ChartHeight": len(bars)*24 + 4, "Bindings": p.Bindings,
		"Pending": p.Pending, "ExplainLinks": p.ExplainLinks, "Filtered": p.Filtered,
	}); err != nil {
		return fmt.Errorf("rendering the dashboard: %w", err)
	}
	return nil
}
