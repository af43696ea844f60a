package policy

import (
	"github.com/pvguard/pvguard/storage"
)

func pvg007StorageClassMatch() Rule {
	return Rule{
		ID:      "PVG007",
		Name:    "storage-class-match",
		Default: ActionWarn,
		Judges:  JudgesState,
		Kinds:   []Kind{KindPersistentVolume, KindPersistentVolumeClaim},
		Reads:   []Kind{KindPersistentVolume, KindPersistentVolumeClaim},
		Summary: "at bind the volume and the claim have the same storage class",
		// Upstream binds a pre-bound volume to a claim of another class, and refuses a
		// pre-bound claim whose class differs, leaving it Pending; either way the pair is rarely
		// what the author meant, but it is not unsafe, hence a warning.
		Check: func(r *Review, v View, _ *Config) ([]Finding, error) {
			b, err := newBinding(r, v)
			if err != nil || b == nil {
				return nil, err
			}
			want, got := storage.ClaimClass(b.PVC), storage.VolumeClass(b.PV)
			if want == got {
				return nil, nil
			}
			hint := unlinkHint(r, b, Textf("use a volume of class %s", classForMessage(want)))
			if b.Field == "spec.claimRef" && !relinks(r, b) {
				hint = Textf("point spec.claimRef at a claim of class %s, or leave spec.claimRef as it was",
					classForMessage(got))
			}
			return []Finding{{
				Object: b.Subject,
				Field:  b.Field,
				Message: Textf("%s has storage class %s, but %s has class %s",
					pvcRef(b.PVC), classForMessage(want), pvRef(b.PV), classForMessage(got)),
				Hint:  hint,
				fixes: unlinkFix(r, b),
			}}, nil
		},
	}
}
