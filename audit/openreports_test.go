package audit_test

import (
	"testing"
	"time"

	"github.com/pvguard/pvguard/audit"
	"github.com/pvguard/pvguard/policy"
)

func TestOpenReports(t *testing.T) {
	now := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
	f := func(rule policy.RuleID, action policy.Action, kind policy.Kind, ns, name string) policy.Finding {
		return policy.Finding{Rule: rule, Name: "n", Action: action, Object: policy.ObjectRef{Kind: kind, Namespace: ns, Name: name}, Message: "m", Field: "spec.x"}
	}
	findings := []policy.Finding{
		f("PVG001", policy.ActionDeny, policy.KindPersistentVolumeClaim, "team-a", "a1"),
		f("PVG010", policy.ActionWarn, policy.KindPersistentVolumeClaim, "team-a", "a2"),
		f("PVG021", policy.ActionAudit, policy.KindPersistentVolumeClaim, "team-a", "a3"),
		f("PVG001", policy.ActionDeny, policy.KindPersistentVolumeClaim, "team-b", "b1"),
		f("PVG024", policy.ActionAudit, policy.KindPersistentVolume, "", "pv-1"),
		f("PVG017", policy.ActionWarn, policy.KindStorageClass, "", "sc-1"),
	}
	reports, cluster := audit.OpenReports(findings, now, 2)

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
	if r, c := audit.OpenReports(nil, now, 0); len(r) != 0 || len(c) != 0 {
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
