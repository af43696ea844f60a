package binder

import "time"

// PlanState is what the binder's next plan would read of the binder itself: whether free volumes
// still Pending count as free (PlanInput.PendingFree) and its work in flight at now
// (PlanInput.InFlight). An explanation computed in the binder's process reads it
// (explain.Input), so that it plans around the same reservations and denials as the binder. On a
// replica that is not elected the binder is not running and nothing is in flight.
func (b *Binder) PlanState(now time.Time) (pendingFree bool, inFlight InFlight) {
	return b.pendingFree(), b.ledger.snapshot(now)
}
