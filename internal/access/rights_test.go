package access_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/pvguard/pvguard/internal/access"
	"github.com/pvguard/pvguard/policy"
)

// countingAuthorizer allows admins, counts its calls, and waits delay (or until the context ends).
type countingAuthorizer struct {
	calls atomic.Int32
	delay time.Duration
}

func (c *countingAuthorizer) Authorize(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	c.calls.Add(1)
	select {
	case <-time.After(c.delay):
	case <-ctx.Done():
		return authorizer.DecisionNoOpinion, "", ctx.Err()
	}
	if a.GetUser().GetName() == "admin" {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "", nil
}

// TestAdmissionRightsAreCachedAndBudgeted: an answer is asked once and then cached; questions
// beyond the budget, or slower than the timeout, go unanswered at once.
func TestAdmissionRightsAreCachedAndBudgeted(t *testing.T) {
	ctx := context.Background()
	admin, tenant := policy.UserInfo{Username: "admin"}, policy.UserInfo{Username: "alice"}
	authz := &countingAuthorizer{}
	r, err := access.NewAdmissionRights(access.AdmissionRightsOptions{Authorizer: authorizer.AuthorizerFunc(authz.Authorize), Rate: 1, Burst: 2})
	if err != nil {
		t.Fatal(err)
	}
	if ok, answered := r.May(ctx, admin, "get", "persistentvolumeclaims", "team-b"); !ok || !answered {
		t.Errorf("admin: %v %v, want allowed", ok, answered)
	}
	for range 5 {
		if ok, answered := r.May(ctx, admin, "get", "persistentvolumeclaims", "team-b"); !ok || !answered {
			t.Errorf("admin again: %v %v, want allowed from the cache", ok, answered)
		}
	}
	if ok, answered := r.May(ctx, tenant, "get", "persistentvolumeclaims", "team-b"); ok || !answered {
		t.Errorf("tenant: %v %v, want denied", ok, answered)
	}
	if n := authz.calls.Load(); n != 2 {
		t.Errorf("%d authorizations, want 2 (one per question)", n)
	}
	// The burst of 2 is spent: a new question goes unanswered without asking.
	if ok, answered := r.May(ctx, tenant, "get", "persistentvolumes", ""); ok || answered {
		t.Errorf("beyond the budget: %v %v, want unanswered", ok, answered)
	}
	if n := authz.calls.Load(); n != 2 {
		t.Errorf("%d authorizations, want none beyond the budget", n)
	}

	slow := &countingAuthorizer{delay: time.Minute}
	r, err = access.NewAdmissionRights(access.AdmissionRightsOptions{Authorizer: authorizer.AuthorizerFunc(slow.Authorize), Timeout: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if ok, answered := r.May(ctx, admin, "get", "persistentvolumes", ""); ok || answered {
		t.Errorf("a slow apiserver: %v %v, want unanswered", ok, answered)
	}
	if time.Since(start) > 10*time.Second {
		t.Errorf("a slow apiserver held the question for %s", time.Since(start))
	}
}
