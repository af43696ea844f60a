// Package app wires pvguard's subcommands from the library packages. It is kept apart from main
// so that the end-to-end tests and `pvguard dev` start exactly what `pvguard serve` starts.
package app
