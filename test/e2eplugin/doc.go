// Package e2eplugin runs `kubectl pvguard` as a user runs it: the real kubectl (built by `make
// tools` into bin/ from the pinned Kubernetes release) finds kubectl-pvguard, freshly built from
// cmd/pvguard, on PATH, and explains claims of a real kube-apiserver through the kubeconfig,
// contexts and flags kubectl users have. kubectl hands the plugin every argument after its name
// and passes on its exit code, so what is checked is what a user sees.
package e2eplugin
