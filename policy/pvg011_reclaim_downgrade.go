package policy

import (
	corev1 "k8s.io/api/core/v1"
)

func pvg011ReclaimDowngrade() Rule {
	return Rule{
		ID:      "PVG011",
		Name:    "reclaim-downgrade",
		Default: ActionDeny,
		Judges:  JudgesChange,
		Kinds:   []Kind{KindPersistentVolume},
		Summary: "changing a Bound or Released volume's reclaim policy from Retain to Delete or Recycle needs a confirmation annotation",
		CEL: []CELForm{{
			Kind: KindPersistentVolume, Operations: []Operation{OperationUpdate}, Status: true,
			Refuses: "oldObject.spec.persistentVolumeReclaimPolicy == 'Retain' && object.spec.persistentVolumeReclaimPolicy in ['Delete', 'Recycle'] && " +
				celVolumeInUse() + " && !(" + celAnn("object", "variables.confirmKey") +
				" && object.metadata.annotations[variables.confirmKey] == object.spec.persistentVolumeReclaimPolicy && !(" +
				celAnn("oldObject", "variables.confirmKey") + " && oldObject.metadata.annotations[variables.confirmKey] == object.spec.persistentVolumeReclaimPolicy))",
			Message: "'[PVG011 reclaim-downgrade] PersistentVolume ' + object.metadata.name + ' is in use, and changing its reclaim policy from Retain to ' + " +
				"object.spec.persistentVolumeReclaimPolicy + ' lets its storage go once the claim is deleted; if that is intended, set the annotation ' + " +
				"variables.confirmKey + '=' + object.spec.persistentVolumeReclaimPolicy + ' on the volume in the same write (an annotation already on the volume does not confirm it)'",
		}},
		Check: func(r *Review, _ View, c *Config) ([]Finding, error) {
			if r.Operation != OperationUpdate || r.PV == nil || r.OldPV == nil {
				return nil, nil
			}
			from, to := r.OldPV.Spec.PersistentVolumeReclaimPolicy, r.PV.Spec.PersistentVolumeReclaimPolicy
			if from != corev1.PersistentVolumeReclaimRetain {
				return nil, nil
			}
			var effect string
			switch to {
			case corev1.PersistentVolumeReclaimDelete:
				effect = "deletes the backing storage"
			case corev1.PersistentVolumeReclaimRecycle:
				effect = "wipes the data"
			default:
				return nil, nil
			}
			// The old object decides: a write that also releases or unbinds the volume must not
			// slip the downgrade past the rule.
			use, inUse := volumeInUse(r.OldPV)
			if !inUse {
				return nil, nil
			}
			// Only a confirmation this write makes counts: one left on the volume by an earlier
			// write would otherwise confirm every later downgrade, by anyone.
			confirm := c.reclaimConfirmAnnotation()
			if r.PV.Annotations[confirm] == string(to) && r.OldPV.Annotations[confirm] != string(to) {
				return nil, nil
			}
			vol := pvRef(r.PV)
			hint := Textf("if that is intended, set the annotation %s=%s on the volume in the same write", Word(confirm), Word(to))
			fixes := []Fix{{Writes: []Write{{Object: vol, Set: map[string]any{annPath(confirm): string(to)}}}}}
			if r.OldPV.Annotations[confirm] == string(to) {
				hint = Textf("the annotation %s=%s was already on the volume before this write, so it does not confirm it; if the change is intended, remove the annotation, then set it again in the write that changes the policy", Word(confirm), Word(to))
				fixes = []Fix{{Writes: []Write{
					{Object: vol, Set: map[string]any{"spec.persistentVolumeReclaimPolicy": string(from)}, Clear: []string{annPath(confirm)}},
					{Object: vol, Set: map[string]any{annPath(confirm): string(to)}},
				}}}
			}
			return []Finding{{
				Object: pvRef(r.PV),
				Field:  "spec.persistentVolumeReclaimPolicy",
				Message: Textf("%s is %s, and changing its reclaim policy from Retain to %s %s once the claim is deleted",
					pvRef(r.PV), use, Word(to), Word(effect)),
				Hint:  hint,
				fixes: fixes,
			}}, nil
		},
		StatusReads: map[Kind][]string{KindPersistentVolume: {"phase"}},
	}
}
