package explain

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// This file is the verdict: the volume the claim is bound to or the binder takes, or the closest
// volume and the changes to the claim or the volume that would make each failing column pass.

// Verdict is the volume the binder takes for the claim, or the smallest change that would make
// the closest volume fit.
type Verdict struct {
	// Volume is the volume the claim is bound to, or that the binder takes for it.
	Volume string `json:"volume,omitempty"`
	// Closest is the closest volume when none is taken, and Changes what would make it fit.
	Closest string   `json:"closest,omitempty"`
	Changes []string `json:"changes,omitempty"`
	// Text is the verdict in one sentence.
	Text string `json:"text"`
}

// verdict is the verdict on the claim from its state (after every state step: a claim bound or
// being deleted is told its state), its candidate table (sorted, with takers), whether the
// binder's plan considered it, and the pod placed without the scheduler, if any (consumersOf).
func verdict(c *corev1.PersistentVolumeClaim, st claimState, rows []Candidate, planned bool, placedWithoutScheduler *corev1.Pod) Verdict {
	v := Verdict{Volume: st.volume}
	if v.Volume != "" {
		if st.waitingFor == WaitingForBinder {
			v.Text = fmt.Sprintf("the binder takes %s", v.Volume)
		} else {
			v.Text = fmt.Sprintf("bound to %s", v.Volume)
		}
		v.Text += takenVolumeFails(rows, v.Volume, st.waitingFor == WaitingForBinder)
		return v
	}
	if st.waitingFor == WaitingForNothing && c.Status.Phase == corev1.ClaimBound || c.DeletionTimestamp != nil {
		v.Text = st.text
		return v
	}
	if name := c.Spec.VolumeName; name != "" {
		return namedVolumeVerdict(rows, name)
	}
	var fitting, taken []string
	for _, cand := range rows {
		if cand.Fits {
			fitting = append(fitting, cand.Volume)
			if cand.TakenBy != "" {
				taken = append(taken, cand.Volume+" to "+cand.TakenBy)
			}
		}
	}
	switch {
	case planned && len(fitting) > 0 && len(taken) == len(fitting):
		v.Text = "every volume that fits goes to another claim: " + strings.Join(taken, ", ")
		return v
	case placedWithoutScheduler != nil && len(fitting) > 0:
		v.Text = fmt.Sprintf("%s fit, but nothing binds the claim while pod %s that uses it bypasses the scheduler", strings.Join(fitting, ", "), placedWithoutScheduler.Name)
		return v
	case !planned && len(fitting) > 0 && (st.waitingFor == WaitingForConsumer || st.waitingFor == WaitingForScheduler):
		v.Text = fmt.Sprintf("the scheduler may bind %s once a pod that uses the claim is scheduled to a node it reaches", strings.Join(fitting, " or "))
		return v
	case len(fitting) > 0:
		v.Text = fmt.Sprintf("%s fit; the binder takes none of them now", strings.Join(fitting, ", "))
		return v
	}
	for _, cand := range rows {
		if cand.TakenBy != "" {
			continue
		}
		v.Closest = cand.Volume
		freed := !cand.passes(CheckClaimRef)
		for _, r := range cand.Failed() {
			if r.Check == CheckPhase && freed {
				continue // freeing the volume makes it Available: one change, not two
			}
			v.Changes = append(v.Changes, change(r, cand))
		}
		v.Text = fmt.Sprintf("no volume fits; %s fits if %s", v.Closest, strings.Join(v.Changes, " and "))
		return v
	}
	if len(rows) > 0 {
		return takenVerdict(rows[0])
	}
	v.Text = "no volume fits, and there are no volumes to consider"
	return v
}

// availabilityChecks are the checks that say the volume is not free; for a volume the plan gives
// to another claim they say why, and freeing it is no change to suggest.
var availabilityChecks = map[Check]bool{CheckPhase: true, CheckClaimRef: true, CheckReserved: true}

// takenVerdict is the verdict when every volume near the claim goes to another claim in the
// binder's plan, cand being the closest: it says so, and that another volume like it would fit
// (with the claim's other changes, if any).
func takenVerdict(cand Candidate) Verdict {
	v := Verdict{Closest: cand.Volume}
	like := "another volume like " + cand.Volume
	v.Changes = []string{like}
	for _, r := range cand.Failed() {
		if !availabilityChecks[r.Check] {
			v.Changes = append(v.Changes, change(r, cand))
		}
	}
	v.Text = fmt.Sprintf("no volume fits: the closest, %s, goes to %s in the binder's plan; %s", cand.Volume, cand.TakenBy, like)
	if len(v.Changes) > 1 {
		v.Text += " fits if " + strings.Join(v.Changes[1:], " and ")
	} else {
		v.Text += " would fit"
	}
	return v
}

// takenVolumeFails says what the candidate row of the volume the claim is bound to, or that the
// binder takes, fails (the binder plans without the pods' nodes and asks policy only when it
// binds): "" when nothing.
func takenVolumeFails(rows []Candidate, name string, binding bool) string {
	for _, cand := range rows {
		if cand.Volume != name {
			continue
		}
		var out []string
		for _, r := range cand.Failed() {
			switch {
			case r.Check == CheckNodeAffinity:
				out = append(out, "it "+r.Value+": that pod cannot use it")
			case r.Check == CheckPolicy && binding:
				out = append(out, "policy denies the binding ("+r.Value+"): the binder records the denial and looks elsewhere")
			}
		}
		if len(out) == 0 {
			return ""
		}
		return ", but " + strings.Join(out, "; and ")
	}
	return ""
}

// namedChecks are the checks a claim that names its volume (spec.volumeName) is held to, as
// binder.DecideClaim holds it: what storage.Satisfies asks, and that no other claim has the volume.
var namedChecks = map[Check]bool{CheckClass: true, CheckAttributesClass: true, CheckAccessModes: true,
	CheckVolumeMode: true, CheckCapacity: true, CheckClaimRef: true}

// namedVolumeVerdict is the verdict for a claim that names its volume and is not bound to it:
// what keeps that volume from it.
func namedVolumeVerdict(rows []Candidate, name string) Verdict {
	var v Verdict
	for _, cand := range rows {
		if cand.Volume != name {
			continue
		}
		v.Closest = name
		for _, r := range cand.Failed() {
			if namedChecks[r.Check] {
				v.Changes = append(v.Changes, change(r, cand))
			}
		}
		if len(v.Changes) == 0 {
			v.Text = fmt.Sprintf("the claim names volume %s, which fits", name)
			return v
		}
		v.Text = fmt.Sprintf("the claim names volume %s, which fits if %s", name, strings.Join(v.Changes, " and "))
		return v
	}
	v.Text = fmt.Sprintf("the claim names volume %s, which does not exist", name)
	return v
}

// change says what would make a failed check pass.
func change(r Result, cand Candidate) string {
	switch r.Check {
	case CheckClass:
		return fmt.Sprintf("the claim asks for class %s", orNone(cand.Class))
	case CheckAttributesClass:
		return fmt.Sprintf("the claim asks for VolumeAttributesClass %s", strings.SplitN(r.Value, " != ", 2)[0])
	case CheckAccessModes:
		return fmt.Sprintf("the claim does not ask for %s", strings.SplitN(r.Value, " lacks ", 2)[1])
	case CheckVolumeMode:
		return fmt.Sprintf("the claim asks for volumeMode %s", strings.SplitN(r.Value, " != ", 2)[0])
	case CheckCapacity:
		return fmt.Sprintf("the claim asks for at most %s", strings.SplitN(r.Value, " < ", 2)[0])
	case CheckSelector:
		return "the claim's selector matches the volume's labels"
	case CheckNodeAffinity:
		if strings.Contains(r.Value, " pod ") {
			return "the claim's pods are on nodes the volume reaches"
		}
		return "the claim's pod is scheduled to a node the volume reaches"
	case CheckPhase:
		return fmt.Sprintf("the volume becomes Available (it is %s)", r.Value)
	case CheckClaimRef:
		for _, p := range cand.Checks {
			if p.Check == CheckPhase && !p.Pass {
				return fmt.Sprintf("the volume is freed (it is %s, %s)", p.Value, r.Value)
			}
		}
		return fmt.Sprintf("the volume is freed (it is %s)", r.Value)
	case CheckReserved:
		return fmt.Sprintf("the %s fails", r.Value)
	default:
		return fmt.Sprintf("policy allows the pair (%s)", r.Value)
	}
}
