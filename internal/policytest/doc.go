// Package policytest runs policy test suites: `pvguard test DIR|FILE...`.
//
// A suite (apiVersion pvguard.io/v1alpha1, kind PolicyTest; docs/testing-policies.md) names a
// policy config, a set of fixtures (the cluster state: StorageClasses, PersistentVolumes,
// PersistentVolumeClaims, Nodes, VolumeAttributesClasses, Leases, Pods) and cases: writes with
// the answer pvguard's webhook must give them, audits of the fixtures with the findings they
// must report, and explanations of claims with the verdict they must reach.
//
// Nothing here judges anything: a write is turned into the admission.Request the apiserver would
// send and handed to the webhook's own handlers (webhook.NewMutator, webhook.NewValidator) over
// an engine loaded as `pvguard serve` loads its --config; an audit is the engine's Audit, as
// `pvguard audit -f` runs it; an explanation is explain.Claim, as `pvguard explain pvc -f`
// computes it. The fixtures become the engine's inputs in one place (state.go).
//
// Reading is strict: an unknown field or a repeated key, in the suite or in any object it holds
// or names, is an error naming the file, the document and the field.
package policytest
