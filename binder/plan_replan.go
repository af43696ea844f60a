package binder

import (
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/types"

	"github.com/pvguard/pvguard/storage"
)

// ReplanClaim is Plan(in), made from base, the plan of an input that differs from in only in the
// pairs policy denied the claim with uid claim (in.InFlight.Denied[claim], aged against the same
// At): it plans again only the classes of the pending claims with that uid, and keeps base's
// entries for every other class. That is exact because Plan plans each class on its own: a
// class's plan reads its own pending claims and volumes, the in-flight state only of its own pairs
// (usable), and the fit cache the classes share only saves parsing; and a claim's denials are
// read only of its own pairs. A re-plan after policy refused some of a claim's pairs (explain)
// so costs a plan of that claim's class rather than of the whole pool.
//
// The result shares base's Claims (the claims considered do not depend on the in-flight state)
// and has a Volumes map of its own; base is not changed.
func ReplanClaim(in PlanInput, base PoolPlan, claim types.UID) PoolPlan {
	byName := classIndex(in.State.Classes())
	var classes []string
	for _, c := range in.State.Claims() {
		if c.UID == claim && plannable(c, byName) && !slices.Contains(classes, storage.ClaimClass(c)) {
			classes = append(classes, storage.ClaimClass(c))
		}
	}
	return replanClasses(in, base, classes)
}

// replanClasses is Plan(in), made from base, the plan of an input that differs from in only in
// what the named classes' plans read (ReplanClaim): those classes are planned again, in Plan's
// order, and every other class keeps base's entries.
func replanClasses(in PlanInput, base PoolPlan, classes []string) PoolPlan {
	out := PoolPlan{Volumes: maps.Clone(base.Volumes), Claims: base.Claims}
	if out.Volumes == nil {
		out.Volumes = map[types.UID]string{}
	}
	if len(classes) == 0 {
		return out
	}
	replanned := make(map[string]bool, len(classes))
	for _, class := range classes {
		replanned[class] = true
	}
	claimsByClass := pendingByClass(in, replanned)
	uids := map[types.UID]string{} // the last (in Plan's order) replanned class of each uid
	for class, claims := range claimsByClass {
		for _, p := range claims {
			if last, ok := uids[p.claim.UID]; !ok || class > last {
				uids[p.claim.UID] = class
			}
		}
	}
	fresh := map[types.UID]string{}
	planClasses(in, claimsByClass, replanned, fresh)
	byName := classIndex(in.State.Classes())
	// Plan writes an entry for each claim of each class in turn, so where two claims of different
	// classes share a uid (a dump may hold such) the later class's entry stands: one of a class
	// not planned again is base's.
	later := map[types.UID]bool{}
	for _, c := range in.State.Claims() {
		last, ok := uids[c.UID]
		if class := storage.ClaimClass(c); ok && !replanned[class] && class > last && plannable(c, byName) {
			later[c.UID] = true
		}
	}
	for uid, v := range fresh {
		if !later[uid] {
			out.Volumes[uid] = v
		}
	}
	return out
}
