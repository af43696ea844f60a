package main

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
)

// notShipped are the parts of the module that only tests and benchmarks may link: nothing under
// them belongs in the pvguard binary.
var notShipped = []string{
	"github.com/pvguard/pvguard/test/",
	"github.com/pvguard/pvguard/hack/",
}

// TestNoTestPackageLinked lists every package the pvguard binary links (`go list -deps`, with the
// go command `go test` puts first on PATH) and fails on any under test/ or hack/. `pvguard dev`
// starts its control plane with package devcluster, not with test helpers.
func TestNoTestPackageLinked(t *testing.T) {
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
