package policy

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/pvguard/pvguard/storage"
)

// PVG021: a claim that is Lost, or bound to a volume that is gone. A missing volume is confirmed
// by a live read before it is reported; a Lost phase is the claim's own word.
func pvg021ClaimLost() Rule {
	return Rule{
		ID:          "PVG021",
		Name:        "claim-lost",
		Default:     ActionAudit,
		Judges:      JudgesStoredState,
		Kinds:       []Kind{KindPersistentVolumeClaim},
		Reads:       []Kind{KindPersistentVolume},
		ConfirmLive: []string{"spec.volumeName"},
		Summary:     "a claim is Lost, or bound to a volume that does not exist",
		Check:       auditClaimLost,
		StatusReads: map[Kind][]string{KindPersistentVolumeClaim: {"phase"}},
	}
}

func auditClaimLost(r *Review, v View, _ *Config) ([]Finding, error) {
	pvc := r.PVC
	_, completed := pvc.Annotations[storage.AnnBindCompleted]
	switch {
	case pvc.Status.Phase == corev1.ClaimLost:
		return []Finding{{Object: pvcRef(pvc), Field: "status.phase",
			Message: Textf("%s is Lost: the volume it was bound to is gone or bound elsewhere", pvcRef(pvc)),
			Hint:    Plain("restore the volume with spec.claimRef pointing at this claim, or delete the claim"),
			fixes:   []Fix{{Writes: []Write{{Object: pvcRef(pvc), Delete: true}}}}}}, nil
	case completed && pvc.Spec.VolumeName != "":
		pv, err := v.PersistentVolume(pvc.Spec.VolumeName)
		if err != nil || pv != nil {
			return nil, err
		}
		return []Finding{{Object: pvcRef(pvc), Field: "spec.volumeName",
			Message: Textf("%s is bound to %s, which does not exist", pvcRef(pvc), volumeRef(pvc.Spec.VolumeName)),
			Hint:    Plain("restore the volume with spec.claimRef pointing at this claim, or delete the claim"),
			fixes:   []Fix{{Writes: []Write{{Object: pvcRef(pvc), Delete: true}}}}}}, nil
	}
	return nil, nil
}
