// Package webhook is pvguard's admission webhooks: validating handlers for PersistentVolumes,
// PersistentVolumeClaims and StorageClasses and mutating handlers for PersistentVolumes and
// PersistentVolumeClaims (Handlers, by path), which the server mounts (internal/web).
//
// The handlers are thin adapters: they decode the AdmissionReview, ask package policy, and turn
// its findings into a denial, warnings or audit annotations according to the enforcement config,
// counting into the admission metrics.
//
// The handlers read related objects through a ViewSource (internal/clusterview serves the one
// over the informer cache) and judge with an EngineSource: ConfigFile, the policy config reloaded
// when its file changes (a file that does not parse leaves the last good config in force).
package webhook
