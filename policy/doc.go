// Package policy is pvguard's rule catalogue: the one place where the binding invariants between
// PersistentVolumes, PersistentVolumeClaims and StorageClasses are written down.
//
// Everything here is a pure function of its inputs: the object under review, its old version, the
// identity making the request, the enforcement Config and a read-only View of related objects.
// Nothing in this package talks to an API server, reads a file or looks at a clock, so the
// admission webhooks, the audit and the binder can all ask the same questions and get the same
// answers.
package policy
