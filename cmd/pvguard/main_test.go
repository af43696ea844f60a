package main

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
)

// notShipped are the parts of the module, and the modules, that the pvguard binary must not link:
// test and benchmark code, the control plane's test environment (envtest, which pvguard-dev
// starts its control plane with) and Helm (which pvguard-dev renders the chart with).
var notShipped = []string{
	"github.com/pvguard/pvguard/test/",
	"github.com/pvguard/pvguard/hack/",
	"github.com/pvguard/pvguard/internal/devcli",
	"github.com/pvguard/pvguard/internal/devcluster",
	"sigs.k8s.io/controller-runtime/pkg/envtest",
	"helm.sh/",
}

// TestLinksNoTestOrDevPackage lists every package the pvguard binary links (`go list -deps`, with the
// go command `go test` puts first on PATH) and fails on any under notShipped. The local control
// plane and demo are pvguard-dev's (package internal/devcli), not the product binary's.
func TestLinksNoTestOrDevPackage(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		t.Fatalf("go list -deps: %v\n%s", err, exitErr.Stderr)
	} else if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 100 {
		t.Fatalf("go list -deps listed only %d packages: %q", len(deps), deps)
	}
	for _, dep := range deps {
		for _, prefix := range notShipped {
			if strings.HasPrefix(dep, prefix) {
				t.Errorf("the pvguard binary links %s; nothing under %s may be shipped", dep, prefix)
			}
		}
	}
}
