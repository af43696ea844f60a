// Package certs provides pvguard's serving certificates: a CA and serving certificate issued with
// cert-manager's pki package for self-managed and local use, written to a directory in the
// tls.crt / tls.key / ca.crt layout of a kubernetes.io/tls Secret, and served from such a
// directory with hot reload.
package certs
