// Command pvguard guards the binding of Kubernetes PersistentVolumes and PersistentVolumeClaims:
// `pvguard serve` runs the admission webhooks, the live audit and the binder; `pvguard audit`
// audits manifests or a cluster from the command line; `pvguard explain` tells why a claim or
// volume is (not) bound; `pvguard test` runs policy test suites offline; `pvguard certs` writes a CA and serving certificate. The commands are
// wired in package internal/cli. Installed as kubectl-pvguard (a link to the same binary) it is
// the kubectl plugin `kubectl pvguard`. The local control plane and demo are a binary of their
// own, pvguard-dev.
package main

import (
	"fmt"
	"os"

	"github.com/pvguard/pvguard/internal/cli"
)

func main() {
	root := cli.NewRootCommandFor(os.Args[0])
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, root.DisplayName()+":", err)
		os.Exit(cli.ExitCode(err))
	}
}
