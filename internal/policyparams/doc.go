// Package policyparams keeps the admission policies' parameter object (a ConfigMap in pvguard's
// namespace) equal to the policy config pvguard has loaded: every replica reports whether it
// does, and the elected one, while it provably holds the Lease, writes it on start, on every
// reload and whenever the object is changed or deleted (docs/reliability.md, "The parameter
// object").
package policyparams
