package explain

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvguard/pvguard/binder"
	"github.com/pvguard/pvguard/policy"
)

// Input is what an explanation reads: the cluster's claims, volumes, classes and nodes (all of
// them: other claims compete for the same volumes), and optionally the binder's in-flight state.
type Input struct {
	Claims  []*corev1.PersistentVolumeClaim
	Volumes []*corev1.PersistentVolume
	Classes []*storagev1.StorageClass
	// Nodes need only the nodes that claims' selected-node annotations name; a node missing is
	// one that does not exist (binder.PlanInput.Nodes).
	Nodes []*corev1.Node
	// PendingFree and InFlight are the binder's (binder.PlanInput); zero for a dump or a live
	// read from outside the binder.
	PendingFree bool
	InFlight    binder.InFlight
	// Pods and Events are optional (a live read has them, a dump of volumes and claims does
	// not): the pods of the claim's namespace, and the events about them. With them, a claim
	// waiting for its first consumer whose pod exists says what the scheduler said of the pod.
	Pods   []*corev1.Pod
	Events []*corev1.Event
}

// ErrUnknownClaim is returned for a claim that is not in the input.
var ErrUnknownClaim = errors.New("no such PersistentVolumeClaim")

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

// What a claim waits for (Explanation.WaitingFor).
const (
	WaitingForNothing     = "nothing"     // bound, or stuck until something changes (State says what)
	WaitingForConsumer    = "consumer"    // WaitForFirstConsumer and no pod scheduled yet
	WaitingForProvisioner = "provisioner" // an external provisioner, named in Provisioner
	WaitingForBinder      = "binder"      // the binder has a volume for it and is to write the binding
	WaitingForVolume      = "volume"      // spec.volumeName names a volume that does not exist
	WaitingForScheduler   = "scheduler"   // WaitForFirstConsumer, and a pod that uses it is not scheduled yet
)

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
	// Pods are the pods (namespace/name) that use the claim, when pods were read.
	Pods []string `json:"pods,omitempty"`
	// State says in one sentence what the claim's state is and what it waits for.
	State string `json:"state"`
	// Candidates are all volumes, closest first: those that fit, then by the number of checks
	// failed, then by name.
	Candidates []Candidate `json:"candidates"`
	Verdict    Verdict     `json:"verdict"`
}

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
	TakenBy string `json:"takenBy,omitempty"`
}

// Result is one check of one volume: a pass, or the failing value (`Filesystem != Block`).
type Result struct {
	Check Check  `json:"check"`
	Pass  bool   `json:"pass"`
	Value string `json:"value,omitempty"`
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

// Claim explains the claim namespace/name.
func Claim(in Input, namespace, name string) (*Explanation, error) {
	in.Claims = withUIDs(in.Claims)
	var c *corev1.PersistentVolumeClaim
	for _, pvc := range in.Claims {
		if pvc.Namespace == namespace && pvc.Name == name {
			c = pvc
		}
	}
	if c == nil {
		return nil, fmt.Errorf("%w %s/%s", ErrUnknownClaim, namespace, name)
	}
	x := newExplainer(in)
	x.plan = binder.Plan(binder.PlanInput{Claims: in.Claims, Volumes: in.Volumes, Classes: in.Classes,
		Nodes: x.nodes, PendingFree: in.PendingFree, InFlight: in.InFlight})
	x.indexPlan()
	return x.claim(c, false), nil
}

// explainer holds what explaining any claim over one plan reads, so that explaining many claims
// over the same input (the binder's NoVolumeFits pass) plans and indexes once.
type explainer struct {
	in      Input
	plan    binder.PoolPlan
	classes map[string]*storagev1.StorageClass
	nodes   map[string]*corev1.Node
	// claimByUID names (namespace/name) each claim; owner maps each volume the plan gives out
	// to its claim, and planned holds the claims the plan considered.
	claimByUID map[types.UID]string
	owner      map[string]types.UID
	planned    map[types.UID]bool
}

func newExplainer(in Input) *explainer {
	x := &explainer{in: in, classes: map[string]*storagev1.StorageClass{}, nodes: map[string]*corev1.Node{},
		claimByUID: make(map[types.UID]string, len(in.Claims))}
	for _, sc := range in.Classes {
		x.classes[sc.Name] = sc
	}
	for _, n := range in.Nodes {
		x.nodes[n.Name] = n
	}
	for _, pc := range in.Claims {
		x.claimByUID[pc.UID] = pc.Namespace + "/" + pc.Name
	}
	return x
}

// indexPlan indexes x.plan.
func (x *explainer) indexPlan() {
	x.owner = make(map[string]types.UID, len(x.plan.Volumes))
	for uid, v := range x.plan.Volumes {
		if v != "" {
			x.owner[v] = uid
		}
	}
	x.planned = make(map[types.UID]bool, len(x.plan.Claims))
	for _, pc := range x.plan.Claims {
		x.planned[pc.UID] = true
	}
}

// claim explains one claim. With onlyIfStuck, it stops after the state when the claim waits for
// something (WaitingFor is not "nothing"): the candidate table, a pass over every volume, is
// what costs, and NoVolumeFits needs it only for claims nothing else will give a volume.
func (x *explainer) claim(c *corev1.PersistentVolumeClaim, onlyIfStuck bool) *Explanation {
	in := x.in
	e := &Explanation{Claim: c.Namespace + "/" + c.Name, Phase: string(c.Status.Phase), Class: policy.ClaimClass(c)}
	class := x.classes[e.Class]
	if e.Class != "" && class != nil {
		e.BindingMode = string(storagev1.VolumeBindingImmediate) // the API server's default
		if class.VolumeBindingMode != nil {
			e.BindingMode = string(*class.VolumeBindingMode)
		}
	}
	nodeName, scheduled := c.Annotations[policy.AnnSelectedNode]
	e.SelectedNode = nodeName
	e.state(c, in, class, x.plan.Volumes[c.UID])
	if onlyIfStuck && e.WaitingFor != WaitingForNothing {
		return e
	}
	for _, v := range in.Volumes {
		row := candidate(in, c, v, x.nodes[nodeName], nodeName, scheduled, x.claimByUID)
		if uid, ok := x.owner[v.Name]; ok && uid != c.UID {
			row.TakenBy = x.claimByUID[uid]
		}
		e.Candidates = append(e.Candidates, row)
	}
	sort.SliceStable(e.Candidates, func(i, j int) bool {
		a, b := e.Candidates[i], e.Candidates[j]
		if fa, fb := len(a.Failed()), len(b.Failed()); fa != fb {
			return fa < fb
		}
		return a.Volume < b.Volume
	})
	e.consumers(c, in)
	e.verdict(c, x.planned[c.UID])
	return e
}

// withUIDs gives claims without a uid (manifests written by hand) one of their own, derived
// from the name, so that the plan, which keys claims by uid, tells them apart. The input is not
// changed: such claims are copied.
func withUIDs(claims []*corev1.PersistentVolumeClaim) []*corev1.PersistentVolumeClaim {
	out, copied := claims, false
	for i, c := range claims {
		if c.UID != "" {
			continue
		}
		if !copied {
			out, copied = slices.Clone(claims), true
		}
		cp := c.DeepCopy()
		cp.UID = types.UID("explain:" + c.Namespace + "/" + c.Name)
		out[i] = cp
	}
	return out
}

// state fills WaitingFor, Provisioner, State and the verdict's Volume from binder.DecideClaim.
func (e *Explanation) state(c *corev1.PersistentVolumeClaim, in Input, class *storagev1.StorageClass, assigned string) {
	volumes := map[string]*corev1.PersistentVolume{}
	s := binder.ClaimState{Claim: c, Class: class, DefaultClass: binder.DefaultClass(in.Classes), Planned: true}
	for _, v := range in.Volumes {
		volumes[v.Name] = v
		if ref := v.Spec.ClaimRef; ref != nil && ref.Namespace == c.Namespace && ref.Name == c.Name {
			s.PreBound = append(s.PreBound, v)
		}
	}
	s.Volume = volumes[c.Spec.VolumeName]
	s.VolumeConfirmed = true
	s.Assigned = volumes[assigned]
	_, bound := c.Annotations[policy.AnnBindCompleted]
	a := binder.DecideClaim(s)
	e.WaitingFor = WaitingForNothing
	switch {
	case c.DeletionTimestamp != nil:
		e.State = "being deleted"
	case bound && a.Bind != nil && c.Status.Phase == corev1.ClaimBound:
		e.State = fmt.Sprintf("bound to volume %s", a.Bind.Name)
		e.Verdict.Volume = a.Bind.Name
	case a.Bind != nil:
		e.WaitingFor = WaitingForBinder
		e.State = fmt.Sprintf("the binder is to bind it to volume %s", a.Bind.Name)
		e.Verdict.Volume = a.Bind.Name
	case a.Phase == corev1.ClaimLost:
		e.State = "Lost: " + a.Event.Message
	case a.SetClass != "":
		e.WaitingFor = WaitingForBinder
		e.State = fmt.Sprintf("the binder is to give it the default class %s", a.SetClass)
	case c.Spec.VolumeName != "" && s.Volume == nil:
		e.WaitingFor = WaitingForVolume
		e.State = fmt.Sprintf("waiting for volume %s, which spec.volumeName names and which does not exist", c.Spec.VolumeName)
	case a.Event == nil:
		e.State = "Pending"
	case a.Event.Reason == binder.ReasonWaitForFirstConsumer:
		e.WaitingFor = WaitingForConsumer
		e.State = fmt.Sprintf("waiting for its first consumer: class %s binds once a pod that uses the claim is scheduled", e.Class)
	case a.Event.Reason == binder.ReasonExternalProvisioning:
		e.WaitingFor, e.Provisioner = WaitingForProvisioner, class.Provisioner
		e.State = fmt.Sprintf("waiting for the external provisioner %s to create a volume", class.Provisioner)
		if e.SelectedNode != "" {
			e.State += " on node " + e.SelectedNode
		}
	default:
		e.State = a.Event.Reason + ": " + a.Event.Message
	}
}

// consumers lists the pods that use the claim and, for a claim waiting for its first consumer
// while one exists but is not scheduled, says so with the scheduler's latest word on it.
func (e *Explanation) consumers(c *corev1.PersistentVolumeClaim, in Input) {
	var unscheduled *corev1.Pod
	for _, p := range in.Pods {
		if p.Namespace != c.Namespace || !usesClaim(p, c.Name) {
			continue
		}
		e.Pods = append(e.Pods, p.Namespace+"/"+p.Name)
		if p.Spec.NodeName == "" && p.DeletionTimestamp == nil && unscheduled == nil {
			unscheduled = p
		}
	}
	sort.Strings(e.Pods)
	if e.WaitingFor == WaitingForProvisioner {
		if ev := firstEvent(in.Events, "PersistentVolumeClaim", c.Namespace, c.Name, c.UID, binder.ReasonExternalProvisioning); ev != nil {
			e.State += fmt.Sprintf(" (asked since %s)", ev.UTC().Format(time.RFC3339))
		}
	}
	if e.WaitingFor != WaitingForConsumer || unscheduled == nil {
		return
	}
	e.WaitingFor = WaitingForScheduler
	e.State = fmt.Sprintf("waiting for the scheduler: pod %s uses the claim and is not scheduled yet", unscheduled.Name)
	if ev := latestEvent(in.Events, unscheduled, "FailedScheduling"); ev != nil {
		e.State += "; it said: " + strings.TrimSpace(ev.Message)
	}
}

// usesClaim reports whether one of the pod's volumes is the claim (directly; generic ephemeral
// volumes' claims are named <pod>-<volume>).
func usesClaim(p *corev1.Pod, claim string) bool {
	for _, v := range p.Spec.Volumes {
		switch {
		case v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == claim:
			return true
		case v.Ephemeral != nil && p.Name+"-"+v.Name == claim:
			return true
		}
	}
	return false
}

// firstEvent is when the object first got an event of that reason (the earliest first
// timestamp of the events, or series, of that reason about it), nil if never.
func firstEvent(events []*corev1.Event, kind, namespace, name string, uid types.UID, reason string) *time.Time {
	var first *time.Time
	for _, ev := range events {
		o := ev.InvolvedObject
		if ev.Reason != reason || o.Kind != kind || o.Namespace != namespace || o.Name != name || (o.UID != "" && o.UID != uid) {
			continue
		}
		at := ev.FirstTimestamp.Time
		if at.IsZero() {
			at = ev.EventTime.Time
		}
		if !at.IsZero() && (first == nil || at.Before(*first)) {
			first = &at
		}
	}
	return first
}

// latestEvent is the newest event of that reason about the pod, nil if none.
func latestEvent(events []*corev1.Event, p *corev1.Pod, reason string) *corev1.Event {
	var best *corev1.Event
	var bestAt time.Time
	for _, ev := range events {
		o := ev.InvolvedObject
		if ev.Reason != reason || o.Kind != "Pod" || o.Namespace != p.Namespace || o.Name != p.Name || (o.UID != "" && o.UID != p.UID) {
			continue
		}
		at := ev.LastTimestamp.Time
		if t := ev.EventTime.Time; t.After(at) {
			at = t
		}
		if best == nil || at.After(bestAt) {
			best, bestAt = ev, at
		}
	}
	return best
}

// verdict fills the rest of the verdict from the candidate table.
func (e *Explanation) verdict(c *corev1.PersistentVolumeClaim, planned bool) {
	v := &e.Verdict
	if v.Volume != "" {
		if e.WaitingFor == WaitingForBinder {
			v.Text = fmt.Sprintf("the binder takes %s", v.Volume)
		} else {
			v.Text = fmt.Sprintf("bound to %s", v.Volume)
		}
		return
	}
	if e.WaitingFor == WaitingForNothing && e.Phase == string(corev1.ClaimBound) || c.DeletionTimestamp != nil {
		v.Text = e.State
		return
	}
	if name := c.Spec.VolumeName; name != "" {
		e.namedVolumeVerdict(name)
		return
	}
	var fitting, taken []string
	for _, cand := range e.Candidates {
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
		return
	case !planned && len(fitting) > 0 && (e.WaitingFor == WaitingForConsumer || e.WaitingFor == WaitingForScheduler):
		v.Text = fmt.Sprintf("the scheduler may bind %s once a pod that uses the claim is scheduled to a node it reaches", strings.Join(fitting, " or "))
		return
	case len(fitting) > 0:
		v.Text = fmt.Sprintf("%s fit; the binder takes none of them now", strings.Join(fitting, ", "))
		return
	}
	for _, cand := range e.Candidates {
		if cand.TakenBy != "" {
			continue
		}
		v.Closest = cand.Volume
		for _, r := range cand.Failed() {
			v.Changes = append(v.Changes, change(r, cand))
		}
		v.Text = fmt.Sprintf("no volume fits; %s fits if %s", v.Closest, strings.Join(v.Changes, " and "))
		return
	}
	v.Text = "no volume fits, and there are no volumes to consider"
}

// namedChecks are the checks a claim that names its volume (spec.volumeName) is held to, as
// binder.DecideClaim holds it: what policy.Satisfies asks, and that no other claim has the volume.
var namedChecks = map[Check]bool{CheckClass: true, CheckAttributesClass: true, CheckAccessModes: true,
	CheckVolumeMode: true, CheckCapacity: true, CheckClaimRef: true}

// namedVolumeVerdict is the verdict for a claim that names its volume and is not bound to it:
// what keeps that volume from it.
func (e *Explanation) namedVolumeVerdict(name string) {
	v := &e.Verdict
	for _, cand := range e.Candidates {
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
			return
		}
		v.Text = fmt.Sprintf("the claim names volume %s, which fits if %s", name, strings.Join(v.Changes, " and "))
		return
	}
	v.Text = fmt.Sprintf("the claim names volume %s, which does not exist", name)
}

// candidate runs every check on one volume for the claim.
func candidate(in Input, c *corev1.PersistentVolumeClaim, v *corev1.PersistentVolume, node *corev1.Node, nodeName string, scheduled bool, claims map[types.UID]string) Candidate {
	row := Candidate{Volume: v.Name, Class: policy.VolumeClass(v)}
	add := func(check Check, pass bool, value string) {
		r := Result{Check: check, Pass: pass}
		if !pass {
			r.Value = value
		}
		row.Checks = append(row.Checks, r)
	}
	add(CheckClass, policy.ClassesMatch(v, c), fmt.Sprintf("%s != %s", orNone(policy.VolumeClass(v)), orNone(policy.ClaimClass(c))))
	add(CheckAttributesClass, policy.AttributesClassesMatch(v, c), fmt.Sprintf("%s != %s", orNone(deref(v.Spec.VolumeAttributesClassName)), orNone(deref(c.Spec.VolumeAttributesClassName))))
	missing := policy.MissingAccessModes(v, c)
	add(CheckAccessModes, policy.AccessModesFit(v, c), fmt.Sprintf("%s lacks %s", modes(v.Spec.AccessModes), modes(missing)))
	add(CheckVolumeMode, policy.ModesMatch(v, c), fmt.Sprintf("%s != %s", volumeMode(v.Spec.VolumeMode), volumeMode(c.Spec.VolumeMode)))
	capacity, request := v.Spec.Capacity[corev1.ResourceStorage], c.Spec.Resources.Requests[corev1.ResourceStorage]
	add(CheckCapacity, policy.CapacityFits(v, c), fmt.Sprintf("%s < %s", quantity(capacity), quantity(request)))
	ok, err := policy.SelectorAdmits(c, v)
	switch {
	case err != nil:
		add(CheckSelector, false, "invalid selector: "+err.Error())
	default:
		sel, _ := policy.ParseClaimSelector(c)
		add(CheckSelector, ok, fmt.Sprintf("labels do not match %s", sel))
	}
	if scheduled {
		aff, err := policy.ParseVolumeAffinity(v)
		switch {
		case err != nil:
			add(CheckNodeAffinity, false, "invalid node affinity: "+err.Error())
		case node == nil:
			add(CheckNodeAffinity, aff.Admits(nil), fmt.Sprintf("node %s not found", nodeName))
		default:
			add(CheckNodeAffinity, aff.Admits(node), fmt.Sprintf("does not reach node %s", nodeName))
		}
	} else {
		add(CheckNodeAffinity, true, "")
	}
	avail := binder.VolumeAvailabilityFor(c, v, in.PendingFree)
	phase := string(v.Status.Phase)
	if phase == "" {
		phase = "no phase"
	}
	if avail == binder.VolumeBeingDeleted {
		phase = "being deleted"
	}
	add(CheckPhase, avail != binder.VolumeBeingDeleted && avail != binder.VolumeNotFree, phase)
	ref := v.Spec.ClaimRef
	refValue := ""
	if ref != nil {
		refValue = "pre-bound to " + ref.Namespace + "/" + ref.Name
		if ref.UID != "" {
			refValue = "bound to " + ref.Namespace + "/" + ref.Name
			if ref.Namespace == c.Namespace && ref.Name == c.Name {
				refValue += " (uid " + string(ref.UID) + ", an earlier claim of that name)"
			}
		}
	}
	add(CheckClaimRef, avail != binder.VolumeClaimedElsewhere, refValue)
	owner, reserved := in.InFlight.Reserved[v.Name]
	who := claims[owner]
	if who == "" {
		who = "uid " + string(owner)
	}
	add(CheckReserved, !reserved || owner == c.UID, "bind to "+who+" in flight")
	at, denied := in.InFlight.DeniedAt(c.UID, v.Name)
	add(CheckPolicy, !denied, "denied at "+at.UTC().Format(time.RFC3339))
	row.Fits = len(row.Failed()) == 0
	return row
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
		return "the claim's pod is scheduled to a node the volume reaches"
	case CheckPhase:
		return fmt.Sprintf("the volume becomes Available (it is %s)", r.Value)
	case CheckClaimRef:
		return fmt.Sprintf("the volume is freed (it is %s)", r.Value)
	case CheckReserved:
		return fmt.Sprintf("the %s fails", r.Value)
	default:
		return fmt.Sprintf("policy allows the pair (%s)", r.Value)
	}
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
