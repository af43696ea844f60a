package policy

import (
	"fmt"
)

func pvg004NoDoubleBinding() Rule {
	return Rule{
		ID:      "PVG004",
		Name:    "no-double-binding",
		Default: ActionDeny,
		Kinds:   []Kind{KindPersistentVolume, KindPersistentVolumeClaim},
		Summary: "a volume is claimed by at most one live claim, and a claim names at most one volume that points back",
		Check: func(r *Review, v View, _ *Config) ([]Finding, error) {
			switch {
			case claimLinkChanged(r):
				return pvg004Claim(r, v)
			case volumeLinkChanged(r):
				return pvg004Volume(r, v)
			}
			return nil, nil
		},
	}
}

// pvg004Claim judges a claim that names a volume: the volume must not belong to another live
// claim. A volume whose claimRef names a claim that is gone (deleted, or re-created under the
// same name) is only Released; the upstream controller leaves such a claim Pending, which is
// not a double binding.
//
// Another live claim that names the volume matters only when the volume points back at it, and
// then the volume's claimRef already names that claim, so one look at the claimRef covers both.
func pvg004Claim(r *Review, v View) ([]Finding, error) {
	claim := pvcRef(r.PVC)
	name := r.PVC.Spec.VolumeName
	pv, err := v.PersistentVolume(name)
	if err != nil {
		return nil, fmt.Errorf("reading PersistentVolume %s named by spec.volumeName: %w", name, err)
	}
	if pv == nil || pv.Spec.ClaimRef == nil || claimRefNames(pv, r.PVC) {
		return nil, nil
	}
	other, err := liveClaim(pv.Spec.ClaimRef, v)
	if err != nil || other == nil {
		return nil, err
	}
	// Two claims of one namespace and name never coexist: a live claim of this name is this
	// claim's previous incarnation seen through a lagging cache, or this claim read without its
	// uid (offline manifests), never a rival.
	if other.Namespace == r.PVC.Namespace && other.Name == r.PVC.Name {
		return nil, nil
	}
	return []Finding{{
		Object:  claim,
		Field:   "spec.volumeName",
		Message: fmt.Sprintf("%s names %s, which is already claimed by %s", claim, pvRef(pv), pvcRef(other)),
		Hint:    fmt.Sprintf("use another volume, or release %s from %s first", pvRef(pv), pvcRef(other)),
	}}, nil
}

// pvg004Volume judges a volume whose claimRef is set or changed: the claim it names must not
// have completed a binding to another volume, or two volumes would claim one claim and the
// claim would follow only one of them.
func pvg004Volume(r *Review, v View) ([]Finding, error) {
	vol := pvRef(r.PV)
	pvc, err := liveClaim(r.PV.Spec.ClaimRef, v)
	if err != nil || pvc == nil {
		return nil, err
	}
	if pvc.Spec.VolumeName == "" || pvc.Spec.VolumeName == r.PV.Name {
		return nil, nil
	}
	elsewhere, err := v.PersistentVolume(pvc.Spec.VolumeName)
	if err != nil {
		return nil, fmt.Errorf("reading PersistentVolume %s named by %s: %w", pvc.Spec.VolumeName, pvcRef(pvc), err)
	}
	if elsewhere == nil || elsewhere.Spec.ClaimRef == nil || elsewhere.Spec.ClaimRef.UID == "" ||
		!claimRefNames(elsewhere, pvc) {
		return nil, nil
	}
	return []Finding{{
		Object:  vol,
		Field:   "spec.claimRef",
		Message: fmt.Sprintf("%s points spec.claimRef at %s, which is already bound to %s", vol, pvcRef(pvc), pvRef(elsewhere)),
		Hint:    fmt.Sprintf("point spec.claimRef at another claim, or release %s from %s first", pvcRef(pvc), pvRef(elsewhere)),
	}}, nil
}
