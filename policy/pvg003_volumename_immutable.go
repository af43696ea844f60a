package policy

import (
	"github.com/pvguard/pvguard/storage"
)

func pvg003VolumeNameImmutable() Rule {
	return Rule{
		ID:      "PVG003",
		Name:    "volumename-immutable",
		Default: ActionDeny,
		Judges:  JudgesChange,
		Kinds:   []Kind{KindPersistentVolumeClaim},
		Summary: "once a claim's binding is complete, spec.volumeName never changes or clears and the bind-completed annotation stays while it is set",
		CEL: []CELForm{{
			Kind: KindPersistentVolumeClaim, Operations: []Operation{OperationUpdate}, Status: true,
			Refuses: celAnn("oldObject", celQuote(storage.AnnBindCompleted)) + " && " + celVolumeName("oldObject") + " != '' && (" +
				celVolumeName("object") + " != oldObject.spec.volumeName || (" + celVolumeName("object") + " != '' && !" + celAnn("object", celQuote(storage.AnnBindCompleted)) + "))",
			Message: "'[PVG003 volumename-immutable] PersistentVolumeClaim ' + object.metadata.namespace + '/' + object.metadata.name + " +
				"' is bound to PersistentVolume ' + oldObject.spec.volumeName + ' and the write changes spec.volumeName or removes the " + storage.AnnBindCompleted +
				" annotation; a completed binding never moves: keep both, or delete the claim and create a new one'",
		}},
		Check: func(r *Review, _ View, _ *Config) ([]Finding, error) {
			if r.Operation != OperationUpdate || r.PVC == nil || r.OldPVC == nil {
				return nil, nil
			}
			old, cur := r.OldPVC, r.PVC
			// Upstream tests the annotation's presence, not its value, so this does too.
			if _, done := old.Annotations[storage.AnnBindCompleted]; !done || old.Spec.VolumeName == "" {
				return nil, nil
			}
			claim := pvcRef(cur)
			// Keeping the binding is keeping both: the volume's name and the annotation.
			keep := Fix{Writes: []Write{{Object: claim, Set: map[string]any{"spec.volumeName": old.Spec.VolumeName,
				annPath(storage.AnnBindCompleted): old.Annotations[storage.AnnBindCompleted]}}}}
			var out []Finding
			if cur.Spec.VolumeName != old.Spec.VolumeName {
				what := Textf("changes spec.volumeName from %s to %s", NameOf(volumeRef(old.Spec.VolumeName)), NameOf(volumeRef(cur.Spec.VolumeName)))
				if cur.Spec.VolumeName == "" {
					what = Textf("clears spec.volumeName (was %s)", NameOf(volumeRef(old.Spec.VolumeName)))
				}
				out = append(out, Finding{
					Object: claim,
					Field:  "spec.volumeName",
					Message: Textf("%s is bound to %s and the write %s; a completed binding never moves",
						claim, volumeRef(old.Spec.VolumeName), what),
					Hint:  Textf("keep spec.volumeName %s, or delete the claim and create a new one", NameOf(volumeRef(old.Spec.VolumeName))),
					fixes: []Fix{keep, recreate(claim, "spec.volumeName")},
				})
			}
			// Without the annotation the upstream controller treats the claim as pre-bound by a
			// user and re-runs the binding checks on it.
			if _, done := cur.Annotations[storage.AnnBindCompleted]; !done && cur.Spec.VolumeName != "" {
				out = append(out, Finding{
					Object: claim,
					Field:  "metadata.annotations[" + storage.AnnBindCompleted + "]",
					Message: Textf("%s is bound to %s and the write removes the %s annotation",
						claim, volumeRef(cur.Spec.VolumeName), Word(storage.AnnBindCompleted)),
					Hint:  Textf("keep the annotation %s: yes", Word(storage.AnnBindCompleted)),
					fixes: []Fix{keep},
				})
			}
			return out, nil
		},
	}
}
