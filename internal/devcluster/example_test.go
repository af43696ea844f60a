package devcluster_test

import (
	"context"
	"fmt"
	"log"

	"github.com/pvguard/pvguard/internal/devcluster"
)

// Start a control plane from bin/ (or $KUBEBUILDER_ASSETS), point pvguard's webhooks at a
// pvguard served on this machine, and act in the cluster as a user whose admission warnings are
// kept, as `pvguard-dev` does.
func Example() {
	ctx := context.Background()
	assets, err := devcluster.AssetsDir()
	if err != nil {
		log.Fatal(err) // names the directory and says to run `make tools`
	}
	cp, err := devcluster.Start(assets)
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = cp.Stop() }()

	// ... serve pvguard at https://127.0.0.1:9443 with the cluster's kubeconfig, cp.KubeConfig ...
	err = devcluster.InstallWebhooks(ctx, cp.Config, devcluster.WebhookOptions{BaseURL: "https://127.0.0.1:9443"})
	if err != nil {
		log.Fatal(err)
	}
	warnings := &devcluster.Warnings{}
	user, err := devcluster.NewClient(cp.Config, warnings, "")
	if err != nil {
		log.Fatal(err)
	}
	_ = user // ... create volumes and claims as a kubectl user would ...
	fmt.Println(warnings.Take())
}
