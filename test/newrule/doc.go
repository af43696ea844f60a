// Package newrule holds the test that adds a throwaway rule in one file, as a contributor adds a
// rule (docs/development.md), and shows that admission, the audit, the reports, the metrics and
// the docs check pick it up with no change anywhere else.
package newrule
