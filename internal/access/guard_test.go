package access_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/pvguard/pvguard/internal/access"
)

// TestGuardReaders: the reader a caller gets is what the authorizer allows, per namespace of the
// cluster's; an authorizer that cannot answer is a 503, never an open door.
func TestGuardReaders(t *testing.T) {
	namespaces := func(context.Context) ([]string, error) { return []string{"a", "b", "c"}, nil }
	rules := access.StaticRules{"tenant": {"persistentvolumeclaims/a", "persistentvolumeclaims/c"}, "volumes": {"persistentvolumes"}}
	g := access.NewStaticGuard(access.StaticTokens{"t": "tenant", "v": "volumes"}, rules, namespaces)
	var got *access.Reader
	h := g.Authenticate(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { got = access.FromContext(r.Context()) }))
	serve := func(h http.Handler, token string) int {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	if code := serve(h, "t"); code != http.StatusOK || got.User != "tenant" || !got.Claims("a") || got.Claims("b") || !got.Claims("c") || got.Volumes {
		t.Errorf("tenant: HTTP %d, reader %+v (namespaces %v)", code, got, got.Namespaces())
	}
	if code := serve(h, "v"); code != http.StatusOK || !got.Volumes || got.Claims("a") {
		t.Errorf("volume lister: HTTP %d, reader %+v", code, got)
	}

	failing := authorizer.AuthorizerFunc(func(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
		return authorizer.DecisionNoOpinion, "", errors.New("apiserver unreachable")
	})
	broken, err := access.NewGuard(access.Options{Authenticator: access.StaticTokens{"t": "tenant"}, Authorizer: failing, Namespaces: namespaces})
	if err != nil {
		t.Fatal(err)
	}
	reached := false
	bh := broken.Authenticate(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached = true }))
	if code := serve(bh, "t"); code != http.StatusServiceUnavailable || reached {
		t.Errorf("authorizer failing: HTTP %d (handler reached: %v), want 503", code, reached)
	}
	if _, err := access.NewGuard(access.Options{}); err == nil {
		t.Error("a guard without a client, authenticator or authorizer was built")
	}
}
