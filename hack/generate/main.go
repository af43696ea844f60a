// Command generate writes the chart's files that are generated from Go (charts.GeneratedFiles):
// the webhook registrations (webhook.Registrations) and the rules' CEL forms for the admission
// policies. `make generate` runs it after a change of an admission endpoint, of the status fields
// a rule reads or of a rule's CEL form; the chart tests fail while a file is stale.
package main

import (
	"fmt"
	"os"

	"github.com/pvguard/pvguard/charts"
)

func main() {
	for _, f := range charts.GeneratedFiles() {
		data, err := f.Content()
		if err == nil {
			err = os.WriteFile(f.Path, data, 0o644)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "generate: %s: %v\n", f.Path, err)
			os.Exit(1)
		}
	}
}
