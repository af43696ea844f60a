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
		Kinds:   []Kind{KindPersistentVolume, KindPersistentVolumeClaim},
		Summary: "bind-completed, bound-by-controller, provisioned-by and selected-node are set, changed or removed only by controller identities",
		Check: func(r *Review, _ View, c *Config) ([]Finding, error) {
			if c.IsController(r.User) {
				return nil, nil
			}
			old, cur := reviewMeta(r)
			var out []Finding
			for _, ch := range annotationChanges(old, cur, binderAnnotations) {
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
