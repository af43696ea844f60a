package policy

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/pvguard/pvguard/storage"
)

func pvg009NodeAffinityMatch() Rule {
	return Rule{
		ID:      "PVG009",
		Name:    "node-affinity-match",
		Default: ActionDeny,
		Judges:  JudgesState,
		Kinds:   []Kind{KindPersistentVolume, KindPersistentVolumeClaim},
		Reads:   []Kind{KindPersistentVolume, KindPersistentVolumeClaim, KindNode, KindPod},
		Summary: "a linked volume's node affinity admits the node its claim is scheduled to (volume.kubernetes.io/selected-node) and the nodes of the pods using the claim",
		Check: func(r *Review, v View, _ *Config) ([]Finding, error) {
			b, err := newBinding(r, v)
			if err != nil {
				return nil, err
			}
			if b == nil {
				return affinityChanged(r, v)
			}
			found, err := selectedNodeAdmitted(b, v)
			if err != nil || len(found) > 0 || !r.audit || r.Kind != KindPersistentVolume {
				return found, err
			}
			// The audit judges a linked pair once, on its volume: the pods of its claim must be on
			// nodes the volume reaches (a kubelet refuses to mount it elsewhere).
			return podsAdmitted(b.PV, b.PVC, v, nil)
		},
	}
}

// selectedNodeAdmitted judges a pair a write links: a claim scheduled to a node
// (volume.kubernetes.io/selected-node) binds only a volume whose node affinity admits that node.
func selectedNodeAdmitted(b *bindPair, v View) ([]Finding, error) {
	nodeName := b.PVC.Annotations[storage.AnnSelectedNode]
	if nodeName == "" || b.PV.Spec.NodeAffinity == nil || b.PV.Spec.NodeAffinity.Required == nil {
		return nil, nil
	}
	// The selector is judged before the node is read: a volume no node can match is wrong
	// whether or not the selected node still exists.
	aff, err := storage.ParseVolumeAffinity(b.PV)
	if err != nil {
		return []Finding{invalidAffinity(b.PV, b.PVC, nodeName, err)}, nil
	}
	ok, assumed, err := admitsNode(aff, nodeName, v)
	if err != nil {
		return nil, fmt.Errorf("reading Node %s selected for %s: %w", nodeName, pvcRef(b.PVC), err)
	}
	if ok {
		return nil, nil
	}
	return []Finding{{
		Object: b.Subject,
		Field:  b.Field,
		Message: Textf("%s is scheduled to node %s (%s), but the node affinity of %s does not admit that node%s",
			pvcRef(b.PVC), Word(nodeName), Word(storage.AnnSelectedNode), pvRef(b.PV), Word(assumed)),
		Hint: Textf("bind a volume reachable from node %s, or drop %s", Word(nodeName), Word(b.Field)),
	}}, nil
}

func invalidAffinity(pv *corev1.PersistentVolume, pvc *corev1.PersistentVolumeClaim, nodeName string, err error) Finding {
	return Finding{
		Object:  pvRef(pv),
		Field:   "spec.nodeAffinity",
		Message: Textf("%s has an invalid node affinity, so it cannot be used on node %s selected for %s: %s", pvRef(pv), Word(nodeName), pvcRef(pvc), Word(err.Error())),
		Hint:    Textf("fix spec.nodeAffinity.required of %s, or bind another volume", pvRef(pv)),
	}
}

// admitsNode reports whether the affinity admits the node of that name. A node that is not known
// (offline, a dump of volumes and claims has no nodes; live, one not in the cache yet, or gone)
// is judged by what every kubelet sets on its Node, its name and kubernetes.io/hostname: a volume
// pinned to another host does not admit it, one pinned by labels that cannot be known (a zone)
// does; assumed then says so, for the message.
func admitsNode(aff storage.VolumeAffinity, nodeName string, v View) (ok bool, assumed string, err error) {
	node, err := v.Node(nodeName)
	switch {
	case err != nil:
		return false, "", err
	case node != nil:
		return aff.Admits(node), "", nil
	case aff.RefusesAssumedNode(nodeName):
		return false, fmt.Sprintf(" (Node %s not found; judged by the labels every kubelet sets: %s=%s)", nodeName, corev1.LabelHostname, nodeName), nil
	}
	return true, "", nil
}

// affinityChanged judges a write that changes the node affinity of a volume linked to a live
// claim (the MutablePVNodeAffinity feature gate lets the apiserver take it): the new affinity must
// still admit the node the claim is scheduled to and the nodes of the pods using the claim. Only
// the nodes the old affinity admitted are judged, so that a write that narrows a volume already
// out of a pod's reach, or repairs part of it, is not refused for what it did not do.
func affinityChanged(r *Review, v View) ([]Finding, error) {
	if r.Kind != KindPersistentVolume || r.PV == nil || r.OldPV == nil {
		return nil, nil
	}
	old, cur := r.OldPV.Spec.ClaimRef, r.PV.Spec.ClaimRef
	if old == nil || cur == nil || !storage.SameClaimRef(old, cur) ||
		equality.Semantic.DeepEqual(r.OldPV.Spec.NodeAffinity, r.PV.Spec.NodeAffinity) {
		return nil, nil
	}
	pvc, err := liveClaim(cur, v)
	if err != nil || pvc == nil {
		return nil, err
	}
	aff, err := storage.ParseVolumeAffinity(r.PV)
	if err != nil {
		return []Finding{invalidAffinity(r.PV, pvc, pvc.Annotations[storage.AnnSelectedNode], err)}, nil
	}
	was, err := storage.ParseVolumeAffinity(r.OldPV)
	if err != nil {
		was = storage.VolumeAffinity{} // judged as admitting every node: the new affinity is judged whole
	}
	keep := func(nodeName string) (bool, error) {
		ok, _, err := admitsNode(was, nodeName, v)
		return ok, err
	}
	var found []Finding
	if nodeName := pvc.Annotations[storage.AnnSelectedNode]; nodeName != "" {
		had, err := keep(nodeName)
		if err != nil {
			return nil, fmt.Errorf("reading Node %s selected for %s: %w", nodeName, pvcRef(pvc), err)
		}
		ok, assumed, err := admitsNode(aff, nodeName, v)
		if err != nil {
			return nil, fmt.Errorf("reading Node %s selected for %s: %w", nodeName, pvcRef(pvc), err)
		}
		if had && !ok {
			found = append(found, Finding{
				Object: pvRef(r.PV),
				Field:  "spec.nodeAffinity",
				Message: Textf("the new node affinity of %s does not admit node %s, to which %s is scheduled (%s)%s",
					pvRef(r.PV), Word(nodeName), pvcRef(pvc), Word(storage.AnnSelectedNode), Word(assumed)),
				Hint: Textf("keep node %s in spec.nodeAffinity of %s", Word(nodeName), pvRef(r.PV)),
			})
		}
	}
	pods, err := podsAdmitted(r.PV, pvc, v, keep)
	return append(found, pods...), err
}

// podsAdmitted finds the pods using the claim, on a node, whose node the volume's affinity does
// not admit; with keep, only those on a node keep says the volume reached before.
func podsAdmitted(pv *corev1.PersistentVolume, pvc *corev1.PersistentVolumeClaim, v View, keep func(string) (bool, error)) ([]Finding, error) {
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return nil, nil
	}
	aff, err := storage.ParseVolumeAffinity(pv)
	if err != nil {
		return nil, nil // selectedNodeAdmitted or affinityChanged reports the invalid affinity
	}
	pods, err := v.PodsUsingClaim(pvc.Namespace, pvc.Name)
	if err != nil {
		return nil, fmt.Errorf("listing the pods using %s: %w", pvcRef(pvc), err)
	}
	var found []Finding
	for _, p := range pods {
		nodeName := storage.PodNode(p)
		if nodeName == "" {
			continue
		}
		if keep != nil {
			had, err := keep(nodeName)
			if err != nil {
				return nil, fmt.Errorf("reading Node %s of Pod %s/%s: %w", nodeName, p.Namespace, p.Name, err)
			}
			if !had {
				continue
			}
		}
		ok, assumed, err := admitsNode(aff, nodeName, v)
		if err != nil {
			return nil, fmt.Errorf("reading Node %s of Pod %s/%s: %w", nodeName, p.Namespace, p.Name, err)
		}
		if ok {
			continue
		}
		pod := ObjectRef{Kind: KindPod, Namespace: p.Namespace, Name: p.Name}
		where := Word("is scheduled to")
		if p.Status.Phase == corev1.PodRunning {
			where = "runs on"
		}
		f := Finding{Object: pvRef(pv), Field: "spec.nodeAffinity"}
		if keep != nil {
			f.Message = Textf("the new node affinity of %s does not admit node %s, where %s using %s %s it%s",
				pvRef(pv), Word(nodeName), pod, pvcRef(pvc), where, Word(assumed))
			f.Hint = Textf("keep node %s in spec.nodeAffinity of %s while %s is there", Word(nodeName), pvRef(pv), pod)
		} else {
			f.Message = Textf("%s using %s %s node %s, which the node affinity of %s does not admit%s",
				pod, pvcRef(pvc), where, Word(nodeName), pvRef(pv), Word(assumed))
			f.Hint = Textf("delete %s so that it is scheduled where the volume is, or (where the apiserver's MutablePVNodeAffinity gate is on) widen spec.nodeAffinity of %s to admit node %s", pod, pvRef(pv), Word(nodeName))
		}
		found = append(found, f)
	}
	return found, nil
}
