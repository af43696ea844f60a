package explain

import (
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/pvguard/pvguard/policy"
)

// This file is the state of a claim that waits on a volume whose nodes are gone: the volume it is
// bound to, that the binder's plan gives it, or that its spec.volumeName names, can be used only
// on nodes that no longer exist (policy.NodesGone, PVG025's predicate), so no pod that uses the
// claim can be scheduled, whatever the binder writes. Only an input that holds every node
// (Input.NodesListed) tells a node that is gone from one it does not hold.

// WaitingForNode: the claim's volume can be used only on nodes that no longer exist; State says
// which, and what frees the claim.
const WaitingForNode = "node"

// nodeGone is st for a claim whose volume can be used only on nodes that are gone, as it stands
// otherwise.
func nodeGone(st claimState, x *index, c *corev1.PersistentVolumeClaim) claimState {
	if !x.in.NodesListed || c.DeletionTimestamp != nil {
		return st
	}
	name, named := st.volume, false
	if name == "" && c.Spec.VolumeName != "" {
		name, named = c.Spec.VolumeName, true
	}
	v, _ := x.in.State.PersistentVolume(name)
	if v == nil {
		return st
	}
	hosts := policy.NodesGone(v, x.in.State.Nodes())
	if hosts == nil {
		return st
	}
	on := policy.Wordf("node %s, which no longer exists", hosts[0])
	if len(hosts) > 1 {
		on = policy.Wordf("nodes %s, which no longer exist", strings.Join(hosts, ", "))
	}
	bound := c.Status.Phase == corev1.ClaimBound && st.waitingFor == WaitingForNothing && st.volume != ""
	var which, frees policy.Text
	switch {
	case bound:
		which = policy.Textf("bound to volume %s", volumeName(name))
		frees = policy.Plain("delete the claim (a StatefulSet re-creates it, and it gets a new volume), then the volume once it is Released: its data went with the node")
	case named || c.Spec.VolumeName != "":
		which = policy.Textf("it names volume %s (spec.volumeName)", volumeName(name))
		frees = policy.Plain("delete the volume (its storage went with the node) and the claim, and create the claim again without spec.volumeName (a StatefulSet re-creates it)")
	default:
		which = policy.Textf("the volume the binder's plan gives it, %s", volumeName(name))
		frees = policy.Plain("delete the volume (its storage went with the node), and the binder gives the claim another")
	}
	st.waitingFor = WaitingForNode
	st.text = policy.Textf("stuck: %s, which can be used only on %s: no pod that uses the claim can be scheduled; to free it, %s", which, on, frees)
	if !bound {
		st.volume = "" // no binding the claim waits for
	}
	st.goneVolume = name
	return st
}
