// Package binder is pvguard's binder: it binds PersistentVolumeClaims to PersistentVolumes and
// reclaims released volumes with the observable behaviour of kube-controller-manager's
// PersistentVolume controller, asking package policy before every write it makes
// (`pvguard serve --binder=active`), or decides without writing and reports where the cluster's
// own binder chose otherwise (`--binder=shadow`).
//
// The decisions are pure functions that table tests call directly: DecideClaim and DecideVolume
// for one object, and Plan for all pending claims, given the cluster (a clusterstate.State) and a
// snapshot of the binder's work in flight (InFlight); each pool's claims are matched to fitting
// volumes all at once (a maximum matching, where upstream takes the smallest fitting volume one
// claim at a time). A claim's state is built in one place, ClaimStateOf, from the ClaimFacts its
// caller reads (the loop's cache and ledger, or the objects pvguard explain explains). Around them,
// Binder is the loop that reads the informer cache (and the apiserver where the cache's word is
// not enough), carries out their actions as idempotent writes in upstream's order, records
// upstream's events and serves its metrics; what its workers and its planner must know of each
// other's work is kept by one type, ledger, whose methods take its lock. docs/binder.md describes
// the behaviour.
package binder
