package explain_test

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/explain"
	"github.com/pvguard/pvguard/internal/access"
	"github.com/pvguard/pvguard/policy"
	. "github.com/pvguard/pvguard/test/testobj"
)

// TestExplanationsCarryReferencesOnlyAsTexts: the fields of an explanation that are not Texts
// are the reviewed ones, none of which can name what the caller may not read: the claim itself,
// its pods (in its namespace), classes, nodes, enumerations, the counts of hidden volumes, the
// refusals of events about the claim (in its namespace), the counts of the candidates not listed
// (by check) and the token of the next page (an offset), and Candidate.Volume, whose rows the
// caller may not read are taken out (HiddenVolumes) before it is served.
func TestExplanationsCarryReferencesOnlyAsTexts(t *testing.T) {
	want := []string{"Explanation.Claim", "Explanation.Phase", "Explanation.Class", "Explanation.BindingMode", "Explanation.SelectedNode",
		"Explanation.WaitingFor", "Explanation.Provisioner", "Explanation.ProvisionerRunning", "Explanation.Pods",
		"Candidate.Volume", "Candidate.Class", "Result.Check", "CandidateGroup.Failing", "Explanation.Continue", "HiddenVolumes.Class", "HiddenVolumes.Failing", "HiddenVolumes.Text",
		"Refusal.Point", "Refusal.Name", "Refusal.Rule", "Refusal.Reason", "Refusal.Source"}
	if got := policy.PlainFields(reflect.TypeFor[explain.Explanation]()); !slices.Equal(got, want) {
		t.Errorf("the plain fields of an Explanation are %q, want the reviewed %q: a field that may name an object must be a policy.Text", got, want)
	}
}

// TestTenantsExplanationCountsTheVolumesItCannotRead: a tenant who may list only its namespace's
// claims is told of its Pending claim's candidates only the volumes that are its namespace's
// (pre-bound to a claim there); the others are counted by class and by what keeps each from the
// claim ("2 volumes of class local you cannot read: 1 too small, 1 bound"), and the verdict names
// none of them nor the claim in another namespace. A cluster reader sees every row.
func TestTenantsExplanationCountsTheVolumesItCannotRead(t *testing.T) {
	objs := []client.Object{
		StorageClass("local", "kubernetes.io/no-provisioner"),
		PVC("team-a", "data", ClaimClass("local"), Request("5Gi")),
		PVC("team-a", "other", ClaimClass("local"), Request("50Gi")),
		PVC("team-b", "x", ClaimClass("local"), ClaimUID("uid-of-x"), ClaimBoundTo("pv-b-bound")),
		PV("pv-a-prebound", Class("local"), Capacity("50Gi"), ClaimRef("team-a", "other", ""), Phase(corev1.VolumeAvailable)),
		PV("pv-b-bound", Class("local"), Capacity("10Gi"), ClaimRef("team-b", "x", "uid-of-x"), Phase(corev1.VolumeBound)),
		PV("pv-small", Class("local"), Capacity("1Gi"), Phase(corev1.VolumeAvailable)),
	}
	x := explain.NewService(explainOptions(objs...))
	ctx := context.Background()
	tenant := access.NewReader("alice", false, []string{"team-a"}, false, false)
	e, err := x.Claim(ctx, tenant, "team-a", "data", explain.CandidatePage{})
	if err != nil {
		t.Fatal(err)
	}
	body := asJSON(t, e)
	for _, secret := range []string{"pv-b-bound", "pv-small", "team-b", "uid-of-x"} {
		if strings.Contains(body, secret) {
			t.Errorf("the tenant's explanation names %q: %s", secret, body)
		}
	}
	if len(e.Candidates) != 1 || e.Candidates[0].Volume != "pv-a-prebound" {
		t.Errorf("candidates %+v, want only the volume pre-bound in team-a", e.Candidates)
	}
	if len(e.Hidden) != 1 || e.Hidden[0].Text != "2 volumes of class local you cannot read: 1 too small, 1 bound" {
		t.Errorf("hidden %+v, want 2 volumes of class local counted: 1 too small, 1 bound", e.Hidden)
	}

	if e, err = x.Claim(ctx, access.Everything("admin"), "team-a", "data", explain.CandidatePage{}); err != nil {
		t.Fatal(err)
	}
	body = asJSON(t, e)
	for _, s := range []string{"pv-b-bound", "pv-small", "team-b/x"} {
		if !strings.Contains(body, s) {
			t.Errorf("the cluster reader's explanation lacks %q", s)
		}
	}
	if strings.Contains(body, `"hidden"`) {
		t.Errorf("the cluster reader's explanation hides volumes: %s", body)
	}
}

// TestVolumeExplanationsCarryReferencesOnlyAsTexts: a volume's explanation holds as plain text
// only the volume itself (which its caller may read), its phase and reclaim policy, and its
// finalizers' names and holders (components and drivers); its claim, that claim's state, what
// the binder does next, what each finalizer waits for and the findings are Texts.
func TestVolumeExplanationsCarryReferencesOnlyAsTexts(t *testing.T) {
	want := []string{"VolumeExplanation.Volume", "VolumeExplanation.Phase", "VolumeExplanation.ReclaimPolicy",
		"Finalizer.Name", "Finalizer.Holder"}
	if got := policy.PlainFields(reflect.TypeFor[explain.VolumeExplanation]()); !slices.Equal(got, want) {
		t.Errorf("the plain fields of a VolumeExplanation are %q, want the reviewed %q: a field that may name an object must be a policy.Text", got, want)
	}
}

// TestVolumeExplanationNamesItsClaimOnlyToTheClaimsReaders: the explanation of a volume whose
// claim was deleted and re-created names that claim, its uids, whether it exists and what the
// binder does about it only to a caller who may read the claim. A caller who may list volumes
// but not that namespace's claims is told "a claim in another namespace", what the volume itself
// says of it ("bound"), that the binder's next step depends on a claim it cannot read, and the
// findings without the claim's name or uid (internal/web's
// TestVolumePageLinksItsClaimOnlyForTheClaimsReaders holds the page to the same).
func TestVolumeExplanationNamesItsClaimOnlyToTheClaimsReaders(t *testing.T) {
	objs := []client.Object{
		PVC("team-b", "x", ClaimUID("uid-new-x"), ClaimBoundTo("pv-b")),
		PV("pv-b", Capacity("10Gi"), ClaimRef("team-b", "x", "uid-old-x"), Phase(corev1.VolumeBound)),
	}
	x := explain.NewService(explainOptions(objs...))
	ctx := context.Background()
	explained := func(rd *access.Reader) (*explain.VolumeExplanation, string) {
		t.Helper()
		e, err := x.Volume(ctx, rd, "pv-b")
		if err != nil {
			t.Fatalf("%s: %v", rd.User, err)
		}
		return e, asJSON(t, e)
	}

	_, admin := explained(access.Everything("admin"))
	for _, s := range []string{`"claim": "team-b/x"`, "uid-old-x", `"findings": [`} {
		if !strings.Contains(admin, s) {
			t.Fatalf("the cluster reader's explanation lacks %s: %s", s, admin)
		}
	}

	volumes := access.NewReader("carol", false, []string{"team-a"}, true, true)
	e, body := explained(volumes)
	for _, secret := range []string{"team-b", "uid-old-x", "uid-new-x", "earlier claim", "Released"} {
		if strings.Contains(body, secret) {
			t.Errorf("the explanation for a reader of volumes only names %q: %s", secret, body)
		}
	}
	if e.Claim.String() != policy.HiddenClaim || e.ClaimState.String() != "bound" || e.Next.String() != explain.NextHidden {
		t.Errorf("claim %q (%q), next %q; want %q (bound), %q", e.Claim, e.ClaimState, e.Next, policy.HiddenClaim, explain.NextHidden)
	}
	if len(e.Findings) == 0 || !strings.Contains(e.Findings[0].String(), policy.HiddenClaim) {
		t.Errorf("findings %q, want them kept with the claim hidden", e.Findings)
	}

	owner := access.NewReader("bob", false, []string{"team-b"}, false, false)
	_, body = explained(owner)
	for _, s := range []string{`"claim": "team-b/x"`, `"claimState": "bound to an earlier claim of that name (uid uid-old-x)"`, "phase to Released"} {
		if !strings.Contains(body, s) {
			t.Errorf("the claim's reader's explanation lacks %s: %s", s, body)
		}
	}
	if strings.Contains(body, `"findings"`) {
		t.Errorf("a caller who may not list volumes is told the volume's findings: %s", body)
	}
}
