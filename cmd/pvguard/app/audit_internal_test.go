package app

import (
	"errors"
	"testing"

	"github.com/pvguard/pvguard/policy"
)

// TestSplitRuleErrors: what an audit returns is taken apart into the rules that could not judge
// an object, whose other findings are still reported, unless something else failed, which stops
// the audit.
func TestSplitRuleErrors(t *testing.T) {
	ruleErr := func(id policy.RuleID) error {
		return &policy.RuleError{Rule: id, Object: policy.ObjectRef{Kind: policy.KindPersistentVolume, Name: "pv-7"}, Err: errors.New("boom")}
	}
	listing := errors.New("listing volumes: forbidden")
	for _, tc := range []struct {
		name      string
		err       error
		wantRules int
		wantFatal bool
	}{
		{name: "nothing failed"},
		{name: "one rule", err: ruleErr("PVG009"), wantRules: 1},
		{name: "rules of several objects", err: errors.Join(errors.Join(ruleErr("PVG009"), ruleErr("PVG004")), nil, errors.Join(ruleErr("PVG020"))), wantRules: 3},
		{name: "anything else", err: listing, wantFatal: true},
		{name: "anything else among rule errors", err: errors.Join(ruleErr("PVG009"), listing), wantFatal: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rules, err := splitRuleErrors(tc.err)
			if (err != nil) != tc.wantFatal || len(rules) != tc.wantRules {
				t.Fatalf("got %d rule errors %v and error %v; want %d, fatal %v", len(rules), rules, err, tc.wantRules, tc.wantFatal)
			}
			if tc.wantFatal && !errors.Is(err, listing) {
				t.Errorf("error %v does not carry the cause", err)
			}
		})
	}
}
