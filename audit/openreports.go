package audit

import (
	"fmt"
	"sort"
	"time"

	openreports "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pvguard/pvguard/policy"
)

// DefaultMaxResults bounds the results in one report object; more are split across objects
// named pvguard, pvguard-2, ... so no object nears etcd's size limit.
const DefaultMaxResults = 500

// ManagedByLabel marks the report objects pvguard owns.
const ManagedByLabel = "app.kubernetes.io/managed-by"

// resultFor maps a finding's action to an OpenReports result and severity: a denied state
// fails, warnings warn, and audit-only findings warn at low severity.
func resultFor(a policy.Action) (openreports.Result, openreports.ResultSeverity) {
	switch a {
	case policy.ActionDeny:
		return "fail", "high"
	case policy.ActionWarn:
		return "warn", "medium"
	}
	return "warn", "low"
}

// OpenReports turns findings into openreports.io/v1alpha1 objects: one Report per namespace for
// findings on claims, one ClusterReport for volumes and classes, split at maxResults. A Report is
// read by whoever may read its namespace: its texts name only what they may read
// (policy.NamespaceReaders over v, which finds the volumes of the namespace; nil: no volume is
// named there). A ClusterReport is for the cluster's readers, and names everything.
func OpenReports(findings []policy.Finding, now time.Time, maxResults int, v policy.View, cfg *policy.Config) ([]*openreports.Report, []*openreports.ClusterReport) {
	if maxResults <= 0 {
		maxResults = DefaultMaxResults
	}
	byNS := map[string][]openreports.ReportResult{}
	for _, f := range findings {
		result, severity := resultFor(f.Action)
		var readers policy.Audience = policy.Everyone
		if f.Object.Namespace != "" {
			readers = policy.NamespaceReaders(f.Object.Namespace, v, cfg)
		}
		apiVersion := "v1"
		if f.Object.Kind == policy.KindStorageClass {
			apiVersion = "storage.k8s.io/v1"
		}
		byNS[f.Object.Namespace] = append(byNS[f.Object.Namespace], openreports.ReportResult{
			Source:      "pvguard",
			Policy:      "pvguard",
			Rule:        string(f.Rule),
			Category:    "storage binding",
			Severity:    severity,
			Timestamp:   metav1.Timestamp{Seconds: now.Unix()},
			Result:      result,
			Subjects:    []corev1.ObjectReference{{Kind: string(f.Object.Kind), APIVersion: apiVersion, Namespace: f.Object.Namespace, Name: f.Object.Name}},
			Description: f.Message.For(readers),
			Properties:  map[string]string{"name": f.Name, "action": string(f.Action), "field": f.Field, "hint": f.Hint.For(readers)},
		})
	}
	namespaces := make([]string, 0, len(byNS))
	for ns := range byNS {
		namespaces = append(namespaces, ns)
	}
	sort.Strings(namespaces)
	var reports []*openreports.Report
	var cluster []*openreports.ClusterReport
	for _, ns := range namespaces {
		results := byNS[ns]
		for part, start := 1, 0; start < len(results); part, start = part+1, start+maxResults {
			chunk := results[start:min(start+maxResults, len(results))]
			name := "pvguard"
			if part > 1 {
				name = fmt.Sprintf("pvguard-%d", part)
			}
			meta := metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{ManagedByLabel: "pvguard"}}
			if ns == "" {
				cluster = append(cluster, &openreports.ClusterReport{
					TypeMeta:   metav1.TypeMeta{APIVersion: openreports.SchemeGroupVersion.String(), Kind: "ClusterReport"},
					ObjectMeta: meta, Source: "pvguard", Summary: summarize(chunk), Results: chunk,
				})
				continue
			}
			reports = append(reports, &openreports.Report{
				TypeMeta:   metav1.TypeMeta{APIVersion: openreports.SchemeGroupVersion.String(), Kind: "Report"},
				ObjectMeta: meta, Source: "pvguard", Summary: summarize(chunk), Results: chunk,
			})
		}
	}
	return reports, cluster
}

func summarize(results []openreports.ReportResult) openreports.ReportSummary {
	var s openreports.ReportSummary
	for _, r := range results {
		switch r.Result {
		case "pass":
			s.Pass++
		case "fail":
			s.Fail++
		case "warn":
			s.Warn++
		case "error":
			s.Error++
		case "skip":
			s.Skip++
		}
	}
	return s
}
