// Package controlplane holds what only the end-to-end suites do on a control plane: the upstream
// PersistentVolume controller's bind sequence, made as that controller's own identity
// (UpstreamBind, BinderUser, BinderGroups). Starting the control plane, installing pvguard's
// webhook configurations and the clients that act in it belong to package devcluster, which
// `pvguard-dev` uses too.
//
// It is test-only: nothing the pvguard binary links imports it (cmd/pvguard's
// TestNoTestPackageLinked checks that).
package controlplane
