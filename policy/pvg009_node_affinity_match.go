package policy

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/pvguard/pvguard/storage"
)

func pvg009NodeAffinityMatch() Rule {
	return Rule{
		ID:      "PVG009",
		Name:    "node-affinity-match",
		Default: ActionDeny,
		Judges:  JudgesState,
		Kinds:   []Kind{KindPersistentVolume, KindPersistentVolumeClaim},
		Reads:   []Kind{KindPersistentVolume, KindPersistentVolumeClaim, KindNode},
		Summary: "a claim scheduled to a node (volume.kubernetes.io/selected-node) binds only a volume whose node affinity admits that node",
		Check: func(r *Review, v View, _ *Config) ([]Finding, error) {
			b, err := newBinding(r, v)
			if err != nil || b == nil {
				return nil, err
			}
			nodeName := b.PVC.Annotations[storage.AnnSelectedNode]
			if nodeName == "" || b.PV.Spec.NodeAffinity == nil || b.PV.Spec.NodeAffinity.Required == nil {
				return nil, nil
			}
			// The selector is judged before the node is read: a volume no node can match is wrong
			// whether or not the selected node still exists.
			aff, err := storage.ParseVolumeAffinity(b.PV)
			if err != nil {
				return []Finding{{
					Object:  pvRef(b.PV),
					Field:   "spec.nodeAffinity",
					Message: Textf("%s has an invalid node affinity, so it cannot be used on node %s selected for %s: %s", pvRef(b.PV), Word(nodeName), pvcRef(b.PVC), Word(err.Error())),
					Hint:    unlinkHint(r, b, Textf("bind a volume whose spec.nodeAffinity is valid")),
					fixes:   unlinkFix(r, b),
				}}, nil
			}
			node, err := v.Node(nodeName)
			if err != nil {
				return nil, fmt.Errorf("reading Node %s selected for %s: %w", nodeName, pvcRef(b.PVC), err)
			}
			var assumed string
			switch {
			case node != nil:
				if aff.Admits(node) {
					return nil, nil
				}
			// A node that is not known (offline, a dump of volumes and claims has no nodes; live,
			// one not in the cache yet, or gone) is judged by what every kubelet sets on its Node,
			// its name and kubernetes.io/hostname: a volume pinned to another host is refused, one
			// pinned by labels that cannot be known (a zone) is not judged.
			case aff.RefusesAssumedNode(nodeName):
				assumed = fmt.Sprintf(" (Node %s not found; judged by the labels every kubelet sets: %s=%s)", nodeName, corev1.LabelHostname, nodeName)
			default:
				return nil, nil
			}
			return []Finding{{
				Object: b.Subject,
				Field:  b.Field,
				Message: Textf("%s is scheduled to node %s (%s), but the node affinity of %s does not admit that node%s",
					pvcRef(b.PVC), Word(nodeName), Word(storage.AnnSelectedNode), pvRef(b.PV), Word(assumed)),
				Hint:  unlinkHint(r, b, Textf("bind a volume reachable from node %s,", Word(nodeName))),
				fixes: unlinkFix(r, b),
			}}, nil
		},
	}
}
