package charts_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/pvguard/pvguard/charts"
)

// TestGeneratedFilesAreCurrent: the chart's generated files (webhook registrations, the rules'
// CEL forms) are what the Go they come from makes now.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	for _, f := range charts.GeneratedFiles() {
		want, err := f.Content()
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join("..", f.Path))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run `make generate`", f.Path)
		}
	}
}
