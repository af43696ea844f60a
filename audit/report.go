package audit

import (
	"time"

	"github.com/pvguard/pvguard/policy"
)

// Report is an audit's result, as `pvguard audit -o json|yaml` prints it and /api/v1/report
// serves it.
type Report struct {
	// Time is when the audit ran (zero for offline audits of manifests).
	Time     time.Time `json:"time,omitzero"`
	Summary  Summary   `json:"summary"`
	Findings []Finding `json:"findings"`
	Errors   []string  `json:"errors,omitempty"`
	// Filtered says, when the server served the report to a caller who may not read everything,
	// what it left out and why (access.Reader.Filtered); the audit's errors are then left out too.
	Filtered []string `json:"filtered,omitempty"`
}

// Summary counts the objects read and the findings by action.
type Summary struct {
	Objects int            `json:"objects"`
	Actions map[string]int `json:"actions"`
}

// Finding is one finding in machine-readable form.
type Finding struct {
	Rule      string `json:"rule"`
	Name      string `json:"name"`
	Action    string `json:"action"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Object    string `json:"object"`
	Field     string `json:"field,omitempty"`
	// Message and Hint keep their references apart (policy.Text) until the report is served to
	// one reader (policy.Redact); as JSON they are the text for a reader who may read everything.
	Message policy.Text `json:"message"`
	Hint    policy.Text `json:"hint,omitzero"`
}

// NewReport builds a report from policy findings.
func NewReport(objects int, findings []policy.Finding) Report {
	r := Report{Summary: Summary{Objects: objects, Actions: map[string]int{}}, Findings: make([]Finding, 0, len(findings))}
	for _, f := range findings {
		r.Summary.Actions[string(f.Action)]++
		r.Findings = append(r.Findings, Finding{
			Rule: string(f.Rule), Name: f.Name, Action: string(f.Action), Kind: string(f.Object.Kind),
			Namespace: f.Object.Namespace, Object: f.Object.Name, Field: f.Field, Message: f.Message, Hint: f.Hint,
		})
	}
	return r
}
