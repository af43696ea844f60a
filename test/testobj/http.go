package testobj

import (
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/pvguard/pvguard/internal/access"
)

// ExplainNow is the fixed time the explain and web tests explain at.
var ExplainNow = time.Date(2026, 11, 24, 6, 0, 0, 0, time.UTC)

// HTTPGet is GET path as a caller who may read everything.
func HTTPGet(h http.Handler, path string) *httptest.ResponseRecorder {
	return HTTPGetAs(access.Everything("admin"), h, path)
}

// HTTPGetAs is GET path as a caller with reader rd, as the server's guard passes it on.
func HTTPGetAs(rd *access.Reader, h http.Handler, path string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	h.ServeHTTP(rec, req.WithContext(access.WithReader(req.Context(), rd)))
	return rec
}
