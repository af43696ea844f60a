// Package audit runs the rule catalogue over the cluster's existing objects: a Runner audits the
// informer cache every interval and on changes, confirms every "missing object" finding with a
// live read, and keeps the latest Report for the report endpoint and metrics. The rules
// themselves are package policy's; this package only gathers the objects and publishes results.
package audit
