// Command pvguard is an admission and audit webhook server for Kubernetes storage objects.
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
