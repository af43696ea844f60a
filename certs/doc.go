// Package certs provides pvguard's serving certificates: a CA and serving certificate issued with
// cert-manager's pki package for self-managed and local use, written to a directory in the
// tls.crt / tls.key / ca.crt layout of a kubernetes.io/tls Secret, and served from such a
// directory with hot reload.
//
// In self-managed mode (SelfManaged, Rotator) pvguard keeps its certificates in a Secret itself:
// the elected replica issues and renews the CA and the serving certificate (a new CA is trusted
// for a while before it signs), keeps the webhook configurations' caBundle equal to the trust
// bundle, and every replica serves from the Secret (SecretSource).
package certs
