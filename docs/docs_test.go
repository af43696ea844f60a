package docs

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/pvguard/pvguard/policy"
)

// TestRuleReferenceCoversTheCatalogue: the pages agree with what the catalogue's rules declare.
func TestRuleReferenceCoversTheCatalogue(t *testing.T) {
	for _, err := range CheckRules(Pages, policy.Catalogue()) {
		t.Error(err)
	}
}

// TestCheckRulesFindsDisagreements: the check reports a missing row, a row in the wrong section
// and a wrong list of the rules that judge a change.
func TestCheckRulesFindsDisagreements(t *testing.T) {
	rules := []policy.Rule{
		{ID: "PVG001", Name: "one", Default: policy.ActionDeny, Judges: policy.JudgesChange},
		{ID: "PVG002", Name: "two", Default: policy.ActionWarn, Judges: policy.JudgesState},
		{ID: "PVG020", Name: "twenty", Default: policy.ActionAudit, Judges: policy.JudgesStoredState},
	}
	const good = "# Rules\n\n| PVG001 | one | deny | x |\n| PVG002 | two | warn | y |\n\n## Audit-only rules\n\n" +
		"| PVG020 | twenty | audit | z |\n\nThe rules that\njudge a change (PVG001) are not.\n\n## Controllers\n"
	for _, tc := range []struct {
		name  string
		pages fstest.MapFS
		want  []string
	}{
		{name: "in step", pages: fstest.MapFS{"rules.md": {Data: []byte(good)}}},
		{name: "a row missing", pages: fstest.MapFS{"rules.md": {Data: []byte(strings.Replace(good, "| PVG002 | two | warn | y |\n", "", 1))}},
			want: []string{`no row starting "| PVG002 | two | warn |"`}},
		{name: "an audit-only rule among the admission rules", pages: fstest.MapFS{"rules.md": {Data: []byte(
			strings.Replace(strings.Replace(good, "| PVG020 | twenty | audit | z |\n", "", 1), "| PVG002", "| PVG020 | twenty | audit | z |\n| PVG002", 1))}},
			want: []string{"PVG020, which only the audit runs, outside"}},
		{name: "an admission rule among the audit-only rules", pages: fstest.MapFS{"rules.md": {Data: []byte(
			strings.Replace(strings.Replace(good, "| PVG002 | two | warn | y |\n", "", 1), "| PVG020 | twenty | audit | z |\n", "| PVG020 | twenty | audit | z |\n| PVG002 | two | warn | y |\n", 1))}},
			want: []string{"PVG002, which admission runs, under"}},
		{name: "another page lists other change rules", pages: fstest.MapFS{"rules.md": {Data: []byte(good)},
			"audit.md": {Data: []byte("Rules that judge a change (PVG001, PVG002) are not evaluated.")}},
			want: []string{`audit.md lists the rules that judge a change as "PVG001, PVG002", the rules declare "PVG001"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := CheckRules(tc.pages, rules)
			if len(errs) != len(tc.want) {
				t.Fatalf("errors %v, want %d", errs, len(tc.want))
			}
			for i, err := range errs {
				if !strings.Contains(err.Error(), tc.want[i]) {
					t.Errorf("error %q, want one containing %q", err, tc.want[i])
				}
			}
		})
	}
}
