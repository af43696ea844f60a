package policy

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/pvguard/pvguard/storage"
)

func pvg006AccessModesSubset() Rule {
	return Rule{
		ID:      "PVG006",
		Name:    "access-modes-subset",
		Default: ActionDeny,
		Judges:  JudgesState,
		Kinds:   []Kind{KindPersistentVolume, KindPersistentVolumeClaim},
		Reads:   []Kind{KindPersistentVolume, KindPersistentVolumeClaim},
		Summary: "at bind the claim's access modes are all offered by the volume, and a bound volume never drops a mode its claim uses",
		Check: func(r *Review, v View, _ *Config) ([]Finding, error) {
			b, err := newBinding(r, v)
			if err != nil {
				return nil, err
			}
			if b != nil {
				return pvg006AtBind(r, b), nil
			}
			return pvg006Dropped(r, v)
		},
	}
}

func pvg006AtBind(r *Review, b *bindPair) []Finding {
	if storage.AccessModesFit(b.PV, b.PVC) {
		return nil
	}
	missing := missingAccessModes(b.PVC.Spec.AccessModes, b.PV.Spec.AccessModes)
	hint := unlinkHint(r, b, Textf("use a volume that offers %s", Word(accessModeList(b.PVC.Spec.AccessModes))))
	if b.Field == "spec.claimRef" && !relinks(r, b) {
		hint = Textf("point spec.claimRef at a claim that needs only %s, or leave spec.claimRef as it was", Word(accessModeList(b.PV.Spec.AccessModes)))
	}
	return []Finding{{
		Object: b.Subject,
		Field:  b.Field,
		Message: Textf("%s requests access modes %s, but %s does not offer %s",
			pvcRef(b.PVC), Word(accessModeList(b.PVC.Spec.AccessModes)), pvRef(b.PV), Word(accessModeList(missing))),
		Hint:  hint,
		fixes: unlinkFix(r, b),
	}}
}

// pvg006Dropped judges an update of a bound volume: a mode the claim asked for and the volume
// offered is what pods mount it with, so taking it away breaks them. Modes the claim never used
// may go.
func pvg006Dropped(r *Review, v View) ([]Finding, error) {
	pvc, err := stillBoundClaim(r, v)
	if err != nil || pvc == nil {
		return nil, err
	}
	var dropped []corev1.PersistentVolumeAccessMode
	for _, m := range missingAccessModes(r.OldPV.Spec.AccessModes, r.PV.Spec.AccessModes) {
		if slices.Contains(pvc.Spec.AccessModes, m) {
			dropped = append(dropped, m)
		}
	}
	if len(dropped) == 0 {
		return nil, nil
	}
	vol := pvRef(r.PV)
	return []Finding{{
		Object: vol,
		Field:  "spec.accessModes",
		Message: Textf("%s is bound to %s, which uses %s, and the write drops %s",
			vol, pvcRef(pvc), Word(accessModeList(pvc.Spec.AccessModes)), Word(accessModeList(dropped))),
		Hint:  Textf("keep %s in spec.accessModes", Word(accessModeList(dropped))),
		fixes: []Fix{undo(vol, "spec.accessModes", accessModesJSON(append(slices.Clone(r.PV.Spec.AccessModes), dropped...)))},
	}}, nil
}

// missingAccessModes lists the modes of want that have does not contain, in want's order.
func missingAccessModes(want, have []corev1.PersistentVolumeAccessMode) []corev1.PersistentVolumeAccessMode {
	var out []corev1.PersistentVolumeAccessMode
	for _, m := range want {
		if !slices.Contains(have, m) && !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

func accessModeList(modes []corev1.PersistentVolumeAccessMode) string {
	if len(modes) == 0 {
		return "none"
	}
	s := make([]string, len(modes))
	for i, m := range modes {
		s[i] = string(m)
	}
	return strings.Join(s, ", ")
}

// accessModesJSON is a list of access modes as a field holds it.
func accessModesJSON(modes []corev1.PersistentVolumeAccessMode) []any {
	out := make([]any, len(modes))
	for i, m := range modes {
		out[i] = string(m)
	}
	return out
}
