package charts_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/pvguard/pvguard/charts"
)

// TestMatchConditionsAreCurrent: the matchConditions the chart gives the volumes' and claims'
// validating webhooks are derived from the rules' StatusReads as they are now.
func TestMatchConditionsAreCurrent(t *testing.T) {
	want, err := charts.MatchConditionsJSON()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join("..", charts.MatchConditionsFile))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is stale: run `go run ./hack/gen-match-conditions`", charts.MatchConditionsFile)
	}
}
