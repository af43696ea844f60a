package policy

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/runtime"

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
			found, err := selectedNodeAdmitted(r, b, v)
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
func selectedNodeAdmitted(r *Review, b *bindPair, v View) ([]Finding, error) {
	nodeName := b.PVC.Annotations[storage.AnnSelectedNode]
	if nodeName == "" || b.PV.Spec.NodeAffinity == nil || b.PV.Spec.NodeAffinity.Required == nil {
		return nil, nil
	}
	// The selector is judged before the node is read: a volume no node can match is wrong
	// whether or not the selected node still exists.
	aff, err := storage.ParseVolumeAffinity(b.PV)
	if err != nil {
		return []Finding{invalidAffinity(r, b, nodeName, err)}, nil
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
		Hint:  unlinkHint(r, b, Textf("bind a volume reachable from node %s,", Word(nodeName))),
		fixes: unlinkFix(r, b),
	}}, nil
}

func invalidAffinity(r *Review, b *bindPair, nodeName string, err error) Finding {
	return Finding{
		Object:  pvRef(b.PV),
		Field:   "spec.nodeAffinity",
		Message: Textf("%s has an invalid node affinity, so it cannot be used on node %s selected for %s: %s", pvRef(b.PV), Word(nodeName), pvcRef(b.PVC), Word(err.Error())),
		Hint:    unlinkHint(r, b, Textf("bind a volume whose spec.nodeAffinity is valid")),
		fixes:   unlinkFix(r, b),
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
		return []Finding{{
			Object:  pvRef(r.PV),
			Field:   "spec.nodeAffinity",
			Message: Textf("the new node affinity of %s is invalid, so it cannot be used by %s: %s", pvRef(r.PV), pvcRef(pvc), Word(err.Error())),
			Hint:    Textf("keep spec.nodeAffinity of %s as it was", pvRef(r.PV)),
			fixes:   []Fix{keepAffinity(r)},
		}}, nil
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
				Hint:  Textf("keep node %s in spec.nodeAffinity of %s", Word(nodeName), pvRef(r.PV)),
				fixes: []Fix{keepAffinity(r)},
			})
		}
	}
	pods, err := podsAdmitted(r.PV, pvc, v, keep)
	for i := range pods {
		pods[i].fixes = []Fix{keepAffinity(r)}
	}
	return append(found, pods...), err
}

// keepAffinity is the write under review with the volume's node affinity as it was: the way out
// the hints of an affinity change name (keeping the nodes in use is a narrower form of it).
func keepAffinity(r *Review) Fix {
	var was any
	if a := r.OldPV.Spec.NodeAffinity; a != nil {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(a)
		if err == nil {
			was = u
		}
	}
	return undo(pvRef(r.PV), "spec.nodeAffinity", was)
}

// podsAdmitted finds the pods using the claim, on a node, whose node the volume's affinity does
// not admit; with keep, only those on a node keep says the volume reached before.
func podsAdmitted(pv *corev1.PersistentVolume, pvc *corev1.PersistentVolumeClaim, v View, keep func(string) (bool, error)) ([]Finding, error) {
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return nil, nil
	}
	pods, err := v.PodsUsingClaim(pvc.Namespace, pvc.Name)
	if err != nil {
		return nil, fmt.Errorf("listing the pods using %s: %w", pvcRef(pvc), err)
	}
	if !slices.ContainsFunc(pods, func(p *corev1.Pod) bool { return storage.PodNode(p) != "" }) {
		return nil, nil // no pod on a node: the affinity has nothing to admit
	}
	aff, err := volumeAffinity(v, pv)
	if err != nil {
		return nil, nil // selectedNodeAdmitted or affinityChanged reports the invalid affinity
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
			// Deleting the pod is no write pvguard judges; widening is.
			f.fixes = []Fix{widenAffinity(pv, nodeName)}
		}
		found = append(found, f)
	}
	return found, nil
}

// widenAffinity is the volume's node affinity with one more term, admitting the node by its
// hostname label: the widening an audit finding on a pod out of reach names.
func widenAffinity(pv *corev1.PersistentVolume, nodeName string) Fix {
	terms := []any{}
	for _, t := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
		if u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&t); err == nil {
			terms = append(terms, u)
		}
	}
	terms = append(terms, map[string]any{"matchExpressions": []any{map[string]any{
		"key": corev1.LabelHostname, "operator": string(corev1.NodeSelectorOpIn), "values": []any{nodeName},
	}}})
	return Fix{Writes: []Write{{Object: pvRef(pv), Set: map[string]any{"spec.nodeAffinity.required.nodeSelectorTerms": terms}}}}
}
