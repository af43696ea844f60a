package explain

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/pvguard/pvguard/policy"
)

// An explanation is made in steps, each a function of what the steps before it returned
// (explainClaim): the input indexed and planned (input.go), the claim's state (state.go), the
// candidate table (candidates.go), whether its provisioner runs (lease.go) and the verdict
// (verdict.go).

// Explanation is the stable shape of `pvguard explain pvc -o json` (docs/explain.md).
type Explanation struct {
	// Claim is namespace/name.
	Claim string `json:"claim"`
	Phase string `json:"phase"`
	// Class is the claim's storage class ("" for none); BindingMode the class's, when it exists.
	Class       string `json:"class"`
	BindingMode string `json:"bindingMode,omitempty"`
	// SelectedNode is the node the scheduler chose for the claim's pod, if any.
	SelectedNode string `json:"selectedNode,omitempty"`
	// WaitingFor is one of the WaitingFor constants; Provisioner names the provisioner when it
	// is "provisioner".
	WaitingFor  string `json:"waitingFor"`
	Provisioner string `json:"provisioner,omitempty"`
	// ProvisionerRunning says, when the claim waits for a provisioner and leases were read,
	// whether the provisioner appears to run, from the Lease its leader election holds
	// (ProvisionerLeaseName): "yes" (held and renewed within its duration), "no" (not renewed
	// within its duration, or released), "unknown" (no such Lease: a provisioner without leader
	// election holds none).
	ProvisionerRunning string `json:"provisionerRunning,omitempty"`
	// Pods are the pods (namespace/name) that use the claim, when pods were read.
	Pods []string `json:"pods,omitempty"`
	// State says in one sentence what the claim's state is and what it waits for.
	State policy.Text `json:"state"`
	// Candidates are all volumes, closest first: those that fit, then by the number of checks
	// failed, then those of the claim's class, then by name.
	Candidates []Candidate `json:"candidates"`
	// CandidatesTotal, Others and Continue are the server's (API): Candidates lists there the
	// closest candidates the caller may read, or a page of them; CandidatesTotal counts them all,
	// Others those not listed, by the first check each fails, and Continue is the token of the
	// next page (docs/explain.md, "Candidates on the API").
	CandidatesTotal int              `json:"candidatesTotal,omitempty"`
	Others          []CandidateGroup `json:"others,omitempty"`
	Continue        string           `json:"continue,omitempty"`
	// Hidden counts, by class, the volumes left out of Candidates for a caller who may not read
	// them (the API and the pages serve each caller their own explanation).
	Hidden  []HiddenVolumes `json:"hidden,omitempty"`
	Verdict Verdict         `json:"verdict"`
	// Refused lists, newest first, the writes about the claim that events report refused, and
	// which enforcement point refused each (pvguard's webhook, an admission policy the apiserver
	// enforces by itself, pvguard's webhook not answering, pvguard's binder), when the event
	// tells. Only when events were read.
	Refused []Refusal `json:"refused,omitempty"`
}

// Claim explains the claim namespace/name.
func Claim(in Input, namespace, name string) (*Explanation, error) {
	in.State = withUIDs(in.state())
	c, err := findClaim(in.State, namespace, name)
	if err != nil {
		return nil, err
	}
	x := indexInput(in)
	e, t := explainTable(x, planPool(x, in.InFlight), c, shownClosest)
	e.Candidates = make([]Candidate, t.order.len())
	for k := range e.Candidates {
		e.Candidates[k] = t.row(t.order.at(k))
	}
	e.Refused = refusals(in.Events, c)
	return e, nil
}

// explainClaim explains claim c of the indexed input x, which p plans. With onlyIfStuck, it
// stops after the state when the claim waits for something (WaitingFor is not "nothing"): the
// candidate table, a pass over every volume, is what costs, and NoVolumeFits needs it only for
// claims nothing else will give a volume.
func explainClaim(x *index, p pool, c *corev1.PersistentVolumeClaim, onlyIfStuck bool) *Explanation {
	s := subjectOf(c, x.classes)
	targets := nodeTargets(c, x.in.Pods, x.in.State, s.selectedNode, s.scheduled)
	st := decide(x, s, p.plan.Volumes[c.UID])
	if onlyIfStuck && st.waitingFor != WaitingForNothing {
		return explanation(s, st)
	}
	rows, denied := candidates(x, c, targets)
	if len(denied) > 0 {
		// The binder leaves a pair policy refuses out of its next plan (ledger.deny): plan
		// again without the pairs the engine denies, so that the verdict never names a volume
		// the binder would be refused.
		p = planPool(x, withDenials(x.in.InFlight, c.UID, denied))
		st = decide(x, s, p.plan.Volumes[c.UID])
	}
	rows = sortCandidates(withTakers(rows, p, c.UID, x.claimName), s.className)
	st = provisionerAsked(st, c, x.in.Events)
	st, cons := consumersOf(st, s, x.in, targets)
	st = nodeGone(st, x, c)
	st = outOfReach(st, x, c)
	running, st := provisionerRunning(st, x.in)
	e := explanation(s, st)
	e.ProvisionerRunning, e.Pods, e.Candidates = running, cons.pods, rows
	e.Verdict = verdict(c, st, rows, p.planned[c.UID], cons.placedWithoutScheduler)
	return e
}

// explanation is the explanation of the claim s in state st, without its table and its verdict
// but for the volume the claim is bound to or the binder takes.
func explanation(s subject, st claimState) *Explanation {
	c := s.claim
	return &Explanation{Claim: c.Namespace + "/" + c.Name, Phase: string(c.Status.Phase), Class: s.className,
		BindingMode: s.bindingMode, SelectedNode: s.selectedNode, WaitingFor: st.waitingFor, Provisioner: st.provisioner,
		State: st.text, Verdict: Verdict{Volume: volumeText(st.volume)}}
}

// volumeName is a volume named in an explanation: its bare name, rendered per reader.
func volumeName(name string) policy.Arg {
	return policy.NameOf(policy.ObjectRef{Kind: policy.KindPersistentVolume, Name: name})
}

// volumeText is volumeName as a whole Text, empty for no volume.
func volumeText(name string) policy.Text {
	if name == "" {
		return policy.Text{}
	}
	return policy.Textf("%s", volumeName(name))
}

// claimKey is a claim named namespace/name in an explanation, rendered per reader.
func claimKey(namespace, name string) policy.Arg {
	return policy.NameOf(policy.ObjectRef{Kind: policy.KindPersistentVolumeClaim, Namespace: namespace, Name: name})
}
