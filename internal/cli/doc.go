// Package cli wires pvguard's product commands (serve, audit, explain, test, certs, version,
// admission-policies, and the kubectl plugin mode) from the library packages. It is kept apart
// from main so that the end-to-end tests and pvguard-dev start exactly what `pvguard serve`
// starts.
package cli
