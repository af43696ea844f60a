// Package webhook is pvguard's admission webhooks: validating handlers for PersistentVolumes,
// PersistentVolumeClaims and StorageClasses and mutating handlers for PersistentVolumes and
// PersistentVolumeClaims (Handlers, by path), which the server mounts (internal/web).
//
// The handlers are thin adapters: they decode the AdmissionReview, ask package policy, and turn
// its findings into a denial, warnings or audit annotations according to the enforcement config,
// counting into the admission metrics.
//
// It also holds what the handlers share with the audit and the binder: ClusterView, the policy's
// view of related objects over the informer cache with a live read on a miss, and ConfigFile, the
// policy config reloaded when its file changes (a file that does not parse leaves the last good
// config in force).
package webhook
