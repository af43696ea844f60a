package explain

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvguard/pvguard/binder"
	"github.com/pvguard/pvguard/clusterstate"
	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/storage"
)

// This file is the candidate table: every volume considered for the claim, and the pair checks
// each passes or fails (the nodes its node affinity must reach, the policy's judgement).

// Check names a column of the candidate table.
type Check string

// The checks, in the order upstream's binder makes them, then pvguard's binder's own.
const (
	CheckClass           Check = "class"                 // PVG007
	CheckAttributesClass Check = "volumeAttributesClass" // PVG018
	CheckAccessModes     Check = "accessModes"           // PVG006
	CheckVolumeMode      Check = "volumeMode"            // PVG001
	CheckCapacity        Check = "capacity"              // PVG005
	CheckSelector        Check = "selector"              // PVG008
	CheckNodeAffinity    Check = "nodeAffinity"          // PVG009, against the selected node
	CheckPhase           Check = "phase"                 // Available, not being deleted
	CheckClaimRef        Check = "claimRef"              // not pre-bound or bound to another claim
	CheckReserved        Check = "reserved"              // no bind to another claim in flight
	CheckPolicy          Check = "policy"                // the webhook has not denied the pair lately
)

// Checks lists the checks in column order.
var Checks = []Check{CheckClass, CheckAttributesClass, CheckAccessModes, CheckVolumeMode, CheckCapacity,
	CheckSelector, CheckNodeAffinity, CheckPhase, CheckClaimRef, CheckReserved, CheckPolicy}

// Candidate is one volume's row.
type Candidate struct {
	Volume string `json:"volume"`
	Class  string `json:"class"`
	// Checks holds one result per check, in the order of Checks.
	Checks []Result `json:"checks"`
	// Fits is set when every check passes.
	Fits bool `json:"fits"`
	// TakenBy names (namespace/name) the claim the binder's plan gives this volume to, when not
	// to this claim.
	TakenBy policy.Text `json:"takenBy,omitzero"`
}

// Result is one check of one volume: a pass, or the failing value (`Filesystem != Block`).
type Result struct {
	Check Check       `json:"check"`
	Pass  bool        `json:"pass"`
	Value policy.Text `json:"value,omitzero"`
}

// passes reports whether the check passed (a check the row lacks passes).
func (c Candidate) passes(check Check) bool {
	for _, r := range c.Checks {
		if r.Check == check {
			return r.Pass
		}
	}
	return true
}

// Failed reports the checks that failed.
func (c Candidate) Failed() []Result {
	var out []Result
	for _, r := range c.Checks {
		if !r.Pass {
			out = append(out, r)
		}
	}
	return out
}

// nodeTarget is a node that a volume must reach for the claim: the node selected for it, or the
// node a pod that uses it is on (pod names that pod).
type nodeTarget struct {
	name string
	node *corev1.Node // nil: no such node
	pod  string
}

// nodeTargets are the nodes the claim's volume must reach: the selected node, when the claim has
// one (the planner judges against it); else the nodes of the pods that use the claim and are on
// a node (scheduled, or placed with spec.nodeName), one pod named per node.
func nodeTargets(c *corev1.PersistentVolumeClaim, pods []*corev1.Pod, s *clusterstate.State, selected string, scheduled bool) []nodeTarget {
	if scheduled {
		n, _ := s.Node(selected)
		return []nodeTarget{{name: selected, node: n}}
	}
	var out []nodeTarget
	seen := map[string]bool{}
	for _, p := range sortedPods(pods) {
		if p.Namespace != c.Namespace || p.Spec.NodeName == "" || p.DeletionTimestamp != nil || !usesClaim(p, c.Name) || seen[p.Spec.NodeName] {
			continue
		}
		seen[p.Spec.NodeName] = true
		n, _ := s.Node(p.Spec.NodeName)
		out = append(out, nodeTarget{name: p.Spec.NodeName, node: n, pod: p.Name})
	}
	return out
}

// candidates runs every check on every volume of the input for the claim, in the state's order,
// and names the volumes whose pair with the claim policy denies (pairJudge).
func candidates(x *index, c *corev1.PersistentVolumeClaim, targets []nodeTarget) (rows []Candidate, denied []string) {
	judge := newPairJudge(x.in)
	for _, v := range x.in.State.Volumes() {
		row, deny := judge.judge(candidate(x, c, v, targets), v, c)
		if deny {
			denied = append(denied, v.Name)
		}
		rows = append(rows, row)
	}
	return rows, denied
}

// withTakers names, on each row, the claim the binder's plan gives the volume to, when not to
// the claim c; claimName names a claim by its uid.
func withTakers(rows []Candidate, p pool, c types.UID, claimName func(types.UID) (policy.Arg, bool)) []Candidate {
	for i := range rows {
		if uid, ok := p.owner[rows[i].Volume]; ok && uid != c {
			if who, ok := claimName(uid); ok {
				rows[i].TakenBy = policy.Textf("%s", who)
			}
		}
	}
	return rows
}

// sortCandidates orders the rows closest first: by the number of checks failed, then those of
// the claim's class, then by name.
func sortCandidates(rows []Candidate, class string) []Candidate {
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if fa, fb := len(a.Failed()), len(b.Failed()); fa != fb {
			return fa < fb
		}
		// Between volumes as close, one of the claim's class first: it is in the table the
		// text shows, and the change it needs does not move the claim to another class.
		if sa, sb := a.Class == class, b.Class == class; sa != sb {
			return sa
		}
		return a.Volume < b.Volume
	})
	return rows
}

// pairJudge fills the POLICY column from the policy engine (Input.Policy): the pairs that pass
// every other pair check are judged as the binder judges a pair before binding it
// (binder.BindDenials). The binder asks policy about no other pair, and a pair failing a check
// before POLICY would mostly be denied for that same reason (most pair checks are rules too), so
// the other pairs are not judged: their POLICY column shows only a denial the binder met.
type pairJudge struct {
	in   Input
	view policy.View
	// bind judges the binds of one claim, the one a table asks about, reusing its copies.
	bind *binder.BindJudge
}

// newPairJudge is the judge of in's pairs (nil without a policy engine), against in.View or, when
// it is nil, in.State, which must be set.
func newPairJudge(in Input) *pairJudge {
	if in.Policy == nil {
		return nil
	}
	view := in.View
	if view == nil {
		view = in.State
	}
	return &pairJudge{in: in, view: view}
}

// judgedAfter are the checks a pair must pass to be judged by policy: every pair check before
// RESERVED, which is the binder's in-flight state, not the pair's.
var judgedAfter = map[Check]bool{CheckClass: true, CheckAttributesClass: true, CheckAccessModes: true, CheckVolumeMode: true,
	CheckCapacity: true, CheckSelector: true, CheckNodeAffinity: true, CheckPhase: true, CheckClaimRef: true}

// maxPolicyValue bounds the POLICY cell: a rule's message can be long, and the table is read
// across.
const maxPolicyValue = 100

// judge is the row with its POLICY column filled, and whether policy denies the pair.
func (j *pairJudge) judge(row Candidate, v *corev1.PersistentVolume, c *corev1.PersistentVolumeClaim) (Candidate, bool) {
	if j == nil {
		return row, false
	}
	for _, r := range row.Checks {
		if judgedAfter[r.Check] && !r.Pass {
			return row, false
		}
	}
	value, deny := j.denial(v, c)
	if !deny {
		return row, false
	}
	return withPolicy(row, value), true
}

// denial is policy's word on the pair (judged whatever the other checks say): its POLICY value
// and true when policy denies it, or could not judge it.
func (j *pairJudge) denial(v *corev1.PersistentVolume, c *corev1.PersistentVolumeClaim) (policy.Text, bool) {
	if j.bind == nil || j.bind.Claim() != c {
		j.bind = binder.NewBindJudge(j.in.Policy, j.in.Identity, j.view, c)
	}
	denials, err := j.bind.Denials(v)
	var value policy.Text
	switch {
	case len(denials) > 0:
		ids := make([]string, 0, len(denials))
		for _, f := range denials {
			if !slices.Contains(ids, string(f.Rule)) {
				ids = append(ids, string(f.Rule))
			}
		}
		// Findings carry no secret values: messages name fields and keys, never their values
		// (PVG016 names the key of a credential-like attribute only).
		value = policy.Textf("%s: %s", policy.Word(strings.Join(ids, ", ")), denials[0].Message)
	case err != nil:
		// The error may name what the reader may not read: it is for pvguard's log.
		value = policy.Plain("policy could not judge the pair")
	default:
		return policy.Text{}, false
	}
	return policy.Textf("%s", policy.Cut(value, maxPolicyValue)), true
}

// withPolicy is the row with its POLICY column failed with value, policy's word on a pair it
// denies (denial).
func withPolicy(row Candidate, value policy.Text) Candidate {
	row.Checks = slices.Clone(row.Checks)
	for i := range row.Checks {
		r := &row.Checks[i]
		if r.Check != CheckPolicy {
			continue
		}
		if !r.Pass {
			value = policy.Textf("%s; %s", r.Value, value) // a denial the binder met lately, and the rules' word now
		}
		r.Pass, r.Value = false, value
	}
	row.Fits = false
	return row
}

// withDenials is the binder's in-flight state with the claim's pairs that policy denies
// (pairJudge) denied just now: the binder, which plans without asking policy, would try such a
// pair, be refused, and keep it out of its plans (binder.InFlight), so the plan that explains the
// claim leaves them out from the start. The input's state is not changed.
func withDenials(f binder.InFlight, claim types.UID, volumes []string) binder.InFlight {
	if len(volumes) == 0 {
		return f
	}
	if f.At.IsZero() {
		f.At = time.Now()
	}
	denied := make(map[types.UID]map[string]time.Time, len(f.Denied)+1)
	for uid, m := range f.Denied {
		denied[uid] = m
	}
	mine := make(map[string]time.Time, len(f.Denied[claim])+len(volumes))
	for v, at := range f.Denied[claim] {
		mine[v] = at
	}
	for _, v := range volumes {
		mine[v] = f.At
	}
	denied[claim] = mine
	f.Denied = denied
	return f
}

// candidate runs every check on one volume for the claim.
func candidate(x *index, c *corev1.PersistentVolumeClaim, v *corev1.PersistentVolume, targets []nodeTarget) Candidate {
	row := Candidate{Volume: v.Name, Class: storage.VolumeClass(v)}
	add := func(check Check, pass bool, value policy.Text) {
		r := Result{Check: check, Pass: pass}
		if !pass {
			r.Value = value
		}
		row.Checks = append(row.Checks, r)
	}
	word := func(format string, args ...any) policy.Text { return policy.Plain(policy.Wordf(format, args...)) }
	add(CheckClass, storage.ClassesMatch(v, c), word("%s != %s", orNone(storage.VolumeClass(v)), orNone(storage.ClaimClass(c))))
	add(CheckAttributesClass, storage.AttributesClassesMatch(v, c), word("%s != %s", orNone(deref(v.Spec.VolumeAttributesClassName)), orNone(deref(c.Spec.VolumeAttributesClassName))))
	missing := storage.MissingAccessModes(v, c)
	add(CheckAccessModes, storage.AccessModesFit(v, c), word("%s lacks %s", modes(v.Spec.AccessModes), modes(missing)))
	add(CheckVolumeMode, storage.ModesMatch(v, c), word("%s != %s", volumeMode(v.Spec.VolumeMode), volumeMode(c.Spec.VolumeMode)))
	capacity, request := v.Spec.Capacity[corev1.ResourceStorage], c.Spec.Resources.Requests[corev1.ResourceStorage]
	add(CheckCapacity, storage.CapacityFits(v, c), word("%s < %s", quantity(capacity), quantity(request)))
	ok, err := storage.SelectorAdmits(c, v)
	switch {
	case err != nil:
		add(CheckSelector, false, word("invalid selector: %s", err))
	default:
		sel, _ := storage.ParseClaimSelector(c)
		add(CheckSelector, ok, word("labels do not match %s", sel))
	}
	check, pass, value := nodeAffinity(v, targets)
	add(check, pass, policy.Plain(policy.Word(value)))
	avail := binder.VolumeAvailabilityFor(c, v, x.in.PendingFree)
	phase := string(v.Status.Phase)
	if phase == "" {
		phase = "no phase"
	}
	if avail == binder.VolumeBeingDeleted {
		phase = "being deleted"
	}
	// A volume another claim holds fails CLAIMREF; its phase is judged as well, so that a
	// Released volume still linked to an earlier claim of the same name says it is Released.
	phaseOK := avail != binder.VolumeBeingDeleted && avail != binder.VolumeNotFree
	if avail == binder.VolumeClaimedElsewhere {
		phaseOK = v.Status.Phase == corev1.VolumeAvailable || v.Status.Phase == corev1.VolumePending || v.Status.Phase == ""
	}
	add(CheckPhase, phaseOK, word("%s", phase))
	ref := v.Spec.ClaimRef
	var refValue policy.Text
	if ref != nil {
		refValue = policy.Textf("pre-bound to %s", claimKey(ref.Namespace, ref.Name))
		if ref.UID != "" {
			refValue = policy.Textf("bound to %s", claimKey(ref.Namespace, ref.Name))
			if ref.Namespace == c.Namespace && ref.Name == c.Name {
				refValue = policy.Textf("bound to %s (uid %s, an earlier claim of that name)", claimKey(ref.Namespace, ref.Name),
					policy.UID(policy.ObjectRef{Kind: policy.KindPersistentVolumeClaim, Namespace: ref.Namespace, Name: ref.Name}, ref.UID))
			}
		}
	}
	add(CheckClaimRef, avail != binder.VolumeClaimedElsewhere, refValue)
	owner, reserved := x.in.InFlight.Reserved[v.Name]
	who, ok := x.claimName(owner)
	if !ok {
		who = policy.Word("a claim that is gone")
	}
	add(CheckReserved, !reserved || owner == c.UID, policy.Textf("bind to %s in flight", who))
	at, denied := x.in.InFlight.DeniedAt(c.UID, v.Name)
	add(CheckPolicy, !denied, word("denied at %s", at.UTC().Format(time.RFC3339)))
	row.Fits = len(row.Failed()) == 0
	return row
}

// nodeAffinity judges the volume's node affinity against each node it must reach (nodeTargets),
// as the planner judges it against the selected node: a node that does not exist is reached only
// by a volume without node affinity.
func nodeAffinity(v *corev1.PersistentVolume, targets []nodeTarget) (Check, bool, string) {
	if len(targets) == 0 {
		return CheckNodeAffinity, true, ""
	}
	aff, err := storage.ParseVolumeAffinity(v)
	if err != nil {
		return CheckNodeAffinity, false, "invalid node affinity: " + err.Error()
	}
	for _, t := range targets {
		if aff.Admits(t.node) {
			continue
		}
		switch {
		case t.node == nil && t.pod != "":
			return CheckNodeAffinity, false, fmt.Sprintf("node %s of pod %s not found", t.name, t.pod)
		case t.node == nil:
			return CheckNodeAffinity, false, fmt.Sprintf("node %s not found", t.name)
		case t.pod != "":
			return CheckNodeAffinity, false, fmt.Sprintf("does not reach node %s, where pod %s is", t.name, t.pod)
		default:
			return CheckNodeAffinity, false, fmt.Sprintf("does not reach node %s", t.name)
		}
	}
	return CheckNodeAffinity, true, ""
}

func orNone(s string) string {
	if s == "" {
		return `""`
	}
	return s
}

func deref[S ~string](p *S) string {
	if p == nil {
		return ""
	}
	return string(*p)
}

func modes(m []corev1.PersistentVolumeAccessMode) string {
	if len(m) == 0 {
		return "none"
	}
	s := make([]string, len(m))
	for i, x := range m {
		s[i] = string(x)
	}
	return strings.Join(s, ",")
}

func volumeMode(m *corev1.PersistentVolumeMode) string {
	if m == nil || *m == "" {
		return string(corev1.PersistentVolumeFilesystem)
	}
	return string(*m)
}

func quantity(q resource.Quantity) string {
	if q.IsZero() {
		return "0"
	}
	return q.String()
}
