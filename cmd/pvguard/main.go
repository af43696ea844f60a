// Command pvguard guards the binding of Kubernetes PersistentVolumes and PersistentVolumeClaims:
// `pvguard serve` runs the admission webhooks, the live audit and the binder; `pvguard audit`
// audits manifests or a cluster from the command line; `pvguard dev` runs it all on a local
// control plane with a demo; `pvguard certs` writes a CA and serving certificate. The commands
// are wired in package app.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/pvguard/pvguard/cmd/pvguard/app"
)

func main() {
	if err := app.NewRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "pvguard:", err)
		var exit *app.ExitError
		if errors.As(err, &exit) {
			os.Exit(exit.Code)
		}
		os.Exit(1)
	}
}
