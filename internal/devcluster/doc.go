// Package devcluster runs the local Kubernetes control plane that `pvguard-dev` (and its demo)
// serves pvguard against: etcd and kube-apiserver started with controller-runtime's envtest from
// the binaries `make tools` builds into bin/, pvguard's webhook configurations installed as the
// Helm chart renders them but pointed at a locally served pvguard, and clients that act in it as
// a given identity and collect the admission warnings kubectl would print.
//
// The end-to-end suites under test/ start their control planes with it too, so what they test is
// what `pvguard-dev` runs.
package devcluster
