package policy

import (
	"github.com/pvguard/pvguard/storage"
)

func pvg001VolumeModeMatch() Rule {
	return Rule{
		ID:      "PVG001",
		Name:    "volume-mode-match",
		Default: ActionDeny,
		Judges:  JudgesState,
		Kinds:   []Kind{KindPersistentVolume, KindPersistentVolumeClaim},
		Reads:   []Kind{KindPersistentVolume, KindPersistentVolumeClaim},
		Summary: "at bind, the volume and the claim have the same volumeMode (unset means Filesystem)",
		Check: func(r *Review, v View, _ *Config) ([]Finding, error) {
			b, err := newBinding(r, v)
			if err != nil || b == nil {
				return nil, err
			}
			if storage.ModesMatch(b.PV, b.PVC) {
				return nil, nil
			}
			claimMode, volMode := storage.VolumeMode(b.PVC.Spec.VolumeMode), storage.VolumeMode(b.PV.Spec.VolumeMode)
			return []Finding{{
				Object: b.Subject,
				Field:  b.Field,
				Message: Textf("%s requests volumeMode %s, but %s is %s",
					pvcRef(b.PVC), Word(claimMode), pvRef(b.PV), Word(volMode)),
				Hint:  unlinkHint(r, b, Textf("use a %s volume", Word(claimMode))),
				fixes: unlinkFix(r, b),
			}}, nil
		},
	}
}
