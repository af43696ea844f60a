package policytest_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/pvguard/pvguard/internal/policytest"
	"github.com/pvguard/pvguard/policy"
)

// starterDir holds the starter suites of docs/testing-policies.md.
var starterDir = filepath.Join("..", "..", "docs", "examples", "policy-tests")

// TestStarterSuites runs the starter suites: every case passes, and every rule that judges
// writes has a write case that it refuses, warns about or audits.
func TestStarterSuites(t *testing.T) {
	suites, errs := policytest.Load([]string{starterDir})
	for _, err := range errs {
		t.Error(err)
	}
	if len(suites) == 0 {
		t.Fatal("no suites")
	}
	rep := policytest.Run(context.Background(), suites, policytest.Options{})
	for _, s := range rep.Suites {
		for _, c := range s.Cases {
			if !c.Passed {
				t.Errorf("%s#%d: %s: %s", s.File, s.Index, c.Name, c.Failure)
			}
		}
	}
	judged := map[string]bool{}
	kinds := map[string]int{}
	for _, s := range suites {
		for _, c := range s.Cases {
			kinds[c.Kind()]++
			if c.Write == nil {
				continue
			}
			for _, id := range slices.Concat(c.Write.Expect.Deny, c.Write.Expect.Warn, c.Write.Expect.Audit) {
				judged[id] = true
			}
		}
	}
	for _, rl := range policy.Catalogue() {
		if rl.Judges.AtAdmission() && !judged[string(rl.ID)] {
			t.Errorf("no starter case expects %s %s to refuse, warn about or audit a write", rl.ID, rl.Name)
		}
	}
	for _, k := range []string{"write", "audit", "explain"} {
		if kinds[k] == 0 {
			t.Errorf("no %s case in the starter suites", k)
		}
	}
}
