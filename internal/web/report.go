package web

import (
	"encoding/json"
	"net/http"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/audit"
	"github.com/pvguard/pvguard/internal/access"
)

// ReportHandler serves the latest report of r as JSON (read-only).
// Each caller sees the findings of what they may read (access.FromContext, set by the guard the
// server mounts it behind). cache is what r audits, whose claims and volumes say which names to
// hide; log is told when the report cannot be filtered.
func ReportHandler(r *audit.Runner, cache client.Reader, log logr.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		v, err := visibilityOf(req.Context(), access.FromContext(req.Context()), cache)
		if err != nil {
			log.Error(err, "filtering the report")
			http.Error(w, "pvguard: cannot filter the report: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(v.report(r.Latest()))
	})
}
