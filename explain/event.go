package explain

import (
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/pvguard/pvguard/binder"
	"github.com/pvguard/pvguard/policy"
)

// maxNoteLength bounds the NoVolumeFits message to what events.k8s.io/v1 accepts as a note (1 kB),
// the same event read through either Event API: a long label selector or node affinity error
// must not make the event unreadable or, through the newer API, unrecordable.
const maxNoteLength = 1024

// NoVolumeFits prepares, for the input the binder's plan read and the plan it made of it, the
// NoVolumeFits message for a claim (NoVolumeFitsReporter). in.State must hold every claim
// (the plan considers the pending ones itself), and at least the nodes the explained claims'
// selected-node annotations name. The plan is not made again: it is binder.Plan(in), which is
// what Claim computes from the same input.
//
// The message comes with ok only when the claim is Pending and nothing will give it a volume as
// things stand: its explanation waits for nothing (WaitingForNothing: no class, a class that does
// not exist, a kubernetes.io/no-provisioner class, or a volume named in spec.volumeName that
// exists) and no volume fits it (for a claim that names its volume: that volume fails a check
// the binder holds it to). A claim waiting for its first consumer, the scheduler, a provisioner,
// the binder's own bind or a volume that does not exist yet gets none; nor does one some volume
// fits (another claim's plan, or the scheduler, has it: the state changes soon).
func NoVolumeFits(in binder.PlanInput, plan binder.PoolPlan) func(*corev1.PersistentVolumeClaim) (message string, ok bool) {
	x, p := indexInput(Input{State: in.State, PendingFree: in.PendingFree, InFlight: in.InFlight}), poolOf(plan)
	return func(c *corev1.PersistentVolumeClaim) (string, bool) {
		msg, ok := noVolumeFits(explainClaim(x, p, c, true), c)
		if !ok {
			return "", false
		}
		// The event is read by whoever may read the claim's namespace's events: it names only
		// the claims of that namespace and the volumes that are its own.
		out := msg.For(policy.NamespaceReaders(c.Namespace, in.State, nil))
		if len(out) > maxNoteLength {
			out = strings.ToValidUTF8(out[:maxNoteLength-3], "") + "..."
		}
		return out, true
	}
}

// noVolumeFits decides about the NoVolumeFits event from the claim's explanation (see
// NoVolumeFits) and says what the closest volume lacks: the failing checks' values, which name
// classes, access and volume modes, sizes, labels, nodes, phases and claims, never a volume's
// attributes or secret references.
func noVolumeFits(e *Explanation, c *corev1.PersistentVolumeClaim) (policy.Text, bool) {
	pending := c.Status.Phase == "" || c.Status.Phase == corev1.ClaimPending
	if !pending || c.DeletionTimestamp != nil || e.WaitingFor != WaitingForNothing || !e.Verdict.Volume.IsZero() {
		return policy.Text{}, false
	}
	for _, cand := range e.Candidates {
		if cand.Fits && c.Spec.VolumeName == "" {
			return policy.Text{}, false
		}
	}
	v := e.Verdict
	var closest *Candidate
	for i := range e.Candidates {
		if v.closest != "" && e.Candidates[i].Volume == v.closest {
			closest = &e.Candidates[i]
		}
	}
	var msg policy.Text
	switch {
	case c.Spec.VolumeName != "" && (closest == nil || len(v.Changes) == 0):
		return policy.Text{}, false // the named volume does not exist (WaitingForVolume) or fits
	case c.Spec.VolumeName != "":
		msg = policy.Textf("volume %s, which spec.volumeName names, does not fit: %s", v.Closest, lacks(*closest, true))
	case closest == nil:
		msg = v.Text // no volume, or every one planned for another claim
	default:
		msg = policy.Textf("no volume fits: closest volume %s: %s", v.Closest, lacks(*closest, false))
	}
	if len(v.Changes) > 0 {
		msg = policy.Textf("%s; it fits if %s", msg, joined(v.Changes, " and "))
	}
	return msg, true
}

// lacks lists a candidate's failing checks as "check value", in column order; for a claim that
// names the volume, only the checks the binder holds such a claim to.
func lacks(cand Candidate, named bool) policy.Arg {
	var out []policy.Text
	for _, r := range cand.Failed() {
		if !named || namedChecks[r.Check] {
			out = append(out, policy.Textf("%s %s", policy.Word(r.Check), r.Value))
		}
	}
	return joined(out, ", ")
}
