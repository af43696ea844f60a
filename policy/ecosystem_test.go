package policy_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/test/sequence"
)

// TestEcosystemFlows runs what the ecosystem's other components write to volumes and claims
// (test/sequence/ecosystem.go) by their own ServiceAccounts on a default install, and holds every
// write to the verdict the catalogue gives it: admitted quietly, or refused and warned by exactly
// the rules it names. A flow that is not admitted quietly is run again under the config it
// documents, which must admit every write quietly and be the smallest that does: without any one
// of its rule entries, some write is refused or warned again. A flow admitted quietly on a default
// install must break no invariant the oracle knows.
func TestEcosystemFlows(t *testing.T) {
	def := policy.NewEngine(policy.DefaultConfig())
	for _, f := range sequence.EcosystemFlows() {
		t.Run(f.Name, func(t *testing.T) {
			s := sequence.RunEco(def, f)
			report := ecoReport(s)
			for _, b := range s.Broken {
				t.Errorf("the flow is broken: %s", b)
			}
			if f.Run == nil {
				if len(s.Writes) != 0 || f.Config != "" {
					t.Errorf("a component without writes has writes or a config")
				}
				return
			}
			if len(s.Writes) == 0 {
				t.Fatal("the flow makes no write")
			}
			quiet := true
			for i, w := range s.Writes {
				quiet = quiet && w.Want.IsQuiet()
				if !w.Got.Same(w.Want) {
					t.Errorf("write %d: pvguard answers %q, the catalogue says %q: %s\n%s", i+1, w.Got, w.Want, w.Step, strings.Join(w.Findings, "\n"))
				}
			}
			if quiet {
				if f.Config != "" {
					t.Errorf("a flow admitted quietly documents a config")
				}
				for i, w := range s.Writes {
					for _, v := range w.Violations {
						t.Errorf("write %d is admitted quietly but breaks an invariant: %s", i+1, v)
					}
				}
			} else {
				if f.Config == "" || f.Why == "" {
					t.Fatalf("a flow that is refused or warned needs a config and a reason\n%s", report)
				}
				cfg, err := policy.ParseConfig([]byte(f.Config))
				if err != nil {
					t.Fatalf("the documented config: %v", err)
				}
				if got := ecoFindings(sequence.RunEco(policy.NewEngine(cfg), f)); got != "" {
					t.Errorf("under the documented config some writes are still refused or warned:\n%s", got)
				}
				for _, key := range slices.Sorted(maps.Keys(cfg.Rules)) {
					smaller, _ := policy.ParseConfig([]byte(f.Config))
					delete(smaller.Rules, key)
					if ecoFindings(sequence.RunEco(policy.NewEngine(smaller), f)) == "" {
						t.Errorf("the documented config is not the smallest: the flow is admitted quietly without rules.%s", key)
					}
				}
			}
			if t.Failed() {
				t.Logf("writes:\n%s", report)
			}
		})
	}
}

func ecoReport(s *sequence.Eco) string {
	var b strings.Builder
	for i, w := range s.Writes {
		fmt.Fprintf(&b, "  %2d. %s\n", i+1, w)
		for _, f := range w.Findings {
			fmt.Fprintf(&b, "        %s\n", f)
		}
	}
	return b.String()
}

// ecoFindings lists the writes of a run that were refused or warned, or "" for none.
func ecoFindings(s *sequence.Eco) string {
	var out []string
	for i, w := range s.Writes {
		if !w.Got.IsQuiet() {
			out = append(out, fmt.Sprintf("  %2d. [%s] %s", i+1, w.Got, w.Step))
		}
	}
	for _, b := range s.Broken {
		out = append(out, "  broken: "+b)
	}
	return strings.Join(out, "\n")
}
