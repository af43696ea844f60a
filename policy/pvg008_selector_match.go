package policy

import (
	"k8s.io/apimachinery/pkg/labels"

	"github.com/pvguard/pvguard/storage"
)

func pvg008SelectorMatch() Rule {
	return Rule{
		ID:      "PVG008",
		Name:    "selector-match",
		Default: ActionWarn,
		Judges:  JudgesState,
		Kinds:   []Kind{KindPersistentVolume, KindPersistentVolumeClaim},
		Reads:   []Kind{KindPersistentVolume, KindPersistentVolumeClaim},
		Summary: "at bind the claim's label selector matches the volume's labels",
		// Upstream ignores the selector for pre-bound pairs, so a mismatch binds anyway; it is
		// reported because the selector usually says which volume the author meant.
		Check: func(r *Review, v View, _ *Config) ([]Finding, error) {
			b, err := newBinding(r, v)
			if err != nil || b == nil || b.PVC.Spec.Selector == nil {
				return nil, err
			}
			// A claim naming a volume linked to another claim binds nothing until the volume is
			// re-pointed, and that write is judged with the labels it gives the volume (Velero's
			// restore labels the volume in the same write that points it at the claim).
			if b.Field == "spec.volumeName" && storage.NamesAClaim(b.PV.Spec.ClaimRef) && !storage.ClaimRefNames(b.PV, b.PVC) {
				return nil, nil
			}
			if match, ok := storage.SelectorMatches(b.PVC.Spec.Selector, b.PV.Labels); ok && match {
				return nil, nil
			}
			sel, err := storage.ParseClaimSelector(b.PVC)
			if err != nil {
				// The apiserver validates selectors, so this is an offline manifest or an old
				// object; it is the claim's field that is wrong, whichever half is under review.
				return []Finding{{
					Object:  pvcRef(b.PVC),
					Field:   "spec.selector",
					Message: Textf("%s has an invalid spec.selector: %s", pvcRef(b.PVC), Word(err.Error())),
					Hint:    Plain("remove spec.selector (a claim's selector is set only when it is created: create the claim again without it)"),
					fixes:   pvg008SelectorFix(r, b),
				}}, nil
			}
			if sel.Admits(b.PV) {
				return nil, nil
			}
			hint := unlinkHint(r, b, Plain("use a volume whose labels match the selector,"))
			if b.Field == "spec.claimRef" && !relinks(r, b) {
				hint = Plain("label the volume to match the claim's selector, point spec.claimRef at another claim, or leave spec.claimRef as it was")
			}
			return []Finding{{
				Object: b.Subject,
				Field:  b.Field,
				Message: Textf("%s selects volumes with %s, but the labels of %s (%s) do not match",
					pvcRef(b.PVC), Word(sel.String()), pvRef(b.PV), Word(labelsForMessage(b.PV.Labels))),
				Hint:  hint,
				fixes: unlinkFix(r, b),
			}}, nil
		},
	}
}

func labelsForMessage(l map[string]string) string {
	if len(l) == 0 {
		return "none"
	}
	return labels.Set(l).String()
}

// pvg008SelectorFix is the way out of an invalid selector: the claim without it, as it is created,
// or created again.
func pvg008SelectorFix(r *Review, b *bindPair) []Fix {
	// A claim's spec.selector never changes once it is created (the apiserver refuses it).
	if b.Field == "spec.volumeName" && r.Operation == OperationCreate {
		return []Fix{clearing(pvcRef(b.PVC), "spec.selector")}
	}
	return []Fix{recreate(pvcRef(b.PVC), "spec.selector", "spec.volumeName")}
}
