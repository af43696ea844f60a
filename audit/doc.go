// Package audit runs the rule catalogue over the cluster's existing objects: a Runner audits the
// informer cache every interval and on changes, confirms every "missing object" finding with a
// live read, and keeps the latest Report for the report endpoint and metrics. The rules
// themselves are package policy's; this package only gathers the objects and publishes results:
// the Report format (shared with `pvguard audit -o json|yaml`) served at /api/v1/report, the
// openreports.io objects Writer keeps in the cluster, and a read-only dashboard.
package audit
