package explain

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvguard/pvguard/binder"
	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/storage"
)

// This file is the claim's state: what it waits for (binder.DecideClaim), its provisioner, its
// pods and what the events about them say. Whether the provisioner runs is lease.go's, the writes
// refused about the claim refused.go's.

// What a claim waits for (Explanation.WaitingFor).
const (
	WaitingForNothing     = "nothing"     // bound, or stuck until something changes (State says what)
	WaitingForConsumer    = "consumer"    // WaitForFirstConsumer and no pod scheduled yet
	WaitingForProvisioner = "provisioner" // an external provisioner, named in Provisioner
	WaitingForBinder      = "binder"      // the binder has a volume for it and is to write the binding
	WaitingForVolume      = "volume"      // spec.volumeName names a volume that does not exist
	WaitingForScheduler   = "scheduler"   // WaitForFirstConsumer, and a pod that uses it is not scheduled yet
)

// subject is the claim as its explanation heads it: its class (nil when it has none or the class
// does not exist) and the class's binding mode, and the node selected for it.
type subject struct {
	claim       *corev1.PersistentVolumeClaim
	class       *storagev1.StorageClass
	className   string
	bindingMode string
	// selectedNode is the selected-node annotation's value; scheduled says the claim has one.
	selectedNode string
	scheduled    bool
}

// subjectOf heads the explanation of claim c.
func subjectOf(c *corev1.PersistentVolumeClaim, classes map[string]*storagev1.StorageClass) subject {
	s := subject{claim: c, className: storage.ClaimClass(c)}
	s.class = classes[s.className]
	if s.className != "" && s.class != nil {
		s.bindingMode = string(storagev1.VolumeBindingImmediate) // the API server's default
		if s.class.VolumeBindingMode != nil {
			s.bindingMode = string(*s.class.VolumeBindingMode)
		}
	}
	s.selectedNode, s.scheduled = c.Annotations[storage.AnnSelectedNode]
	return s
}

// claimState is what the claim waits for (one of the WaitingFor constants; provisioner names the
// provisioner), its state in one sentence (text), and the volume it is bound to or the binder
// takes for it (volume, the verdict's).
type claimState struct {
	waitingFor  string
	provisioner string
	text        policy.Text
	volume      string
	// goneVolume is the volume the claim waits on whose nodes are gone (nodeGone).
	goneVolume string
}

// decide is the claim's state from binder.DecideClaim, on the state binder.ClaimStateOf builds
// as the binder's sync builds it, assigned being the volume the binder's plan gives it ("" for
// none).
func decide(x *index, s subject, assigned string) claimState {
	c := s.claim
	// planFacts never fail to read.
	cs, _ := binder.ClaimStateOf(c, planFacts{x: x, assigned: assigned})
	_, bound := c.Annotations[storage.AnnBindCompleted]
	a := binder.DecideClaim(cs)
	st := claimState{waitingFor: WaitingForNothing}
	switch {
	case c.DeletionTimestamp != nil:
		st.text = policy.Plain("being deleted")
	case bound && a.Bind != nil && c.Status.Phase == corev1.ClaimBound:
		st.text = policy.Textf("bound to volume %s", volumeName(a.Bind.Name))
		st.volume = a.Bind.Name
	case a.Bind != nil:
		st.waitingFor = WaitingForBinder
		st.text = policy.Textf("the binder is to bind it to volume %s", volumeName(a.Bind.Name))
		st.volume = a.Bind.Name
	case a.Phase == corev1.ClaimLost:
		st.text = policy.Plain(policy.Word("Lost: " + a.Event.Message))
	case a.SetClass != "":
		st.waitingFor = WaitingForBinder
		st.text = policy.Plain(policy.Wordf("the binder is to give it the default class %s", a.SetClass))
	case c.Spec.VolumeName != "" && cs.Volume == nil:
		st.waitingFor = WaitingForVolume
		st.text = policy.Textf("waiting for volume %s, which spec.volumeName names and which does not exist", volumeName(c.Spec.VolumeName))
	case a.Event == nil:
		st.text = policy.Plain("Pending")
	case a.Event.Reason == binder.ReasonWaitForFirstConsumer:
		st.waitingFor = WaitingForConsumer
		st.text = policy.Plain(policy.Wordf("waiting for its first consumer: class %s binds once a pod that uses the claim is scheduled", s.className))
	case a.Event.Reason == binder.ReasonExternalProvisioning:
		st.waitingFor, st.provisioner = WaitingForProvisioner, cs.Class.Provisioner
		st.text = policy.Plain(policy.Wordf("waiting for the external provisioner %s to create a volume", cs.Class.Provisioner))
		if s.selectedNode != "" {
			st.text = st.text.Append(policy.Plain(policy.Word(" on node " + s.selectedNode)))
		}
	default:
		st.text = policy.Plain(policy.Word(a.Event.Reason + ": " + a.Event.Message))
	}
	return st
}

// planFacts are binder.ClaimFacts as an explanation reads them: the objects it explains, which
// are all there is (a volume they do not hold does not exist), and the plan it reads, which
// considered every claim it explains and gives this one assigned. Denials are not among them:
// the candidate table judges every pair by policy, and the plan the explanation reads is made
// without the pairs it denies (explainClaim), as the binder plans after a denial.
type planFacts struct {
	x        *index
	assigned string
}

func (f planFacts) Volume(name string) (*corev1.PersistentVolume, bool, error) {
	v, _ := f.x.in.State.PersistentVolume(name)
	return v, v != nil, nil
}

func (f planFacts) Classes() ([]*storagev1.StorageClass, error) { return f.x.in.State.Classes(), nil }

func (f planFacts) VolumesClaiming(namespace, name string) ([]*corev1.PersistentVolume, error) {
	return f.x.volumesClaiming(namespace, name), nil
}

func (f planFacts) Plan(types.UID) (string, bool)    { return f.assigned, true }
func (f planFacts) Denied(types.UID) map[string]bool { return nil }
func (f planFacts) PendingFree() bool                { return f.x.in.PendingFree }
func (f planFacts) Confirmed() bool                  { return true }

// provisionerAsked is the state of a claim waiting for its provisioner with since when it has
// asked for a volume, when an event about the claim tells.
func provisionerAsked(st claimState, c *corev1.PersistentVolumeClaim, events []*corev1.Event) claimState {
	if st.waitingFor != WaitingForProvisioner {
		return st
	}
	if ev := firstEvent(events, "PersistentVolumeClaim", c.Namespace, c.Name, c.UID, binder.ReasonExternalProvisioning); ev != nil {
		st.text = st.text.Append(policy.Plain(policy.Wordf(" (asked since %s)", ev.UTC().Format(time.RFC3339))))
	}
	return st
}

// consumers are the pods that use the claim (namespace/name), and the one of them, if any, that
// is on a node while the claim has no selected node: placed without the scheduler.
type consumers struct {
	pods                   []string
	placedWithoutScheduler *corev1.Pod
}

// consumersOf lists the pods that use the claim and says what they change of its state: for a
// claim waiting for its first consumer while one exists but is not scheduled, it waits for the
// scheduler, whose latest word on the pod the state quotes. A pod that is on a node while the
// claim has no selected node was placed without the scheduler (spec.nodeName set when it was
// created): the scheduler selects a node for the claim before it binds the pod, so nothing ever
// will, and a WaitForFirstConsumer claim stays Pending. The volumes' node affinity is then judged
// against that pod's node (nodeTargets), and the state says so.
func consumersOf(st claimState, s subject, in Input, targets []nodeTarget) (claimState, consumers) {
	c := s.claim
	var out consumers
	var unscheduled, placed *corev1.Pod
	for _, p := range sortedPods(in.Pods) {
		if p.Namespace != c.Namespace || !usesClaim(p, c.Name) {
			continue
		}
		out.pods = append(out.pods, p.Namespace+"/"+p.Name)
		switch {
		case p.DeletionTimestamp != nil:
		case p.Spec.NodeName == "" && unscheduled == nil:
			unscheduled = p
		case p.Spec.NodeName != "" && placed == nil:
			placed = p
		}
	}
	if st.waitingFor == WaitingForConsumer && placed != nil && s.selectedNode == "" {
		st.waitingFor, out.placedWithoutScheduler = WaitingForNothing, placed
		st.text = policy.Plain(policy.Wordf("stuck: pod %s uses the claim and is on node %s, yet no node was selected for the claim, so the pod was placed without the scheduler "+
			"(spec.nodeName set when it was created); class %s binds only once the scheduler places a pod that uses the claim: "+
			"create the pod without spec.nodeName (a nodeSelector on kubernetes.io/hostname keeps it on that node)", placed.Name, placed.Spec.NodeName, s.className))
		return st, out
	}
	if s.selectedNode == "" && len(targets) > 0 {
		on := make([]string, len(targets))
		for i, t := range targets {
			on[i] = fmt.Sprintf("node %s (pod %s)", t.name, t.pod)
		}
		st.text = st.text.Append(policy.Plain(policy.Word("; volumes' node affinity is judged against " + strings.Join(on, ", "))))
	}
	if st.waitingFor != WaitingForConsumer || unscheduled == nil {
		return st, out
	}
	st.waitingFor = WaitingForScheduler
	st.text = policy.Plain(policy.Wordf("waiting for the scheduler: pod %s uses the claim and is not scheduled yet", unscheduled.Name))
	if ev := latestEvent(in.Events, unscheduled, "FailedScheduling"); ev != nil {
		st.text = st.text.Append(policy.Plain(policy.Word("; it said: " + strings.TrimSpace(ev.Message))))
	}
	return st, out
}

// outOfReach is the state of a bound claim with what it says of the pods using the claim that
// are on a node its volume's node affinity does not admit (the affinity changed under them, where
// the MutablePVNodeAffinity feature gate lets it): the kubelet there cannot mount the volume, so
// the pod cannot run where it is placed.
func outOfReach(st claimState, x *index, c *corev1.PersistentVolumeClaim) claimState {
	if st.volume == "" || st.waitingFor != WaitingForNothing || !storage.CompletedTo(c, st.volume) {
		return st
	}
	pv, _ := x.in.State.PersistentVolume(st.volume)
	if pv == nil || pv.Spec.NodeAffinity == nil {
		return st
	}
	aff, err := storage.ParseVolumeAffinity(pv)
	if err != nil {
		return st
	}
	for _, p := range sortedPods(x.in.Pods) {
		nodeName := storage.PodNode(p)
		if p.Namespace != c.Namespace || nodeName == "" || !usesClaim(p, c.Name) {
			continue
		}
		node, _ := x.in.State.Node(nodeName)
		if node != nil && aff.Admits(node) || node == nil && !aff.RefusesAssumedNode(nodeName) {
			continue
		}
		st.text = st.text.Append(policy.Textf("; but pod %s is on node %s, which the node affinity of volume %s does not admit: "+
			"the volume cannot be mounted there, so the pod cannot run (delete the pod so that it is scheduled where the volume is, or, where the MutablePVNodeAffinity gate is on, widen the volume's node affinity to admit node %s)",
			policy.Word(p.Name), policy.Word(nodeName), volumeName(pv.Name), policy.Word(nodeName)))
	}
	return st
}

// sortedPods are the pods by namespace and name.
func sortedPods(pods []*corev1.Pod) []*corev1.Pod {
	out := slices.Clone(pods)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Namespace+"/"+out[i].Name < out[j].Namespace+"/"+out[j].Name })
	return out
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
