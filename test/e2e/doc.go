// Package e2e holds pvguard's end-to-end tests: a real kube-apiserver and etcd (built by the tools
// module), pvguard served by the same code as `pvguard serve`, and the webhook configurations
// installed, so every write goes through the apiserver exactly as kubectl's would.
package e2e
