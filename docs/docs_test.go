// Package docs holds pvguard's documentation; its test keeps the rule reference in step with the
// catalogue.
package docs

import (
	"os"
	"strings"
	"testing"

	"github.com/pvguard/pvguard/policy"
)

func TestRuleReferenceCoversTheCatalogue(t *testing.T) {
	data, err := os.ReadFile("rules.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	for _, rl := range policy.Catalogue() {
		row := "| " + string(rl.ID) + " | " + rl.Name + " | " + string(rl.Default) + " |"
		if !strings.Contains(doc, row) {
			t.Errorf("docs/rules.md has no row starting %q", row)
		}
	}
}
