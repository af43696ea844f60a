package web

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestProfilesOnlyOnTheMetricsAddressAndOnlyWhenAsked: profiles reveal and can slow the process,
// so they are served only with Profiling, and only on the plain metrics address, never on the
// port the apiserver and the dashboard's users reach.
func TestProfilesOnlyOnTheMetricsAddressAndOnlyWhenAsked(t *testing.T) {
	for _, tc := range []struct {
		name      string
		profiling bool
		plain     bool
		want      int
	}{
		{"off, metrics address", false, true, http.StatusNotFound},
		{"on, metrics address", true, true, http.StatusOK},
		{"on, webhook port", true, false, http.StatusNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewServer(Options{Profiling: tc.profiling})
			h := http.Handler(s.Handler())
			if tc.plain {
				h = s.plainRoutes()
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/pprof/heap?debug=1", nil))
			if rec.Code != tc.want {
				t.Errorf("GET /debug/pprof/heap: %d, want %d", rec.Code, tc.want)
			}
		})
	}
}
