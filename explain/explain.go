package explain

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvguard/pvguard/binder"
	"github.com/pvguard/pvguard/clusterstate"
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
	// Policy, when set, judges each pair that passes every pair check before POLICY as the
	// binder judges a pair before binding it (binder.BindDenials): as Identity, the binder's
	// user, against View, the objects as they are (nil: a view over this input). Without it the
	// POLICY column shows only the denials the binder met lately (InFlight). explain.Volume
	// reports the audit findings of this engine (without it, of the default config's).
	Policy   *policy.Engine
	Identity policy.UserInfo
	View     policy.View
	// Leases are the coordination.k8s.io Leases named for the claim's provisioner
	// (ProvisionerLeaseName), from any namespace, and LeasesRead says they were read, so that
	// none means there are none (a live read; a dump has no leases). With them, a claim waiting
	// for its provisioner says whether the provisioner appears to run.
	Leases     []*coordinationv1.Lease
	LeasesRead bool
	// Now is when the explanation is made, to age leases (zero: the current time).
	Now time.Time
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
	// ProvisionerRunning says, when the claim waits for a provisioner and leases were read,
	// whether the provisioner appears to run, from the Lease its leader election holds
	// (ProvisionerLeaseName): "yes" (held and renewed within its duration), "no" (not renewed
	// within its duration, or released), "unknown" (no such Lease: a provisioner without leader
	// election holds none).
	ProvisionerRunning string `json:"provisionerRunning,omitempty"`
	// Pods are the pods (namespace/name) that use the claim, when pods were read.
	Pods []string `json:"pods,omitempty"`
	// State says in one sentence what the claim's state is and what it waits for.
	State string `json:"state"`
	// Candidates are all volumes, closest first: those that fit, then by the number of checks
	// failed, then those of the claim's class, then by name.
	Candidates []Candidate `json:"candidates"`
	Verdict    Verdict     `json:"verdict"`
	// Refused lists, newest first, the writes about the claim that events report refused, and
	// which enforcement point refused each (pvguard's webhook, an admission policy the apiserver
	// enforces by itself, pvguard's webhook not answering, pvguard's binder), when the event
	// tells. Only when events were read.
	Refused []Refusal `json:"refused,omitempty"`

	// placedWithoutScheduler is the pod that uses the claim, is on a node, and was placed there
	// without the scheduler (the claim waits for its first consumer all the same).
	placedWithoutScheduler *corev1.Pod
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
	x.plan = binder.Plan(binder.PlanInput{State: clusterstate.New(in.Claims, in.Volumes, in.Classes, in.Nodes),
		PendingFree: in.PendingFree, InFlight: in.InFlight})
	x.indexPlan()
	e := x.claim(c, false)
	e.Refused = refusals(in.Events, c)
	return e, nil
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
	// volumes indexes the volumes by name, claiming by the claim (namespace/name) their
	// claimRef names: built once, not per claim explained (at 100,000 volumes a map per claim
	// was most of what the binder's NoVolumeFits pass allocated).
	volumes  map[string]*corev1.PersistentVolume
	claiming map[string][]*corev1.PersistentVolume
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
	x.volumes = make(map[string]*corev1.PersistentVolume, len(in.Volumes))
	x.claiming = map[string][]*corev1.PersistentVolume{}
	for _, v := range in.Volumes {
		x.volumes[v.Name] = v
		if ref := v.Spec.ClaimRef; ref != nil {
			k := ref.Namespace + "/" + ref.Name
			x.claiming[k] = append(x.claiming[k], v)
		}
	}
	return x
}

// indexPlan indexes x.plan.
func (x *explainer) indexPlan() { x.owner, x.planned = indexPlan(x.plan) }

// indexPlan maps each volume a plan gives out to its claim, and says which claims it considered.
func indexPlan(plan binder.PoolPlan) (owner map[string]types.UID, planned map[types.UID]bool) {
	owner = make(map[string]types.UID, len(plan.Volumes))
	for uid, v := range plan.Volumes {
		if v != "" {
			owner[v] = uid
		}
	}
	planned = make(map[types.UID]bool, len(plan.Claims))
	for _, pc := range plan.Claims {
		planned[pc.UID] = true
	}
	return owner, planned
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
	targets := nodeTargets(c, in.Pods, x.nodes, nodeName, scheduled)
	plan, owner, planned := x.plan, x.owner, x.planned
	e.state(c, x, class, plan.Volumes[c.UID])
	if onlyIfStuck && e.WaitingFor != WaitingForNothing {
		return e
	}
	judge := newPairJudge(in)
	var denied []string
	for _, v := range in.Volumes {
		row := candidate(in, c, v, targets, x.claimByUID)
		if judge.judge(&row, v, c) {
			denied = append(denied, v.Name)
		}
		e.Candidates = append(e.Candidates, row)
	}
	if len(denied) > 0 {
		// The binder leaves a pair policy refuses out of its next plan (ledger.deny): plan
		// again without the pairs the engine denies, so that the verdict never names a volume
		// the binder would be refused.
		plan = binder.Plan(binder.PlanInput{State: clusterstate.New(in.Claims, in.Volumes, in.Classes, in.Nodes),
			PendingFree: in.PendingFree, InFlight: withDenials(in.InFlight, c.UID, denied)})
		owner, planned = indexPlan(plan)
		e.state(c, x, class, plan.Volumes[c.UID])
	}
	for i := range e.Candidates {
		if uid, ok := owner[e.Candidates[i].Volume]; ok && uid != c.UID {
			e.Candidates[i].TakenBy = x.claimByUID[uid]
		}
	}
	sort.SliceStable(e.Candidates, func(i, j int) bool {
		a, b := e.Candidates[i], e.Candidates[j]
		if fa, fb := len(a.Failed()), len(b.Failed()); fa != fb {
			return fa < fb
		}
		// Between volumes as close, one of the claim's class first: it is in the table the
		// text shows, and the change it needs does not move the claim to another class.
		if sa, sb := a.Class == e.Class, b.Class == e.Class; sa != sb {
			return sa
		}
		return a.Volume < b.Volume
	})
	e.consumers(c, in, targets)
	e.provisionerLease(in)
	e.verdict(c, planned[c.UID])
	return e
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
func nodeTargets(c *corev1.PersistentVolumeClaim, pods []*corev1.Pod, nodes map[string]*corev1.Node, selected string, scheduled bool) []nodeTarget {
	if scheduled {
		return []nodeTarget{{name: selected, node: nodes[selected]}}
	}
	var out []nodeTarget
	seen := map[string]bool{}
	for _, p := range sortedPods(pods) {
		if p.Namespace != c.Namespace || p.Spec.NodeName == "" || p.DeletionTimestamp != nil || !usesClaim(p, c.Name) || seen[p.Spec.NodeName] {
			continue
		}
		seen[p.Spec.NodeName] = true
		out = append(out, nodeTarget{name: p.Spec.NodeName, node: nodes[p.Spec.NodeName], pod: p.Name})
	}
	return out
}

func sortedPods(pods []*corev1.Pod) []*corev1.Pod {
	out := slices.Clone(pods)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Namespace+"/"+out[i].Name < out[j].Namespace+"/"+out[j].Name })
	return out
}

// pairJudge fills the POLICY column from the policy engine (Input.Policy): the pairs that pass
// every other pair check are judged as the binder judges a pair before binding it
// (binder.BindDenials). The binder asks policy about no other pair, and a pair failing a check
// before POLICY would mostly be denied for that same reason (most pair checks are rules too), so
// the other pairs are not judged: their POLICY column shows only a denial the binder met.
type pairJudge struct {
	in   Input
	view policy.View
}

func newPairJudge(in Input) *pairJudge {
	if in.Policy == nil {
		return nil
	}
	return &pairJudge{in: in, view: in.View}
}

// judgedAfter are the checks a pair must pass to be judged by policy: every pair check before
// RESERVED, which is the binder's in-flight state, not the pair's.
var judgedAfter = map[Check]bool{CheckClass: true, CheckAttributesClass: true, CheckAccessModes: true, CheckVolumeMode: true,
	CheckCapacity: true, CheckSelector: true, CheckNodeAffinity: true, CheckPhase: true, CheckClaimRef: true}

// maxPolicyValue bounds the POLICY cell: a rule's message can be long, and the table is read
// across.
const maxPolicyValue = 100

// judge fills the row's POLICY column and reports whether policy denies the pair.
func (j *pairJudge) judge(row *Candidate, v *corev1.PersistentVolume, c *corev1.PersistentVolumeClaim) bool {
	if j == nil {
		return false
	}
	for _, r := range row.Checks {
		if judgedAfter[r.Check] && !r.Pass {
			return false
		}
	}
	if j.view == nil {
		// Built on the first pair judged: indexing the whole input costs a tenth of a second
		// at 100,000 objects, for nothing when no pair gets this far.
		j.view = clusterstate.New(j.in.Claims, j.in.Volumes, j.in.Classes, j.in.Nodes)
	}
	denials, err := binder.BindDenials(j.in.Policy, j.in.Identity, j.view, v, c)
	var value string
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
		value = strings.Join(ids, ", ") + ": " + denials[0].Message
	case err != nil:
		value = "policy could not judge the pair: " + err.Error()
	default:
		return false
	}
	value = shorten(value, maxPolicyValue)
	for i := range row.Checks {
		r := &row.Checks[i]
		if r.Check != CheckPolicy {
			continue
		}
		if !r.Pass {
			value = r.Value + "; " + value // a denial the binder met lately, and the rules' word now
		}
		r.Pass, r.Value = false, value
	}
	row.Fits = false
	return true
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

// shorten cuts s to at most n runes, marking the cut.
func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
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
func (e *Explanation) state(c *corev1.PersistentVolumeClaim, x *explainer, class *storagev1.StorageClass, assigned string) {
	in := x.in
	s := binder.ClaimState{Claim: c, Class: class, DefaultClass: binder.DefaultClass(in.Classes), Planned: true,
		PreBound: x.claiming[c.Namespace+"/"+c.Name]}
	s.Volume = x.volumes[c.Spec.VolumeName]
	s.VolumeConfirmed = true
	s.Assigned = x.volumes[assigned]
	_, bound := c.Annotations[policy.AnnBindCompleted]
	a := binder.DecideClaim(s)
	// state may be called again, after a second plan: it starts afresh.
	e.WaitingFor, e.Provisioner, e.Verdict.Volume = WaitingForNothing, "", ""
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
// while one exists but is not scheduled, says so with the scheduler's latest word on it. A pod
// that is on a node while the claim has no selected node was placed without the scheduler
// (spec.nodeName set when it was created): the scheduler selects a node for the claim before it
// binds the pod, so nothing ever will, and a WaitForFirstConsumer claim stays Pending. The
// volumes' node affinity is then judged against that pod's node (nodeTargets), and the state
// says so.
func (e *Explanation) consumers(c *corev1.PersistentVolumeClaim, in Input, targets []nodeTarget) {
	var unscheduled, placed *corev1.Pod
	for _, p := range sortedPods(in.Pods) {
		if p.Namespace != c.Namespace || !usesClaim(p, c.Name) {
			continue
		}
		e.Pods = append(e.Pods, p.Namespace+"/"+p.Name)
		switch {
		case p.DeletionTimestamp != nil:
		case p.Spec.NodeName == "" && unscheduled == nil:
			unscheduled = p
		case p.Spec.NodeName != "" && placed == nil:
			placed = p
		}
	}
	if e.WaitingFor == WaitingForProvisioner {
		if ev := firstEvent(in.Events, "PersistentVolumeClaim", c.Namespace, c.Name, c.UID, binder.ReasonExternalProvisioning); ev != nil {
			e.State += fmt.Sprintf(" (asked since %s)", ev.UTC().Format(time.RFC3339))
		}
	}
	if e.WaitingFor == WaitingForConsumer && placed != nil && e.SelectedNode == "" {
		e.WaitingFor, e.placedWithoutScheduler = WaitingForNothing, placed
		e.State = fmt.Sprintf("stuck: pod %s uses the claim and is on node %s, yet no node was selected for the claim, so the pod was placed without the scheduler "+
			"(spec.nodeName set when it was created); class %s binds only once the scheduler places a pod that uses the claim: "+
			"create the pod without spec.nodeName (a nodeSelector on kubernetes.io/hostname keeps it on that node)", placed.Name, placed.Spec.NodeName, e.Class)
		return
	}
	if e.SelectedNode == "" && len(targets) > 0 {
		on := make([]string, len(targets))
		for i, t := range targets {
			on[i] = fmt.Sprintf("node %s (pod %s)", t.name, t.pod)
		}
		e.State += "; volumes' node affinity is judged against " + strings.Join(on, ", ")
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
		v.Text += e.takenVolumeFails(v.Volume, e.WaitingFor == WaitingForBinder)
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
	case e.placedWithoutScheduler != nil && len(fitting) > 0:
		v.Text = fmt.Sprintf("%s fit, but nothing binds the claim while pod %s that uses it bypasses the scheduler", strings.Join(fitting, ", "), e.placedWithoutScheduler.Name)
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
		freed := !cand.passes(CheckClaimRef)
		for _, r := range cand.Failed() {
			if r.Check == CheckPhase && freed {
				continue // freeing the volume makes it Available: one change, not two
			}
			v.Changes = append(v.Changes, change(r, cand))
		}
		v.Text = fmt.Sprintf("no volume fits; %s fits if %s", v.Closest, strings.Join(v.Changes, " and "))
		return
	}
	if len(e.Candidates) > 0 {
		e.takenVerdict(e.Candidates[0])
		return
	}
	v.Text = "no volume fits, and there are no volumes to consider"
}

// availabilityChecks are the checks that say the volume is not free; for a volume the plan gives
// to another claim they say why, and freeing it is no change to suggest.
var availabilityChecks = map[Check]bool{CheckPhase: true, CheckClaimRef: true, CheckReserved: true}

// takenVerdict is the verdict when every volume near the claim goes to another claim in the
// binder's plan, cand being the closest: it says so, and that another volume like it would fit
// (with the claim's other changes, if any).
func (e *Explanation) takenVerdict(cand Candidate) {
	v := &e.Verdict
	v.Closest = cand.Volume
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
}

// takenVolumeFails says what the candidate row of the volume the claim is bound to, or that the
// binder takes, fails (the binder plans without the pods' nodes and asks policy only when it
// binds): "" when nothing.
func (e *Explanation) takenVolumeFails(name string, binding bool) string {
	for _, cand := range e.Candidates {
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
func candidate(in Input, c *corev1.PersistentVolumeClaim, v *corev1.PersistentVolume, targets []nodeTarget, claims map[types.UID]string) Candidate {
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
	add(nodeAffinity(v, targets))
	avail := binder.VolumeAvailabilityFor(c, v, in.PendingFree)
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
	add(CheckPhase, phaseOK, phase)
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

// nodeAffinity judges the volume's node affinity against each node it must reach (nodeTargets),
// as the planner judges it against the selected node: a node that does not exist is reached only
// by a volume without node affinity.
func nodeAffinity(v *corev1.PersistentVolume, targets []nodeTarget) (Check, bool, string) {
	if len(targets) == 0 {
		return CheckNodeAffinity, true, ""
	}
	aff, err := policy.ParseVolumeAffinity(v)
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
