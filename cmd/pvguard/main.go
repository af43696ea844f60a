// Command pvguard guards the binding of Kubernetes PersistentVolumes and PersistentVolumeClaims:
// `pvguard serve` runs the admission webhooks, the live audit and the binder; `pvguard audit`
// audits manifests or a cluster from the command line; `pvguard dev` runs it all on a local
// control plane with a demo; `pvguard certs` writes a CA and serving certificate. The commands
// are wired in package app. Installed as kubectl-pvguard (a link to the same binary) it is the
// kubectl plugin `kubectl pvguard`.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/pvguard/pvguard/cmd/pvguard/app"
)

func main() {
	root := app.NewRootCommandFor(os.Args[0])
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, root.DisplayName()+":", err)
		var exit *app.ExitError
		if errors.As(err, &exit) {
			os.Exit(exit.Code)
		}
		os.Exit(1)
	}
}
