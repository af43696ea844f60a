package policy

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/pvguard/pvguard/storage"
)

// PVG020: a Bound volume whose claim is gone. The claim's absence is confirmed by a live read
// before it is reported: the audit reads the cache, which may not have the claim yet.
func pvg020DanglingClaimRef() Rule {
	return Rule{
		ID:          "PVG020",
		Name:        "dangling-claimref",
		Default:     ActionAudit,
		Judges:      JudgesStoredState,
		Kinds:       []Kind{KindPersistentVolume},
		Reads:       []Kind{KindPersistentVolumeClaim},
		ConfirmLive: []string{"spec.claimRef"},
		Summary:     "a Bound volume's claimRef names a claim that no longer exists (or was re-created)",
		Check:       auditDanglingClaimRef,
		StatusReads: map[Kind][]string{KindPersistentVolume: {"phase"}},
	}
}

func auditDanglingClaimRef(r *Review, v View, _ *Config) ([]Finding, error) {
	pv := r.PV
	ref := pv.Spec.ClaimRef
	if pv.Status.Phase != corev1.VolumeBound || ref == nil || ref.UID == "" {
		return nil, nil
	}
	pvc, err := namedClaim(ref, v)
	if err != nil {
		return nil, err
	}
	var msg Text
	switch {
	case !storage.NamesAClaim(ref):
		msg = Textf("%s is Bound, but its spec.claimRef names no claim (it has no name or no namespace)", pvRef(pv))
	case pvc == nil:
		msg = Textf("%s is Bound to %s, which no longer exists", pvRef(pv), WithUID(claimRefOf(ref), ref.UID))
	case pvc.UID != ref.UID:
		msg = Textf("%s is Bound to %s, which was re-created as %s", pvRef(pv), WithUID(claimRefOf(ref), ref.UID), WithUID(pvcRef(pvc), pvc.UID))
	default:
		return nil, nil
	}
	return []Finding{{
		Object: pvRef(pv), Field: "spec.claimRef",
		Message: msg,
		Hint:    Plain("let the binder release the volume (check that it runs), or clear spec.claimRef once the data is safe"),
		fixes:   []Fix{clearing(pvRef(pv), "spec.claimRef")},
	}}, nil
}
