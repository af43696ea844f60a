// Package binder is pvguard's binder: it binds PersistentVolumeClaims to PersistentVolumes and
// reclaims released volumes with the observable behaviour of kube-controller-manager's
// PersistentVolume controller, asking package policy before every write it makes
// (`pvguard serve --binder=active`), or decides without writing and reports where the cluster's
// own binder chose otherwise (`--binder=shadow`).
//
// The decisions are pure functions that table tests call directly: DecideClaim and DecideVolume
// for one object, Assign for the pool (a maximum matching of pending claims to fitting volumes,
// where upstream takes the smallest fitting volume one claim at a time), and Plan for all pending
// claims, given the cluster and a snapshot of the binder's work in flight (InFlight). Around them,
// Binder is the loop that reads the informer cache (and the apiserver where the cache's word is
// not enough), carries out their actions as idempotent writes in upstream's order, records
// upstream's events and serves its metrics; what its workers and its planner must know of each
// other's work is kept by one type, ledger, whose methods take its lock. docs/binder.md describes
// the behaviour.
package binder
