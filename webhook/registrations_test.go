package webhook_test

import (
	"maps"
	"slices"
	"testing"

	"github.com/go-logr/logr"

	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/webhook"
)

// TestEveryRegistrationIsServed: the server mounts a handler on each declared path and on no
// other, and each declaration is a webhook the chart can register (a unique name and path, and
// something sent to it).
func TestEveryRegistrationIsServed(t *testing.T) {
	regs := webhook.Registrations(policy.Catalogue())
	handlers := webhook.Handlers(nil, nil, nil, logr.Discard(), webhook.Limits{})
	var paths []string
	names := map[string]bool{}
	for _, r := range regs {
		if r.Name == "" || r.Path == "" || r.Kind == "" || len(r.Rules) == 0 {
			t.Errorf("registration %+v lacks a name, path, kind or rules", r)
		}
		if names[r.Name] {
			t.Errorf("two registrations are named %q", r.Name)
		}
		names[r.Name] = true
		if slices.Contains(paths, r.Path) {
			t.Errorf("two registrations have the path %q", r.Path)
		}
		paths = append(paths, r.Path)
		if r.Claims && r.Volumes {
			t.Errorf("registration %s is for claims and for volumes", r.Name)
		}
	}
	slices.Sort(paths)
	if got := slices.Sorted(maps.Keys(handlers)); !slices.Equal(got, paths) {
		t.Errorf("handlers are mounted on %q, the registrations declare %q", got, paths)
	}
}
