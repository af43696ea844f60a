// Command gen-match-conditions writes charts/pvguard/files/webhook-match-conditions.json, the
// matchConditions of the validating webhooks for volumes and claims, derived from the status
// fields the rules declare they read (policy.WebhookMatchConditions). Run it after changing a
// rule's StatusReads: `go run ./hack/gen-match-conditions`; the chart tests fail while the file
// is stale.
package main

import (
	"fmt"
	"os"

	"github.com/pvguard/pvguard/charts"
)

func main() {
	data, err := charts.MatchConditionsJSON()
	if err == nil {
		err = os.WriteFile(charts.MatchConditionsFile, data, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen-match-conditions:", err)
		os.Exit(1)
	}
}
