// Package audit runs the rule catalogue over the cluster's existing objects: a Runner audits the
// informer cache every interval and on changes, has every "missing object" finding confirmed with
// a live read (which findings, and how, each rule declares: policy.Rule.ConfirmLive), and keeps
// the latest Report for the report endpoint and metrics. The rules, and the audit of a snapshot
// that `pvguard audit` runs too, are package policy's; this package only gathers the objects,
// gives the policy a live view, and publishes results: the Report format (shared with
// `pvguard audit -o json|yaml`) served at /api/v1/report, the openreports.io objects Writer keeps
// in the cluster, and a read-only dashboard. Beside the dashboard it serves `pvguard explain`'s
// explanations of claims and volumes, as JSON and as pages (ExplainAPI, ExplainPages), computed
// by package explain from the informer cache through the read the CLI makes too
// (ReadExplainInput). Each of these answers is cut down to what its caller may read
// (internal/access.Reader, which the server's guard puts in the request's context) in one place,
// visible.go.
package audit
