package policy_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/storage"
	"github.com/pvguard/pvguard/test/testobj"
)

// TestMalformedClaimRefYieldsPVG014 checks that a claimRef without a name or a namespace is
// judged, not an internal error: it names no claim, so no rule reads one. The view refuses
// reads by an empty name or namespace, as the webhook's live reads are refused, so a rule that
// read the claim of such a reference would make Admit fail here.
func TestMalformedClaimRefYieldsPVG014(t *testing.T) {
	claim := testobj.PVC("team-a", "data", testobj.ClaimUID("uid-1"), testobj.ClaimBoundTo("pv-7"))
	bound := testobj.PV("pv-7", testobj.BoundTo(claim))
	noName := testobj.PV("pv-7", testobj.ClaimRef("team-a", "", "uid-1"), testobj.Phase(corev1.VolumeBound))
	for _, tc := range []struct {
		name   string
		review *policy.Review
		// want lists rule/field of each deny finding, in order.
		want []string
	}{
		{
			name:   "create with a uid but no name",
			review: pvCreate(admin, testobj.PV("pv-8", testobj.ClaimRef("team-a", "", "uid-1"))),
			want:   []string{"PVG014/spec.claimRef.name"},
		},
		{
			name:   "create with a uid but no namespace",
			review: pvCreate(admin, testobj.PV("pv-8", testobj.ClaimRef("", "data", "uid-1"))),
			want:   []string{"PVG014/spec.claimRef.namespace"},
		},
		{
			name:   "create with a uid and neither",
			review: pvCreate(admin, testobj.PV("pv-8", testobj.ClaimRef("", "", "uid-1"))),
			want:   []string{"PVG014/spec.claimRef.name", "PVG014/spec.claimRef.namespace"},
		},
		{
			name:   "pre-bind without a name",
			review: pvCreate(admin, testobj.PV("pv-8", testobj.ClaimRef("team-a", "", ""))),
			want:   []string{"PVG014/spec.claimRef.name"},
		},
		{
			name:   "a volume a claim completed its binding to, created with a malformed link, is also PVG002's",
			review: pvCreate(admin, testobj.PV("pv-7", testobj.ClaimRef("team-a", "", "uid-1"))),
			want:   []string{"PVG002/spec.claimRef", "PVG014/spec.claimRef.name"},
		},
		{
			name:   "bound volume re-pointed to no name",
			review: pvUpdate(admin, bound, testobj.PVWith(bound, testobj.ClaimRef("team-a", "", "uid-1"))),
			want:   []string{"PVG002/spec.claimRef", "PVG014/spec.claimRef.name"},
		},
		{
			name:   "stored malformed claimRef left as it is",
			review: pvUpdate(admin, noName, testobj.PVWith(noName, testobj.PVMeta(testobj.Label("tier", "gold")))),
		},
		{
			name:   "status write of a stored malformed claimRef",
			review: pvStatus(binder, noName, testobj.PVWith(noName, testobj.Phase(corev1.VolumeReleased))),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			view := testobj.NewView(claim, bound)
			view.StrictNames = true
			d, err := policy.NewEngine(nil).Admit(tc.review, view)
			if err != nil {
				t.Fatalf("Admit: %v", err)
			}
			var got []string
			for _, f := range d.Deny {
				got = append(got, string(f.Rule)+"/"+f.Field)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("deny findings %q, want %q; %v", got, tc.want, d.Deny)
			}
		})
	}

	// The audit reads the same way: a Bound volume whose claimRef names no claim is dangling.
	view := testobj.NewView(noName)
	view.StrictNames = true
	found, err := policy.NewEngine(nil).AuditObject(noName, view, time.Now())
	if err != nil {
		t.Fatalf("AuditObject: %v", err)
	}
	if !slices.ContainsFunc(found, func(f policy.Finding) bool {
		return f.Rule == "PVG020" && strings.Contains(f.Message.String(), "spec.claimRef names no claim")
	}) {
		t.Errorf("audit findings %v, want PVG020 saying the claimRef names no claim", found)
	}
}

// failingNodes is a view whose Node reads fail, so that only PVG009 cannot judge.
type failingNodes struct {
	*testobj.View
	err error
}

func (f failingNodes) Node(string) (*corev1.Node, error) { return nil, f.err }

// TestOneRuleFailingKeepsTheOthersFindings: a rule that cannot read what it needs does not hide
// what the other rules found, at admission and in the audit; its failure is returned beside them,
// naming the rule and the object.
func TestOneRuleFailingKeepsTheOthersFindings(t *testing.T) {
	boom := errors.New("nodes: connection refused")
	claim := testobj.PVC("team-a", "data", testobj.ClaimVolumeMode(corev1.PersistentVolumeBlock), testobj.VolumeName("pv-7"),
		testobj.ClaimMeta(testobj.Annotation(storage.AnnSelectedNode, "node-1")))
	pv := testobj.PV("pv-7", testobj.NodeAffinity(zoneKey, "zone-a"))
	view := failingNodes{View: testobj.NewView(pv), err: boom}

	checkErr := func(t *testing.T, err error) {
		t.Helper()
		var re *policy.RuleError
		if !errors.As(err, &re) || re.Rule != "PVG009" || re.Object.String() != "PersistentVolumeClaim team-a/data" || !errors.Is(err, boom) {
			t.Fatalf("error %v, want PVG009's failure on the claim, wrapping the view's error", err)
		}
		if msg := err.Error(); !strings.Contains(msg, "PVG009 node-affinity-match") || !strings.Contains(msg, "PersistentVolumeClaim team-a/data") {
			t.Errorf("error %q does not name the rule and the object", msg)
		}
	}

	d, err := policy.NewEngine(nil).Admit(pvcCreate(tenant, claim), view)
	checkErr(t, err)
	if len(d.Deny) != 1 || d.Deny[0].Rule != "PVG001" {
		t.Errorf("deny findings %v, want PVG001's", d.Deny)
	}

	found, err := policy.NewEngine(nil).AuditObject(claim, view, time.Now())
	checkErr(t, err)
	if !slices.ContainsFunc(found, func(f policy.Finding) bool { return f.Rule == "PVG001" }) {
		t.Errorf("audit findings %v, want PVG001's", found)
	}
}

// countingView counts volume reads and fails them.
type countingView struct {
	*testobj.View
	reads int
}

func (c *countingView) PersistentVolume(string) (*corev1.PersistentVolume, error) {
	c.reads++
	return nil, errors.New("timeout")
}

// TestFailedReadIsNotRepeatedByEveryRule: now that every rule runs after one fails, a read that
// failed is remembered for the evaluation, so an unreachable apiserver costs one wait, not one
// per rule that judges the pair.
func TestFailedReadIsNotRepeatedByEveryRule(t *testing.T) {
	view := &countingView{View: testobj.NewView()}
	d, err := policy.NewEngine(nil).Admit(pvcCreate(tenant, testobj.PVC("team-a", "data", testobj.VolumeName("pv-7"))), view)
	if err == nil {
		t.Fatalf("Admit succeeded (%+v) though every volume read fails", d)
	}
	if n := strings.Count(err.Error(), "evaluating PVG"); n < 2 {
		t.Fatalf("%d rules failed, want several (the test needs rules sharing the read): %v", n, err)
	}
	if view.reads != 1 {
		t.Errorf("volume read %d times, want once", view.reads)
	}
}

// TestSplitRuleErrors: what an audit returns is taken apart into the rules that could not judge
// an object, whose other findings are still reported, unless something else failed, which stops
// the audit.
func TestSplitRuleErrors(t *testing.T) {
	ruleErr := func(id policy.RuleID) error {
		return &policy.RuleError{Rule: id, Object: policy.ObjectRef{Kind: policy.KindPersistentVolume, Name: "pv-7"}, Err: errors.New("boom")}
	}
	listing := errors.New("listing volumes: forbidden")
	for _, tc := range []struct {
		name      string
		err       error
		wantRules int
		wantFatal bool
	}{
		{name: "nothing failed"},
		{name: "one rule", err: ruleErr("PVG009"), wantRules: 1},
		{name: "rules of several objects", err: errors.Join(errors.Join(ruleErr("PVG009"), ruleErr("PVG004")), nil, errors.Join(ruleErr("PVG020"))), wantRules: 3},
		{name: "anything else", err: listing, wantFatal: true},
		{name: "anything else among rule errors", err: errors.Join(ruleErr("PVG009"), listing), wantFatal: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rules, err := policy.SplitRuleErrors(tc.err)
			if (err != nil) != tc.wantFatal || len(rules) != tc.wantRules {
				t.Fatalf("got %d rule errors %v and error %v; want %d, fatal %v", len(rules), rules, err, tc.wantRules, tc.wantFatal)
			}
			if tc.wantFatal && !errors.Is(err, listing) {
				t.Errorf("error %v does not carry the cause", err)
			}
		})
	}
}
