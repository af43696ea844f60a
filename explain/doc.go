// Package explain says why a PersistentVolumeClaim is bound, or what it waits for, and how each
// volume fares against it (`pvguard explain pvc`). It decides nothing itself: the claim's state
// comes from binder.DecideClaim, the volume the binder would take from binder.Plan, and each
// column of the candidate table from the predicate in policy (or binder) that the planner's
// fitsUnbound asks, so that an explanation cannot disagree with the binder. NoVolumeFits gives the
// binder its NoVolumeFits event from the same explanation.
package explain
