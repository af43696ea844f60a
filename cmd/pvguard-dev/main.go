// Command pvguard-dev starts a local control plane (etcd and kube-apiserver from bin/), serves
// pvguard against it as the Helm chart installs it, and runs the demo: `make demo` runs it with
// --exit-after-demo, `make dev` keeps it serving until Ctrl-C. It is wired in package
// internal/devcli, apart from the pvguard binary, which links neither envtest nor Helm.
package main

import (
	"fmt"
	"os"

	"github.com/pvguard/pvguard/internal/devcli"
)

func main() {
	root := devcli.NewRootCommand()
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, root.DisplayName()+":", err)
		os.Exit(1)
	}
}
