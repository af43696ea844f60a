// Command gen-admission-policies writes charts/pvguard/files/admission-policies.json, the rules'
// CEL forms the chart renders its ValidatingAdmissionPolicies from (policy.AdmissionPolicyForms).
// Run it after changing a rule's CEL form: `go run ./hack/gen-admission-policies`; the chart tests
// fail while the file is stale.
package main

import (
	"fmt"
	"os"

	"github.com/pvguard/pvguard/charts"
)

func main() {
	data, err := charts.AdmissionPolicyFormsJSON()
	if err == nil {
		err = os.WriteFile(charts.AdmissionPolicyFormsFile, data, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen-admission-policies:", err)
		os.Exit(1)
	}
}
