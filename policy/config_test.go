package policy_test

import (
	"strings"
	"testing"

	"github.com/pvguard/pvguard/policy"
)

func TestParseConfig(t *testing.T) {
	for _, tc := range []struct {
		name    string
		yaml    string
		wantErr string
		check   func(t *testing.T, c *policy.Config)
	}{
		{name: "empty is the default", yaml: ""},
		{name: "bare off is off, not false", yaml: "rules:\n  PVG001: {action: off}\n", check: func(t *testing.T, c *policy.Config) {
			rl, _ := policy.LookupRule("PVG001")
			if got := c.ActionFor(&rl); got != policy.ActionOff {
				t.Errorf("action %q", got)
			}
		}},
		{name: "by name", yaml: "rules:\n  volume-grab: {action: deny}\n", check: func(t *testing.T, c *policy.Config) {
			rl, _ := policy.LookupRule("PVG010")
			if got := c.ActionFor(&rl); got != policy.ActionDeny {
				t.Errorf("action %q", got)
			}
		}},
		{name: "unknown rule names the key", yaml: "rules:\n  PVG999: {action: deny}\n", wantErr: "rules.PVG999: unknown rule"},
		{name: "unknown action names the key", yaml: "rules:\n  PVG001: {action: block}\n", wantErr: `rules.PVG001.action: "block" is not one of`},
		{name: "boolean true is not an action", yaml: "rules:\n  PVG001: {action: true}\n", wantErr: "action"},
		{name: "same rule by ID and name", yaml: "rules:\n  PVG010: {action: deny}\n  volume-grab: {action: warn}\n", wantErr: "rules.volume-grab: names the same rule as rules.PVG010"},
		{name: "unknown field", yaml: "rulez: {}\n", wantErr: "rulez"},
		{name: "bad service account", yaml: "controllers:\n  serviceAccounts: [just-a-name]\n", wantErr: "controllers.serviceAccounts[0]"},
		{name: "bad namespace glob", yaml: "exemptions:\n  namespaces: ['[']\n", wantErr: "exemptions.namespaces[0]"},
		{name: "not yaml", yaml: "rules: [", wantErr: "parsing policy config"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := policy.ParseConfig([]byte(tc.yaml))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseConfig: %v", err)
			}
			if tc.check != nil {
				tc.check(t, c)
			}
		})
	}
}

func TestIdentities(t *testing.T) {
	c := mustConfig(t, "controllers:\n  serviceAccounts: [pvguard-system/pvguard]\n  groups: [provisioners]\nexemptions:\n  users: [break-glass]\n")
	rl, _ := policy.LookupRule("PVG001")
	for _, tc := range []struct {
		name       string
		user       policy.UserInfo
		controller bool
		exempt     bool
	}{
		{name: "upstream binder", user: binder, controller: true},
		{name: "scheduler", user: scheduler, controller: true},
		{name: "configured service account", user: policy.UserInfo{Username: "system:serviceaccount:pvguard-system:pvguard"}, controller: true},
		{name: "same name in another namespace", user: policy.UserInfo{Username: "system:serviceaccount:team-a:pvguard"}},
		{name: "a longer name", user: policy.UserInfo{Username: "system:serviceaccount:pvguard-system:pvguard2"}},
		{name: "a shorter name", user: policy.UserInfo{Username: "system:serviceaccount:pvguard-system:pvguar"}},
		{name: "a namespace that holds the slash", user: policy.UserInfo{Username: "system:serviceaccount:pvguard-system/pvguard:"}},
		{name: "a longer namespace", user: policy.UserInfo{Username: "system:serviceaccount:pvguard-system-2:pvguard"}},
		{name: "configured group", user: policy.UserInfo{Username: "x", Groups: []string{"provisioners"}}, controller: true},
		{name: "tenant", user: tenant},
		{name: "exempt user", user: policy.UserInfo{Username: "break-glass"}, exempt: true},
		{name: "anonymous", user: policy.UserInfo{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := c.IsController(tc.user); got != tc.controller {
				t.Errorf("IsController = %v", got)
			}
			if got := c.Exempt(&rl, nil, tc.user); got != tc.exempt {
				t.Errorf("Exempt = %v", got)
			}
		})
	}
}

func TestCatalogueIsComplete(t *testing.T) {
	rules := policy.Catalogue()
	seen := map[string]bool{}
	var admission, audit int
	for i, rl := range rules {
		if rl.ID == "" || rl.Name == "" || rl.Summary == "" || rl.Check == nil || len(rl.Kinds) == 0 {
			t.Errorf("rule %d incomplete: %+v", i, rl)
		}
		if !rl.Judges.AtAdmission() && !rl.Judges.InAudit() {
			t.Errorf("rule %s judges %q: neither admission nor the audit runs it", rl.ID, rl.Judges)
		}
		if len(rl.ConfirmLive) > 0 && !rl.Judges.InAudit() {
			t.Errorf("rule %s has findings to confirm live, but the audit does not run it", rl.ID)
		}
		if rl.Judges.AtAdmission() {
			admission++
		} else {
			audit++
		}
		if seen[string(rl.ID)] || seen[rl.Name] {
			t.Errorf("duplicate %s %s", rl.ID, rl.Name)
		}
		seen[string(rl.ID)], seen[rl.Name] = true, true
		if i > 0 && rules[i-1].ID >= rl.ID {
			t.Errorf("catalogue out of order at %s", rl.ID)
		}
	}
	if admission != 18 || audit != 6 {
		t.Errorf("%d admission rules and %d audit-only rules, want PVG001-PVG018 and PVG020-PVG025", admission, audit)
	}
}
