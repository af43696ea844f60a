package policy

import (
	"fmt"
)

// binderAnnotations are the annotations through which the PV controller, the scheduler and
// external provisioners coordinate; a hand-edited one makes them act on a binding or a
// scheduling decision that never happened.
var binderAnnotations = []string{AnnBindCompleted, AnnBoundByController, AnnProvisionedBy, AnnSelectedNode}

var changePreposition = map[string]string{"added": "to", "changed": "on", "removed": "from"}

func pvg013BinderAnnotations() Rule {
	return Rule{
		ID:      "PVG013",
		Name:    "binder-annotations",
		Default: ActionWarn,
		Judges:  JudgesChange,
		Kinds:   []Kind{KindPersistentVolume, KindPersistentVolumeClaim},
		Summary: "bind-completed, bound-by-controller, provisioned-by and selected-node are set, changed or removed only by controller identities",
		Check: func(r *Review, _ View, c *Config) ([]Finding, error) {
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
				if ch.Key == AnnProvisionedBy && provisionedCreate(r) || ch.Key == AnnSelectedNode && rescheduling(r, ch) {
					continue
				}
				out = append(out, Finding{
					Field: fmt.Sprintf("metadata.annotations[%s]", ch.Key),
					Message: fmt.Sprintf("%s %s annotation %s %s %s, but only the binding controllers (PV controller, scheduler, provisioners) manage it",
						requester(r.User), ch.Verb, ch.Key, changePreposition[ch.Verb], r.Object()),
					Hint: fmt.Sprintf("leave %s to the controllers; if %s is a controller, list it under controllers in the pvguard config",
						ch.Key, requester(r.User)),
				})
			}
			return out, nil
		},
	}
}

// rescheduling reports whether the change removes selected-node from a claim that is not bound:
// an external provisioner that cannot provision on the selected node does so to send the pod
// back to the scheduler, whatever account it runs as, and a claim without a volume loses nothing.
func rescheduling(r *Review, ch annotationChange) bool {
	return ch.Verb == "removed" && r.Kind == KindPersistentVolumeClaim && r.PVC != nil && r.PVC.Spec.VolumeName == ""
}
