package webhook_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"

	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/test/testobj"
	"github.com/pvguard/pvguard/webhook"
)

// rightsOf is ReadRights from a fixed table: user -> "verb resource namespace" allowed. unanswered
// makes every question go unanswered, as when the budget is spent.
type rightsOf struct {
	allowed    map[string][]string
	unanswered bool
	asked      *int
}

func (r rightsOf) May(_ context.Context, u policy.UserInfo, verb, resource, namespace string) (bool, bool) {
	if r.asked != nil {
		*r.asked++
	}
	if r.unanswered {
		return false, false
	}
	for _, a := range r.allowed[u.Username] {
		if a == verb+" "+resource+" "+namespace || a == verb+" "+resource+" *" {
			return true, true
		}
	}
	return false, true
}

// tenantWorld: team-b's claim x is bound to pv-b; team-a has its own claim bound to pv-a.
func tenantWorld() *testobj.View {
	x := testobj.PVC("team-b", "x", testobj.ClaimUID("uid-of-x"), testobj.ClaimBoundTo("pv-b"))
	mine := testobj.PVC("team-a", "mine", testobj.ClaimUID("uid-of-mine"), testobj.ClaimBoundTo("pv-a"))
	return testobj.NewView(x, mine, testobj.PV("pv-b", testobj.BoundTo(x)), testobj.PV("pv-a", testobj.BoundTo(mine)))
}

func validatorFor(kind policy.Kind, view *testobj.View, opts ...webhook.ValidatorOption) *webhook.Validator {
	return webhook.NewValidator(kind, webhook.StaticEngine{E: policy.NewEngine(nil)}, webhook.StaticView{V: view}, nil, opts...)
}

// TestAdmissionMessagesNameOnlyWhatTheRequesterReads: a tenant's claim naming another tenant's
// bound volume is refused (PVG004) with a message that says the volume is claimed by "a claim in
// another namespace", not which; an admin whose read rights reach team-b is told
// "team-b/x", as before; when the read rights cannot answer in budget, the message is the
// tenant's. A crafted volume naming team-b's claim with a guessed uid learns neither the live
// uid nor whether the claim exists (PVG002).
func TestAdmissionMessagesNameOnlyWhatTheRequesterReads(t *testing.T) {
	claim := testobj.PVC("team-a", "grab", testobj.VolumeName("pv-b"))
	review := testobj.Review(t, testobj.PVCKind, "persistentvolumeclaims", admissionv1.Create, claim, nil, "alice")
	rights := rightsOf{allowed: map[string][]string{"admin": {"get persistentvolumeclaims *", "get persistentvolumes *"}}}
	deny := func(v *webhook.Validator, body []byte) string {
		t.Helper()
		_, resp := post(t, webhook.Review(v, logr.Discard(), nil), webhook.PathValidatePVC, "application/json", bytes.NewReader(body))
		if resp == nil || resp.Allowed {
			t.Fatalf("want a denial, got %+v", resp)
		}
		return resp.Result.Message
	}
	for name, v := range map[string]*webhook.Validator{
		"without read rights": validatorFor(policy.KindPersistentVolumeClaim, tenantWorld()),
		"with read rights":    validatorFor(policy.KindPersistentVolumeClaim, tenantWorld(), webhook.WithReadRights(rights)),
		"rights out of budget": validatorFor(policy.KindPersistentVolumeClaim, tenantWorld(),
			webhook.WithReadRights(rightsOf{unanswered: true})),
	} {
		msg := deny(v, review)
		want := "[PVG004 no-double-binding] PersistentVolumeClaim team-a/grab names PersistentVolume pv-b, which is already claimed by a claim in another namespace"
		if !strings.HasPrefix(msg, want) || strings.Contains(msg, "team-b") || strings.Contains(msg, "uid-of-x") {
			t.Errorf("%s: the tenant is told %q, want it to start %q and name nothing of team-b", name, msg, want)
		}
	}
	adminReview := testobj.Review(t, testobj.PVCKind, "persistentvolumeclaims", admissionv1.Create, claim, nil, "admin")
	msg := deny(validatorFor(policy.KindPersistentVolumeClaim, tenantWorld(), webhook.WithReadRights(rights)), adminReview)
	if !strings.Contains(msg, "already claimed by PersistentVolumeClaim team-b/x") || strings.Contains(msg, "uid-of-x") {
		t.Errorf("the admin is told %q, want team-b/x named (and no live uid)", msg)
	}
	if msg := deny(validatorFor(policy.KindPersistentVolumeClaim, tenantWorld()), adminReview); strings.Contains(msg, "team-b") {
		t.Errorf("without read rights (a review nobody vouches for) the admin's identity is not trusted, yet the message is %q", msg)
	}

	// A crafted volume naming team-b/x with a guessed uid, as system:masters: the same message
	// whether x exists or not, without x's uid.
	crafted := testobj.Review(t, testobj.PVKind, "persistentvolumes", admissionv1.Create,
		testobj.PV("probe", testobj.ClaimRef("team-b", "x", "guessed-uid")), nil, "system:admin")
	pvDeny := func(view *testobj.View) string {
		t.Helper()
		_, resp := post(t, webhook.Review(validatorFor(policy.KindPersistentVolume, view), logr.Discard(), nil), webhook.PathValidatePV, "application/json", bytes.NewReader(crafted))
		if resp == nil || resp.Allowed {
			t.Fatalf("want a denial, got %+v", resp)
		}
		return resp.Result.Message
	}
	exists, absent := pvDeny(tenantWorld()), pvDeny(testobj.NewView())
	if strings.Contains(exists, "uid-of-x") || exists != absent {
		t.Errorf("a crafted review learns about team-b/x:\n exists: %q\n absent: %q", exists, absent)
	}
	if !strings.Contains(exists, "guessed-uid") || !strings.Contains(exists, "team-b/x") {
		t.Errorf("the message %q does not name what the request carried", exists)
	}
}

// TestReadRightsAreAskedOnlyForWhatTheRequestDoesNotName: a denial that names only the request's
// own objects asks nothing; an admitted write asks nothing.
func TestReadRightsAreAskedOnlyForWhatTheRequestDoesNotName(t *testing.T) {
	asked := 0
	v := validatorFor(policy.KindPersistentVolumeClaim, tenantWorld(), webhook.WithReadRights(rightsOf{asked: &asked}))
	h := webhook.Review(v, logr.Discard(), nil)
	ok := testobj.Review(t, testobj.PVCKind, "persistentvolumeclaims", admissionv1.Create, testobj.PVC("team-a", "fresh"), nil, "alice")
	if _, resp := post(t, h, webhook.PathValidatePVC, "application/json", bytes.NewReader(ok)); resp == nil || !resp.Allowed {
		t.Fatalf("want admitted, got %+v", resp)
	}
	if asked != 0 {
		t.Errorf("an admitted write asked the read rights %d times", asked)
	}
	grab := testobj.Review(t, testobj.PVCKind, "persistentvolumeclaims", admissionv1.Create, testobj.PVC("team-a", "grab", testobj.VolumeName("pv-b")), nil, "alice")
	post(t, h, webhook.PathValidatePVC, "application/json", bytes.NewReader(grab))
	if asked == 0 || asked > 2 {
		t.Errorf("a denial naming another namespace's claim asked the read rights %d times, want once or twice (claims there, maybe volumes)", asked)
	}
}
