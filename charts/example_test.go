package charts_test

import (
	"fmt"

	"github.com/pvguard/pvguard/charts"
)

// The webhook configurations a release named "pvguard" in namespace "pvguard-system" installs,
// as envtest suites install them: each webhook twice, for people (Fail) and for the cluster's
// components (Ignore).
func ExampleWebhookConfigurations() {
	v, m, err := charts.WebhookConfigurations("pvguard", "pvguard-system", map[string]any{})
	if err != nil {
		panic(err)
	}
	for _, wh := range v.Webhooks {
		fmt.Println(v.Name, wh.Name, *wh.ClientConfig.Service.Path, *wh.FailurePolicy)
	}
	for _, wh := range m.Webhooks {
		fmt.Println(m.Name, wh.Name, *wh.ClientConfig.Service.Path, *wh.FailurePolicy)
	}
	// Output:
	// pvguard validate-pv.pvguard.io /validate/persistentvolumes Fail
	// pvguard validate-pv-components.pvguard.io /validate/persistentvolumes Ignore
	// pvguard validate-pvc.pvguard.io /validate/persistentvolumeclaims Fail
	// pvguard validate-pvc-components.pvguard.io /validate/persistentvolumeclaims Ignore
	// pvguard validate-sc.pvguard.io /validate/storageclasses Fail
	// pvguard validate-sc-components.pvguard.io /validate/storageclasses Ignore
	// pvguard mutate-pv.pvguard.io /mutate/persistentvolumes Fail
	// pvguard mutate-pv-components.pvguard.io /mutate/persistentvolumes Ignore
	// pvguard mutate-pvc.pvguard.io /mutate/persistentvolumeclaims Fail
	// pvguard mutate-pvc-components.pvguard.io /mutate/persistentvolumeclaims Ignore
}

// Render returns every object `helm template` would print, with the template it came from.
func ExampleRender() {
	manifests, err := charts.Render("guard", "storage", map[string]any{"replicas": 1})
	if err != nil {
		panic(err)
	}
	for _, m := range manifests {
		if m.Object.GetKind() == "Deployment" {
			fmt.Println(m.Template, m.Object.GetNamespace(), m.Object.GetName())
		}
	}
	_, err = charts.Render("guard", "storage", map[string]any{"binder": map[string]any{"mode": "sometimes"}})
	fmt.Println(err != nil)
	// Output:
	// pvguard/templates/deployment.yaml storage guard-pvguard
	// true
}
