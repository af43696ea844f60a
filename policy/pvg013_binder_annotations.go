package policy

import (
	"fmt"

	"github.com/pvguard/pvguard/storage"
)

// binderAnnotations are the annotations through which the PV controller, the scheduler and
// external provisioners coordinate; a hand-edited one makes them act on a binding or a
// scheduling decision that never happened.
var binderAnnotations = []string{storage.AnnBindCompleted, storage.AnnBoundByController, storage.AnnProvisionedBy, storage.AnnSelectedNode}

var changePreposition = map[string]string{"added": "to", "changed": "on", "removed": "from"}

func pvg013BinderAnnotations() Rule {
	return Rule{
		ID:      "PVG013",
		Name:    "binder-annotations",
		Default: ActionWarn,
		Judges:  JudgesChange,
		Kinds:   []Kind{KindPersistentVolume, KindPersistentVolumeClaim},
		Reads:   []Kind{KindPersistentVolumeClaim},
		Summary: "bind-completed, bound-by-controller, provisioned-by and selected-node are set, changed or removed only by controller identities",
		Check: func(r *Review, v View, c *Config) ([]Finding, error) {
			if c.IsController(r.User) {
				return nil, nil
			}
			old, cur := reviewMeta(r)
			var out []Finding
			for _, ch := range annotationChanges(old, cur, binderAnnotations) {
				// Which account a provisioner runs as is the installer's choice, so on a default
				// install the state says it is a provisioner's write: a new volume carrying
				// provisioned-by (an external provisioner's save, a static provisioner's discovered
				// disk). Adding it to an existing volume stays a finding: upstream would treat a
				// volume it did not make as its own, and delete a Delete one it releases.
				if ch.Key == storage.AnnProvisionedBy && provisionedCreate(r) || ch.Key == storage.AnnSelectedNode && rescheduling(r, ch) ||
					ch.Key == storage.AnnBoundByController && relinkedByHand(r, ch) {
					continue
				}
				if ch.Key == storage.AnnSelectedNode {
					copied, err := nodeOfTarget(r, v)
					if err != nil {
						return nil, err
					}
					if copied {
						continue
					}
				}
				out = append(out, Finding{
					Field: fmt.Sprintf("metadata.annotations[%s]", ch.Key),
					Message: Textf("%s %s annotation %s %s %s, but only the binding controllers (PV controller, scheduler, provisioners) manage it",
						Word(requester(r.User)), Word(ch.Verb), Word(ch.Key), Word(changePreposition[ch.Verb]), r.Object()),
					Hint: Textf("leave %s to the controllers; if %s is a controller, list it under controllers in the pvguard config",
						Word(ch.Key), Word(requester(r.User))),
				})
			}
			return out, nil
		},
	}
}

// nodeOfTarget reports whether a claim's selected-node is the one the scheduler chose for the
// claim it was made for: a populator's claim (policy/handoff.go), named after the uid of a live
// claim that waits for its data on the same node, is filled where that claim's pod will run.
// The node is still the scheduler's decision, only copied.
func nodeOfTarget(r *Review, v View) (bool, error) {
	if r.Kind != KindPersistentVolumeClaim || r.PVC == nil || r.PVC.Spec.VolumeName != "" {
		return false, nil
	}
	node, ok := r.PVC.Annotations[storage.AnnSelectedNode]
	uid := storage.MadeFor(r.PVC.Name)
	if !ok || uid == "" || uid == r.PVC.UID {
		return false, nil
	}
	target, err := v.ClaimWaitingForData(uid)
	if err != nil {
		return false, fmt.Errorf("reading the claim %s was made for (uid %s): %w", pvcRef(r.PVC), uid, err)
	}
	return target != nil && target.Annotations[storage.AnnSelectedNode] == node, nil
}

// relinkedByHand reports whether the change removes bound-by-controller from a volume in the
// same write that points its claimRef at another claim or clears it: the annotation says the
// controller made the link, which is no longer true, and left in place it would have upstream
// treat the new link as its own (clear it, rather than drop only the uid, when it unbinds).
// Velero's restore re-binds a volume so; whether the new link is allowed is PVG002's judgement.
func relinkedByHand(r *Review, ch annotationChange) bool {
	if ch.Verb != "removed" || r.Kind != KindPersistentVolume || r.PV == nil || r.OldPV == nil || r.OldPV.Spec.ClaimRef == nil {
		return false
	}
	old, cur := r.OldPV.Spec.ClaimRef, r.PV.Spec.ClaimRef
	return cur == nil || cur.Namespace != old.Namespace || cur.Name != old.Name
}

// rescheduling reports whether the change removes selected-node from a claim that is not bound:
// an external provisioner that cannot provision on the selected node does so to send the pod
// back to the scheduler, whatever account it runs as, and a claim without a volume loses nothing.
func rescheduling(r *Review, ch annotationChange) bool {
	return ch.Verb == "removed" && r.Kind == KindPersistentVolumeClaim && r.PVC != nil && r.PVC.Spec.VolumeName == ""
}
