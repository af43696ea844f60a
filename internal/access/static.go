package access

import (
	"context"
	"net/http"
	"strings"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// StaticTokens is an authenticator of fixed bearer tokens (token to user name), for tests of the
// handlers behind a Guard; a server uses TokenReviews (NewGuard with a Client).
type StaticTokens map[string]string

// AuthenticateRequest implements authenticator.Request.
func (s StaticTokens) AuthenticateRequest(req *http.Request) (*authenticator.Response, bool, error) {
	token, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return nil, false, nil
	}
	name, ok := s[strings.TrimSpace(token)]
	if !ok {
		return nil, false, nil
	}
	return &authenticator.Response{User: &user.DefaultInfo{Name: name}}, true, nil
}

// StaticRules is an authorizer of fixed grants, for tests: user name to the "resource" (every
// namespace) or "resource/namespace" they may list.
type StaticRules map[string][]string

// Authorize implements authorizer.Authorizer.
func (s StaticRules) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	if a.GetUser() == nil || a.GetVerb() != "list" {
		return authorizer.DecisionNoOpinion, "", nil
	}
	for _, g := range s[a.GetUser().GetName()] {
		if g == a.GetResource() || (a.GetNamespace() != "" && g == a.GetResource()+"/"+a.GetNamespace()) {
			return authorizer.DecisionAllow, "", nil
		}
	}
	return authorizer.DecisionNoOpinion, "", nil
}

// NewStaticGuard is a guard of fixed tokens and grants, for tests.
func NewStaticGuard(tokens StaticTokens, rules StaticRules, namespaces func(context.Context) ([]string, error)) *Guard {
	g, err := NewGuard(Options{Authenticator: tokens, Authorizer: authorizer.AuthorizerFunc(rules.Authorize), Namespaces: namespaces})
	if err != nil {
		panic(err) // cannot happen: both are given
	}
	return g
}
