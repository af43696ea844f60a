package policy

import (
	"github.com/pvguard/pvguard/storage"
)

func pvg022MisboundPair() Rule {
	return Rule{
		ID:      "PVG022",
		Name:    "misbound-pair",
		Default: ActionAudit,
		Judges:  JudgesStoredState,
		Kinds:   []Kind{KindPersistentVolumeClaim},
		Reads:   []Kind{KindPersistentVolume},
		Summary: "a claim names a volume whose claimRef is not that claim",
		Check:   auditMisbound,
	}
}

func auditMisbound(r *Review, v View, _ *Config) ([]Finding, error) {
	pvc := r.PVC
	if pvc.Spec.VolumeName == "" {
		return nil, nil
	}
	pv, err := v.PersistentVolume(pvc.Spec.VolumeName)
	if pv == nil {
		return nil, err
	}
	// A claim that completed its binding needs the volume to carry its uid: upstream marks it Lost
	// when the uid is missing. Before that, a claimRef by name is a pre-binding in progress.
	ref := pv.Spec.ClaimRef
	if storage.LinksTo(ref, pvc) || !storage.CompletedTo(pvc, pv.Name) && storage.ClaimRefNames(pv, pvc) {
		return nil, nil
	}
	var other Arg = Word("no claim")
	if ref != nil {
		other = linkString(ref)
	}
	return []Finding{{Object: pvcRef(pvc), Field: "spec.volumeName",
		Message: Textf("%s names %s, but the volume's claimRef points at %s", pvcRef(pvc), pvRef(pv), other),
		Hint:    Plain("bind the claim to a volume that points back at it; do not hand-edit claimRef of a volume in use")}}, nil
}
