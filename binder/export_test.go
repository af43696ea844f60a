package binder

import "context"

// Tests outside the package (binder_test) drive the binder's own reading of a claim through these.

// PlanNow plans the pool and installs the plan, as the plan worker does.
func (b *Binder) PlanNow(ctx context.Context) error { return b.runPlan(ctx) }

// DecideClaimNow is what a sync of the claim namespace/name would do now: its state read from the
// cache and the ledger, decided, with the live read a decision may ask for.
func (b *Binder) DecideClaimNow(ctx context.Context, namespace, name string) (ClaimAction, error) {
	claim, err := b.getClaim(ctx, namespace, name)
	if err != nil {
		return ClaimAction{}, err
	}
	return b.decideClaim(ctx, claim)
}
