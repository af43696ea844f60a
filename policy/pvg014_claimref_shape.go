package policy

import ()

func pvg014ClaimRefShape() Rule {
	return Rule{
		ID:      "PVG014",
		Name:    "claimref-shape",
		Default: ActionDeny,
		Judges:  JudgesState,
		Kinds:   []Kind{KindPersistentVolume},
		Summary: "spec.claimRef has a name and a namespace, and names a v1 PersistentVolumeClaim",
		Check: func(r *Review, _ View, _ *Config) ([]Finding, error) {
			if r.PV == nil || r.PV.Spec.ClaimRef == nil {
				return nil, nil
			}
			ref := r.PV.Spec.ClaimRef
			// Only the write that sets or edits the claimRef is judged, so a volume stored before
			// pvguard was installed does not block unrelated writes.
			if r.OldPV != nil && r.OldPV.Spec.ClaimRef != nil && *r.OldPV.Spec.ClaimRef == *ref {
				return nil, nil
			}
			pv := pvRef(r.PV)
			// Without a name or a namespace the claimRef is no link: the way out is the one the
			// volume had before (a link a live claim holds stays, PVG002), or none.
			var unnamed []Fix
			var way string
			if ref.Name == "" || ref.Namespace == "" { // made only for a finding: every volume passes here
				unnamed, way = []Fix{clearing(r.Object(), "spec.claimRef")}, "remove spec.claimRef"
				if r.OldPV != nil && r.OldPV.Spec.ClaimRef != nil {
					unnamed, way = []Fix{undoClaimRef(r)}, "leave spec.claimRef as it was"
				}
			}
			var out []Finding
			if ref.Name == "" {
				out = append(out, Finding{
					Field:   "spec.claimRef.name",
					Message: Textf("%s has a spec.claimRef without a name, so no claim can ever bind it", pv),
					Hint:    Plain(Word("set spec.claimRef.name to the name of the claim, or " + way)),
					fixes:   unnamed,
				})
			}
			if ref.Namespace == "" {
				out = append(out, Finding{
					Field:   "spec.claimRef.namespace",
					Message: Textf("%s has a spec.claimRef without a namespace, so no claim can ever bind it (claims are namespaced)", pv),
					Hint:    Plain(Word("set spec.claimRef.namespace to the namespace of the claim, or " + way)),
					fixes:   unnamed,
				})
			}
			// Empty kind and apiVersion are fine: the mutating webhook fills them in.
			if ref.Kind != "" && ref.Kind != string(KindPersistentVolumeClaim) {
				out = append(out, Finding{
					Field:   "spec.claimRef.kind",
					Message: Textf("%s has spec.claimRef.kind %q, but only a PersistentVolumeClaim can claim a volume", pv, Word(ref.Kind)),
					Hint:    Plain("set spec.claimRef.kind to PersistentVolumeClaim, or leave it empty"),
					fixes:   []Fix{clearing(r.Object(), "spec.claimRef.kind")},
				})
			}
			if ref.APIVersion != "" && ref.APIVersion != "v1" {
				out = append(out, Finding{
					Field:   "spec.claimRef.apiVersion",
					Message: Textf("%s has spec.claimRef.apiVersion %q, but PersistentVolumeClaims are v1", pv, Word(ref.APIVersion)),
					Hint:    Plain("set spec.claimRef.apiVersion to v1, or leave it empty"),
					fixes:   []Fix{clearing(r.Object(), "spec.claimRef.apiVersion")},
				})
			}
			return out, nil
		},
	}
}
