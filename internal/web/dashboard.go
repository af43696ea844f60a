package web

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"sort"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/audit"
	"github.com/pvguard/pvguard/internal/access"
)

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

// Page is what the dashboard shows.
type Page struct {
	Report   audit.Report
	Bindings []audit.Binding
	Pending  []audit.PendingClaim
	// ExplainLinks makes each pending claim a link to its explain page (explain/pvc/NS/NAME,
	// relative to the dashboard), which the server serves beside it (ExplainPagesHandler). A file
	// written by `pvguard audit -o html` has no such pages, and no links.
	ExplainLinks bool
	// Filtered says what the page leaves out for its reader, and why (access.Reader.Filtered).
	Filtered []string
}

// DashboardHandler serves the read-only dashboard: totals, a chart of findings by rule, the
// findings (filterable in the page), the PV <-> PVC bindings and the pending claims of the latest
// audit of r, each claim linked to its explain page; each caller sees what they may read
// (access.FromContext, set by the guard the server mounts it behind), and what was left out.
// cache is what r audits, whose claims and volumes say which names to hide; log is told when
// the page cannot be filtered.
func DashboardHandler(r *audit.Runner, cache client.Reader, log logr.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/" {
			http.NotFound(w, req)
			return
		}
		rd := access.FromContext(req.Context())
		v, err := visibilityOf(req.Context(), rd, cache)
		if err != nil {
			log.Error(err, "filtering the dashboard")
			http.Error(w, "pvguard: cannot filter the dashboard: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Content-Security-Policy", PageCSP)
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
