package audit_test

import (
	"strings"
	"testing"
	"time"

	"github.com/pvguard/pvguard/audit"
	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/test/testobj"
)

func TestOpenReports(t *testing.T) {
	now := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
	f := func(rule policy.RuleID, action policy.Action, kind policy.Kind, ns, name string) policy.Finding {
		return policy.Finding{Rule: rule, Name: "n", Action: action, Object: policy.ObjectRef{Kind: kind, Namespace: ns, Name: name}, Message: policy.Plain("m"), Field: "spec.x"}
	}
	findings := []policy.Finding{
		f("PVG001", policy.ActionDeny, policy.KindPersistentVolumeClaim, "team-a", "a1"),
		f("PVG010", policy.ActionWarn, policy.KindPersistentVolumeClaim, "team-a", "a2"),
		f("PVG021", policy.ActionAudit, policy.KindPersistentVolumeClaim, "team-a", "a3"),
		f("PVG001", policy.ActionDeny, policy.KindPersistentVolumeClaim, "team-b", "b1"),
		f("PVG024", policy.ActionAudit, policy.KindPersistentVolume, "", "pv-1"),
		f("PVG017", policy.ActionWarn, policy.KindStorageClass, "", "sc-1"),
	}
	reports, cluster := audit.OpenReports(findings, now, 2, nil, nil)

	var names []string
	for _, r := range reports {
		names = append(names, r.Namespace+"/"+r.Name)
		if r.Kind != "Report" || r.APIVersion != "openreports.io/v1alpha1" || r.Labels[audit.ManagedByLabel] != "pvguard" || r.Source != "pvguard" {
			t.Errorf("report %s malformed: %+v", r.Name, r.ObjectMeta)
		}
		if len(r.Results) > 2 {
			t.Errorf("report %s has %d results, bound is 2", r.Name, len(r.Results))
		}
	}
	if want := "team-a/pvguard team-a/pvguard-2 team-b/pvguard"; join(names) != want {
		t.Fatalf("reports %q, want %q", join(names), want)
	}
	if s := reports[0].Summary; s.Fail != 1 || s.Warn != 1 {
		t.Errorf("team-a/pvguard summary %+v, want 1 fail 1 warn", s)
	}
	if r := reports[0].Results[0]; r.Rule != "PVG001" || r.Result != "fail" || r.Severity != "high" || r.Subjects[0].Name != "a1" || r.Properties["field"] != "spec.x" || r.Timestamp.Seconds != now.Unix() {
		t.Errorf("result %+v", r)
	}
	if len(cluster) != 1 || cluster[0].Kind != "ClusterReport" || len(cluster[0].Results) != 2 {
		t.Fatalf("cluster reports %+v", cluster)
	}
	if sc := cluster[0].Results[1].Subjects[0]; sc.Kind != "StorageClass" || sc.APIVersion != "storage.k8s.io/v1" {
		t.Errorf("storage class subject %+v", sc)
	}
	if r, c := audit.OpenReports(nil, now, 0, nil, nil); len(r) != 0 || len(c) != 0 {
		t.Errorf("no findings gave %d reports and %d cluster reports", len(r), len(c))
	}
}

func join(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += " "
		}
		out += x
	}
	return out
}

// TestOpenReportsNameOnlyWhatTheNamespaceReads: a namespace's Report, which whoever may read that
// namespace reads, names the claims of that namespace and the volumes linked to it, and says "a
// claim in another namespace" and "a volume you cannot read" for the others; the ClusterReport
// names everything.
func TestOpenReportsNameOnlyWhatTheNamespaceReads(t *testing.T) {
	own := policy.ObjectRef{Kind: policy.KindPersistentVolumeClaim, Namespace: "team-a", Name: "data"}
	other := policy.ObjectRef{Kind: policy.KindPersistentVolumeClaim, Namespace: "team-b", Name: "x"}
	ownVol, otherVol := policy.ObjectRef{Kind: policy.KindPersistentVolume, Name: "pv-a"}, policy.ObjectRef{Kind: policy.KindPersistentVolume, Name: "pv-b"}
	view := testobj.NewView(
		testobj.PV("pv-a", testobj.ClaimRef("team-a", "data", "")),
		testobj.PV("pv-b", testobj.ClaimRef("team-b", "x", "uid-x")),
	)
	msg := policy.Textf("%s names %s, bound to %s; %s is %s's", own, otherVol, policy.WithUID(other, "uid-x"), ownVol, own)
	findings := []policy.Finding{
		{Rule: "PVG004", Name: "n", Action: policy.ActionDeny, Object: own, Field: "spec.volumeName", Message: msg, Hint: msg},
		{Rule: "PVG004", Name: "n", Action: policy.ActionDeny, Object: otherVol, Field: "spec.claimRef", Message: msg},
	}
	reports, cluster := audit.OpenReports(findings, time.Now(), 0, view, nil)
	if len(reports) != 1 || len(cluster) != 1 {
		t.Fatalf("%d reports, %d cluster reports", len(reports), len(cluster))
	}
	got := reports[0].Results[0]
	want := "PersistentVolumeClaim team-a/data names a volume you cannot read, bound to a claim in another namespace; PersistentVolume pv-a is PersistentVolumeClaim team-a/data's"
	if got.Description != want || got.Properties["hint"] != want {
		t.Errorf("team-a's report says %q (hint %q), want %q", got.Description, got.Properties["hint"], want)
	}
	if got := cluster[0].Results[0].Description; got != msg.String() || !strings.Contains(got, "team-b/x (uid uid-x)") {
		t.Errorf("the cluster report says %q, want %q", got, msg.String())
	}
}
