// Command pvguard is an admission and audit webhook server for Kubernetes storage objects.
package main

import (
	"fmt"
	"os"

	"github.com/pvguard/pvguard/cmd/pvguard/app"
)

func main() {
	if err := app.NewRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "pvguard:", err)
		os.Exit(1)
	}
}
