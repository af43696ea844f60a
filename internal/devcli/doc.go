// Package devcli is pvguard-dev: a local control plane (etcd and kube-apiserver), pvguard served
// against it as the Helm chart installs it (package cli's Serve, with the chart's ServiceAccount,
// RBAC, arguments and policy config), and the demo. It is a package of its own so that the
// product binary links neither the control plane's test environment nor Helm.
package devcli
