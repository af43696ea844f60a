// Package policy is pvguard's rule catalogue: the one place where the binding invariants between
// PersistentVolumes, PersistentVolumeClaims and StorageClasses are written down.
//
// Each rule is a Rule declared in its own file, pvgNNN_<name>.go, with all there is to know about
// it: what it judges (a change or a state, hence whether admission, the audit or both run it),
// what it reads, and which of its audit findings must be confirmed by a live read. An Engine is
// built from a rule set (the Catalogue, or a test's own) and a Config, and runs it through one
// loop for admission (Admit) and for the audit (AuditEach, AuditObject, Confirm). The words the
// rules judge in (annotations, the pair predicates, what links a volume to a claim) are package
// storage's, shared with the binder and the explanations; an audit judges a clusterstate.State.
//
// Everything here is a pure function of its inputs: the object under review, its old version, the
// identity making the request, the enforcement Config and a read-only View of related objects.
// Nothing in this package talks to an API server, reads a file or looks at a clock, so the
// admission webhooks, the audit and the binder can all ask the same questions and get the same
// answers.
package policy
