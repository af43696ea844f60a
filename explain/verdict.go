package explain

import (
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/pvguard/pvguard/policy"
)

// This file is the verdict: the volume the claim is bound to or the binder takes, or the closest
// volume and the changes to the claim or the volume that would make each failing column pass.

// Verdict is the volume the binder takes for the claim, or the smallest change that would make
// the closest volume fit.
type Verdict struct {
	// Volume is the volume the claim is bound to, or that the binder takes for it.
	Volume policy.Text `json:"volume,omitzero"`
	// Closest is the closest volume when none is taken, and Changes what would make it fit.
	Closest policy.Text   `json:"closest,omitzero"`
	Changes []policy.Text `json:"changes,omitempty"`
	// Text is the verdict in one sentence.
	Text policy.Text `json:"text"`
	// closest is Closest's name, for the NoVolumeFits event, which reads the closest row.
	closest string
}

// joined is texts as one Arg, separated by sep.
func joined(texts []policy.Text, sep string) policy.Arg {
	args := make([]policy.Arg, len(texts))
	for i, t := range texts {
		args[i] = t
	}
	return policy.Join(args, sep)
}

// namedAtMost is how many volumes a verdict names; the rest it counts, so that a verdict's length
// does not grow with the pool (the candidates' rows and groups list them).
const namedAtMost = 5

// volumes is the named volumes as one Arg, separated by sep, the first namedAtMost named.
func volumes(names []string, sep string) policy.Arg {
	shown := names[:min(len(names), namedAtMost)]
	args := make([]policy.Arg, len(shown))
	for i, n := range shown {
		args[i] = volumeName(n)
	}
	return andMore(policy.Join(args, sep), len(names)-len(shown), sep)
}

// andMore is a list followed by the count of the items it leaves out, if any.
func andMore(list policy.Arg, more int, sep string) policy.Arg {
	switch {
	case more <= 0:
		return list
	case sep == " or ":
		return policy.Textf("%s or one of %s more", list, policy.Wordf("%d", more))
	}
	return policy.Textf("%s and %s more", list, policy.Wordf("%d", more))
}

// verdict is the verdict on the claim from its state (after every state step: a claim bound or
// being deleted is told its state), its candidate table (sorted, with takers), whether the
// binder's plan considered it, and the pod placed without the scheduler, if any (consumersOf).
func verdict(c *corev1.PersistentVolumeClaim, st claimState, rows []Candidate, planned bool, placedWithoutScheduler *corev1.Pod) Verdict {
	v := Verdict{Volume: volumeText(st.volume)}
	if st.goneVolume != "" {
		// Nothing the binder writes frees the claim (nodeGone).
		v.Text = policy.Textf("%s can be used only on nodes that no longer exist: no pod that uses the claim can be scheduled", volumeName(st.goneVolume))
		return v
	}
	if st.volume != "" {
		if st.waitingFor == WaitingForBinder {
			v.Text = policy.Textf("the binder takes %s", volumeName(st.volume))
		} else {
			v.Text = policy.Textf("bound to %s", volumeName(st.volume))
		}
		v.Text = v.Text.Append(takenVolumeFails(rows, st.volume, st.waitingFor == WaitingForBinder))
		return v
	}
	if st.waitingFor == WaitingForNothing && c.Status.Phase == corev1.ClaimBound || c.DeletionTimestamp != nil {
		v.Text = st.text
		return v
	}
	if name := c.Spec.VolumeName; name != "" {
		return namedVolumeVerdict(rows, name)
	}
	var fitting []string
	var taken []policy.Text
	for _, cand := range rows {
		if cand.Fits {
			fitting = append(fitting, cand.Volume)
			if !cand.TakenBy.IsZero() {
				taken = append(taken, policy.Textf("%s to %s", volumeName(cand.Volume), cand.TakenBy))
			}
		}
	}
	switch {
	case planned && len(fitting) > 0 && len(taken) == len(fitting):
		shown := taken[:min(len(taken), namedAtMost)]
		v.Text = policy.Textf("every volume that fits goes to another claim: %s", andMore(joined(shown, ", "), len(taken)-len(shown), ", "))
		return v
	case placedWithoutScheduler != nil && len(fitting) > 0:
		v.Text = policy.Textf("%s fit, but nothing binds the claim while pod %s that uses it bypasses the scheduler", volumes(fitting, ", "), policy.Word(placedWithoutScheduler.Name))
		return v
	case !planned && len(fitting) > 0 && (st.waitingFor == WaitingForConsumer || st.waitingFor == WaitingForScheduler):
		v.Text = policy.Textf("the scheduler may bind %s once a pod that uses the claim is scheduled to a node it reaches", volumes(fitting, " or "))
		return v
	case len(fitting) > 0:
		v.Text = policy.Textf("%s fit; the binder takes none of them now", volumes(fitting, ", "))
		return v
	}
	for _, cand := range rows {
		if !cand.TakenBy.IsZero() {
			continue
		}
		v.Closest, v.closest = volumeText(cand.Volume), cand.Volume
		freed := !cand.passes(CheckClaimRef)
		for _, r := range cand.Failed() {
			if r.Check == CheckPhase && freed {
				continue // freeing the volume makes it Available: one change, not two
			}
			v.Changes = append(v.Changes, change(r, cand))
		}
		v.Text = policy.Textf("no volume fits; %s fits if %s", volumeName(cand.Volume), joined(v.Changes, " and "))
		return v
	}
	if len(rows) > 0 {
		return takenVerdict(rows[0])
	}
	v.Text = policy.Plain("no volume fits, and there are no volumes to consider")
	return v
}

// availabilityChecks are the checks that say the volume is not free; for a volume the plan gives
// to another claim they say why, and freeing it is no change to suggest.
var availabilityChecks = map[Check]bool{CheckPhase: true, CheckClaimRef: true, CheckReserved: true}

// takenVerdict is the verdict when every volume near the claim goes to another claim in the
// binder's plan, cand being the closest: it says so, and that another volume like it would fit
// (with the claim's other changes, if any).
func takenVerdict(cand Candidate) Verdict {
	v := Verdict{Closest: volumeText(cand.Volume), closest: cand.Volume}
	like := policy.Textf("another volume like %s", volumeName(cand.Volume))
	v.Changes = []policy.Text{like}
	for _, r := range cand.Failed() {
		if !availabilityChecks[r.Check] {
			v.Changes = append(v.Changes, change(r, cand))
		}
	}
	v.Text = policy.Textf("no volume fits: the closest, %s, goes to %s in the binder's plan; %s", volumeName(cand.Volume), cand.TakenBy, like)
	if len(v.Changes) > 1 {
		v.Text = policy.Textf("%s fits if %s", v.Text, joined(v.Changes[1:], " and "))
	} else {
		v.Text = policy.Textf("%s would fit", v.Text)
	}
	return v
}

// takenVolumeFails says what the candidate row of the volume the claim is bound to, or that the
// binder takes, fails (the binder plans without the pods' nodes and asks policy only when it
// binds): "" when nothing.
func takenVolumeFails(rows []Candidate, name string, binding bool) policy.Text {
	for _, cand := range rows {
		if cand.Volume != name {
			continue
		}
		var out []policy.Text
		for _, r := range cand.Failed() {
			switch {
			case r.Check == CheckNodeAffinity:
				out = append(out, policy.Textf("it %s: that pod cannot use it", r.Value))
			case r.Check == CheckPolicy && binding:
				out = append(out, policy.Textf("policy denies the binding (%s): the binder records the denial and looks elsewhere", r.Value))
			}
		}
		if len(out) == 0 {
			return policy.Text{}
		}
		return policy.Textf(", but %s", joined(out, "; and "))
	}
	return policy.Text{}
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
		v.Closest, v.closest = volumeText(name), name
		for _, r := range cand.Failed() {
			if namedChecks[r.Check] {
				v.Changes = append(v.Changes, change(r, cand))
			}
		}
		if len(v.Changes) == 0 {
			v.Text = policy.Textf("the claim names volume %s, which fits", volumeName(name))
			return v
		}
		v.Text = policy.Textf("the claim names volume %s, which fits if %s", volumeName(name), joined(v.Changes, " and "))
		return v
	}
	v.Text = policy.Textf("the claim names volume %s, which does not exist", volumeName(name))
	return v
}

// change says what would make a failed check pass.
// The values of the checks before PHASE are words (classes, modes, sizes): they are read back as
// such (value).
func change(r Result, cand Candidate) policy.Text {
	value := r.Value.String()
	word := func(format string, args ...any) policy.Text { return policy.Plain(policy.Wordf(format, args...)) }
	switch r.Check {
	case CheckClass:
		return word("the claim asks for class %s", orNone(cand.Class))
	case CheckAttributesClass:
		return word("the claim asks for VolumeAttributesClass %s", strings.SplitN(value, " != ", 2)[0])
	case CheckAccessModes:
		return word("the claim does not ask for %s", strings.SplitN(value, " lacks ", 2)[1])
	case CheckVolumeMode:
		return word("the claim asks for volumeMode %s", strings.SplitN(value, " != ", 2)[0])
	case CheckCapacity:
		return word("the claim asks for at most %s", strings.SplitN(value, " < ", 2)[0])
	case CheckSelector:
		return policy.Plain("the claim's selector matches the volume's labels")
	case CheckNodeAffinity:
		if strings.Contains(value, " pod ") {
			return policy.Plain("the claim's pods are on nodes the volume reaches")
		}
		return policy.Plain("the claim's pod is scheduled to a node the volume reaches")
	case CheckPhase:
		return policy.Textf("the volume becomes Available (it is %s)", r.Value)
	case CheckClaimRef:
		for _, p := range cand.Checks {
			if p.Check == CheckPhase && !p.Pass {
				return policy.Textf("the volume is freed (it is %s, %s)", p.Value, r.Value)
			}
		}
		return policy.Textf("the volume is freed (it is %s)", r.Value)
	case CheckReserved:
		return policy.Textf("the %s fails", r.Value)
	default:
		return policy.Textf("policy allows the pair (%s)", r.Value)
	}
}
