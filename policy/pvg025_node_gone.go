package policy

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/pvguard/pvguard/storage"
)

// PVG025: a volume whose node affinity admits only nodes that no longer exist (a local volume
// whose node was deleted). No write of the volume brings that about, deleting its node does, so
// only the audit runs the rule. The nodes it reads are the view's: an informer that has not synced,
// or may not list nodes, lists none, and then the rule judges nothing; a finding is confirmed on a
// live list of the nodes before it is reported (ConfirmLive).
func pvg025NodeGone() Rule {
	return Rule{
		ID:          "PVG025",
		Name:        "node-gone",
		Default:     ActionAudit,
		Judges:      JudgesStoredState,
		Kinds:       []Kind{KindPersistentVolume},
		Reads:       []Kind{KindNode, KindPod},
		ConfirmLive: []string{"spec.nodeAffinity"},
		Summary:     "a volume's node affinity admits only nodes that no longer exist (a local volume whose node was deleted)",
		Check:       auditNodeGone,
		StatusReads: map[Kind][]string{KindPersistentVolume: {"phase"}},
	}
}

// NodesGone lists the hosts a volume can be used on when all of them are gone: its node affinity
// names the hosts it admits (storage.VolumeAffinity.Hosts), and none of nodes is one of them, by
// name or by kubernetes.io/hostname, nor is admitted by the affinity at all. nodes must be every
// node of the cluster; none (nothing known of the nodes) makes nothing gone. nil when the volume
// can be used on a node that exists, or when which nodes it admits is not a list of hosts.
// `pvguard explain` says by it that a claim waits on a volume whose node is gone.
func NodesGone(pv *corev1.PersistentVolume, nodes []*corev1.Node) []string {
	if len(nodes) == 0 || pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return nil
	}
	aff, err := storage.ParseVolumeAffinity(pv)
	if err != nil {
		return nil // PVG009 reports an invalid affinity
	}
	hosts, ok := aff.Hosts()
	if !ok || len(hosts) == 0 {
		return nil
	}
	for _, n := range nodes {
		// A node of one of those names that no longer matches (its labels changed) is not gone:
		// the volume's storage may well still be on it.
		if aff.Admits(n) || slices.Contains(hosts, n.Name) || slices.Contains(hosts, n.Labels[corev1.LabelHostname]) {
			return nil
		}
	}
	return hosts
}

func auditNodeGone(r *Review, v View, _ *Config) ([]Finding, error) {
	pv := r.PV
	if pv.DeletionTimestamp != nil || pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return nil, nil
	}
	aff, err := volumeAffinity(v, pv)
	if err != nil {
		return nil, nil // PVG009 reports an invalid affinity
	}
	hosts, ok := aff.Hosts()
	if !ok || len(hosts) == 0 {
		return nil, nil
	}
	// A host that is a node by name settles it with one read (the usual case: a node's name is
	// its hostname); only a volume none of whose hosts is, lists the nodes.
	for _, h := range hosts {
		n, err := v.Node(h)
		if err != nil {
			return nil, fmt.Errorf("reading Node %s that %s may be used on: %w", h, pvRef(pv), err)
		}
		if n != nil {
			return nil, nil
		}
	}
	nodes, err := v.ListNodes()
	if err != nil {
		return nil, fmt.Errorf("listing the nodes %s may be used on: %w", pvRef(pv), err)
	}
	hosts = NodesGone(pv, nodes)
	if hosts == nil {
		return nil, nil
	}
	on := Wordf("node %s, which no longer exists", hosts[0])
	if len(hosts) > 1 {
		on = Wordf("nodes %s, which no longer exist", strings.Join(hosts, ", "))
	}
	msg := Textf("%s can be used only on %s", pvRef(pv), on)
	var hint Text
	var fixes []Fix
	ref := pv.Spec.ClaimRef
	deleteVolume := Write{Object: pvRef(pv), Delete: true}
	switch {
	case ref != nil && ref.UID != "" && pv.Status.Phase != corev1.VolumeReleased && pv.Status.Phase != corev1.VolumeFailed:
		claim := claimRefOf(ref)
		msg = Textf("%s, so no pod that uses %s, which it is bound to, can be scheduled", msg, claim)
		// The pods that wait on the claim are what the reader is after (a StatefulSet's pod
		// re-created elsewhere): named, each as its reader may see it.
		pods, err := v.PodsUsingClaim(ref.Namespace, ref.Name)
		if err != nil {
			return nil, fmt.Errorf("listing the pods using %s: %w", claim, err)
		}
		if len(pods) > 0 {
			refs := make([]Arg, 0, len(pods))
			for _, p := range pods {
				refs = append(refs, ObjectRef{Kind: KindPod, Namespace: p.Namespace, Name: p.Name})
			}
			msg = Textf("%s; waiting on it: %s", msg, Join(refs, ", "))
		}
		hint = Textf("its data went with the node: delete %s (a StatefulSet then re-creates it, and it gets a new volume), then delete the volume once it is Released", claim)
		fixes = []Fix{{Writes: []Write{{Object: claim, Delete: true}, deleteVolume}}}
	case ref != nil && ref.UID == "" && storage.NamesAClaim(ref):
		claim := claimRefOf(ref)
		msg = Textf("%s, and it is reserved for %s", msg, claim)
		hint = Textf("delete the volume (its storage went with the node), and %s too if it names the volume (spec.volumeName)", claim)
		fixes = []Fix{{Writes: []Write{deleteVolume}}}
	default:
		hint = Plain("delete the volume: its storage went with the node")
		fixes = []Fix{{Writes: []Write{deleteVolume}}}
	}
	return []Finding{{Object: pvRef(pv), Field: "spec.nodeAffinity", Message: msg, Hint: hint, fixes: fixes}}, nil
}
