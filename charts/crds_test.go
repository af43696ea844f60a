// Package charts_test checks the Helm chart pvguard ships.
package charts_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCRDsMatchThePinnedModule: the openreports.io CRDs in the chart are the reports-api
// module's, unmodified, at the version go.mod pins (hack/sync-crds.sh copies them).
func TestCRDsMatchThePinnedModule(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/openreports/reports-api").Output()
	if err != nil {
		t.Fatalf("locating the reports-api module: %v", err)
	}
	src := filepath.Join(strings.TrimSpace(string(out)), "config", "crd")
	for _, name := range []string{"openreports.io_reports.yaml", "openreports.io_clusterreports.yaml"} {
		want, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join("pvguard", "crds", name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("charts/pvguard/crds/%s differs from the pinned module's: run hack/sync-crds.sh", name)
		}
	}
}
