// Package webhook serves pvguard's admission webhooks: validating handlers for PersistentVolumes,
// PersistentVolumeClaims and StorageClasses and mutating handlers for PersistentVolumes and
// PersistentVolumeClaims, all mounted on one chi router together with health, readiness and
// metrics endpoints.
//
// The handlers are thin adapters: they decode the AdmissionReview, ask package policy, and turn
// its findings into a denial, warnings or audit annotations according to the enforcement config.
package webhook
