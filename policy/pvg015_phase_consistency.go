package policy

import (
	corev1 "k8s.io/api/core/v1"
)

func pvg015PhaseConsistency() Rule {
	return Rule{
		ID:      "PVG015",
		Name:    "phase-consistency",
		Default: ActionAudit,
		Judges:  JudgesState,
		Kinds:   []Kind{KindPersistentVolume, KindPersistentVolumeClaim},
		Summary: "a Bound volume has a claimRef uid, an Available volume has none, a Bound claim names a volume",
		Check: func(r *Review, _ View, _ *Config) ([]Finding, error) {
			switch r.Kind {
			case KindPersistentVolume:
				return volumePhaseFindings(r), nil
			case KindPersistentVolumeClaim:
				return claimPhaseFindings(r), nil
			}
			return nil, nil
		},
		StatusReads: map[Kind][]string{KindPersistentVolume: {"phase"}, KindPersistentVolumeClaim: {"phase"}},
	}
}

// Phases are judged only on the write that moves them, so a binder that writes spec before
// status is never caught between its two writes.

func volumePhaseFindings(r *Review) []Finding {
	pv := r.PV
	if pv == nil || pv.Status.Phase == "" || (r.OldPV != nil && r.OldPV.Status.Phase == pv.Status.Phase) {
		return nil
	}
	ref := pv.Spec.ClaimRef
	hasUID := ref != nil && ref.UID != ""
	switch {
	case pv.Status.Phase == corev1.VolumeBound && !hasUID:
		return []Finding{{
			Object:  pvRef(pv),
			Field:   "status.phase",
			Message: Textf("%s is set to Bound, but spec.claimRef carries no claim uid, so it is bound to no claim", pvRef(pv)),
			Hint:    Plain("let the PV controller bind the volume (it sets spec.claimRef with the claim's uid first), or keep the volume Available"),
			fixes:   []Fix{undoPhase(r, string(corev1.VolumeAvailable))},
		}}
	case pv.Status.Phase == corev1.VolumeAvailable && hasUID:
		claim := ObjectRef{Kind: KindPersistentVolumeClaim, Namespace: ref.Namespace, Name: ref.Name}
		return []Finding{{
			Object:  pvRef(pv),
			Field:   "status.phase",
			Message: Textf("%s is set to Available, but spec.claimRef still carries the uid of %s", pvRef(pv), claim),
			Hint:    Plain("a volume linked to a claim is Bound or Released, not Available; leave its phase to the PV controller"),
			fixes:   []Fix{undoPhase(r, "")},
		}}
	}
	return nil
}

func claimPhaseFindings(r *Review) []Finding {
	pvc := r.PVC
	if pvc == nil || pvc.Status.Phase == "" || (r.OldPVC != nil && r.OldPVC.Status.Phase == pvc.Status.Phase) {
		return nil
	}
	if pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.VolumeName != "" {
		return nil
	}
	return []Finding{{
		Object:  pvcRef(pvc),
		Field:   "status.phase",
		Message: Textf("%s is set to Bound, but names no volume in spec.volumeName", pvcRef(pvc)),
		Hint:    Plain("let the PV controller bind the claim (it sets spec.volumeName first), or keep the claim Pending"),
		fixes:   []Fix{undoPhase(r, string(corev1.ClaimPending))},
	}}
}

// undoPhase is the write under review with the phase it had before, or else the given one (or
// none, when that is "").
func undoPhase(r *Review, otherwise string) Fix {
	was := otherwise
	switch {
	case r.OldPV != nil:
		was = string(r.OldPV.Status.Phase)
	case r.OldPVC != nil:
		was = string(r.OldPVC.Status.Phase)
	}
	if was == "" {
		return undo(r.Object(), "status.phase", nil)
	}
	return undo(r.Object(), "status.phase", was)
}
