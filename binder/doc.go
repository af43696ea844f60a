// Package binder will hold pvguard's binder loop: PV/PVC binding and reclamation with the
// semantics of kube-controller-manager's PersistentVolume controller, asking package policy
// before every write. It is not implemented yet (tracked as issue 3); until then
// `pvguard serve --binder` accepts only "off", and nothing here pretends to bind.
package binder
