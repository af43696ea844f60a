// Package audit runs the rule catalogue over the cluster's existing objects: a Runner audits the
// informer cache every interval and on changes (WatchChanges), has every "missing object"
// finding confirmed with a live read (which findings, and how, each rule declares:
// policy.Rule.ConfirmLive), and keeps the latest audit's findings (the Report is made of them when
// asked for) and the fields of the dashboard's rows of bindings and pending claims, for the
// server's report and dashboard (internal/web) and for metrics. The rules,
// and the audit of a cluster state that `pvguard audit` runs too, are package policy's; this
// package only gathers the objects (clusterstate.Read), gives the policy a live view, and
// publishes results: the Report format (shared with `pvguard audit -o json|yaml`) and the
// openreports.io objects Writer keeps in the cluster. It serves nothing itself.
package audit
