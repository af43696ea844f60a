// Package image checks the container image definition at the repository root, the Dockerfile and
// its .dockerignore, without a Docker engine.
//
// Its tests parse the Dockerfile with BuildKit's own parser and check what the chart relies on (a
// distroless non-root final stage whose entrypoint is the pvguard binary, the port pvguard serves
// on), run the build stage's `go build` command on the host to show that it builds cmd/pvguard
// with its version stamped, and match the files that build reads against the .dockerignore
// patterns, so that none of them is left out of the build context. The package has no non-test
// code.
package image
