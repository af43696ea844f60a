// Package clusterstate holds the one indexed set of cluster objects that pvguard reads as a
// whole: the claims, volumes, StorageClasses and nodes that an audit judges, the binder plans
// over and an explanation explains. A State is built once from lists (an informer cache's own
// objects, a directory of manifests, a test's objects) and never changes; its lookups are
// answered from indexes that are built on first use and shared by concurrent readers.
//
// A State is a policy.View (structurally: this package does not import policy), so the rules
// read related objects from it as they read them from the webhook's cache. Read reads one from a
// cluster, or from an informer cache without copying its objects.
package clusterstate
