// Package explain says why a PersistentVolumeClaim is bound, or what it waits for, and how each
// volume fares against it (`pvguard explain pvc`), and what a PersistentVolume's state means
// (`pvguard explain pv`). It decides nothing itself: the claim's state comes from
// binder.DecideClaim on the state binder.ClaimStateOf builds, the volume the binder would take from binder.Plan, and each column of the
// candidate table from the predicate in policy (or binder) that the planner's fitsUnbound asks,
// so that an explanation cannot disagree with the binder. NoVolumeFitsReporter posts the
// NoVolumeFits event from the same explanation, after each of the binder's plans
// (novolumefits.go): explain reads the binder's plans, the binder never calls explain.
//
// A claim's explanation is made in steps, one file per concern, each step a function of what the
// steps before it returned, composed in order by explainClaim: what it reads (input.go), the
// claim's state (state.go, lease.go, refused.go), the candidate table (candidates.go) and the
// verdict (verdict.go). print.go writes it for people.
//
// The package also reads the input and answers the server's questions, carrying no HTTP:
// ReadInput and ReadProvisionerLeases read the input from the cluster (the CLI's live client, or
// the server's informer cache), and Service returns the server's explanations as values, each cut
// down to what its caller may read (visible.go, with internal/access), or a typed error saying why
// it cannot answer (InvalidNameError, ForbiddenError, ErrUnknownClaim, ErrUnknownVolume,
// NotReadyError) (service.go); internal/web serves them as JSON and pages. The server's
// explanations read one plan of the pool per process (plans.go): the binder's own while it runs
// in the process, else one made as objects change; table.go is the candidate table they keep.
package explain
