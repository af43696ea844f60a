package policy

import (
	"fmt"

	"github.com/pvguard/pvguard/storage"
)

func pvg004NoDoubleBinding() Rule {
	return Rule{
		ID:      "PVG004",
		Name:    "no-double-binding",
		Default: ActionDeny,
		Judges:  JudgesState,
		Kinds:   []Kind{KindPersistentVolume, KindPersistentVolumeClaim},
		Reads:   []Kind{KindPersistentVolume, KindPersistentVolumeClaim},
		Summary: "a volume is claimed by at most one live claim, and a claim by at most one volume: a claim names at most one volume that points back, and no second volume links a claim another is linked to",
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
	if pv == nil || pv.Spec.ClaimRef == nil || storage.ClaimRefNames(pv, r.PVC) {
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
	hint := Textf("use another volume, or leave spec.volumeName unset: %s stays with %s until that claim is deleted", pvRef(pv), pvcRef(other))
	fixes := []Fix{undoVolumeName(r)}
	if r.audit && storage.CompletedTo(r.PVC, name) {
		// A claim that completed its binding keeps spec.volumeName (PVG003): only a new claim
		// names another volume.
		hint = Textf("this claim's binding is complete and never moves: delete it and create it again without spec.volumeName; %s stays with %s until that claim is deleted", pvRef(pv), pvcRef(other))
		fixes = []Fix{recreate(claim, "spec.volumeName")}
	}
	return []Finding{{
		Object:  claim,
		Field:   "spec.volumeName",
		Message: Textf("%s names %s, which is already claimed by %s", claim, pvRef(pv), pvcRef(other)),
		Hint:    hint,
		fixes:   fixes,
	}}, nil
}

// pvg004Volume judges a volume whose claimRef is set or changed: the claim it names must not be
// bound to another volume, or two volumes would claim one claim, and upstream releases the one the
// claim does not name, deleting it if it was provisioned with reclaim policy Delete. A provisioner
// saving the volume it has just made for a claim that was bound elsewhere meanwhile is the
// exception: that volume holds no data, and its release is how upstream cleans it up. (Another
// claim naming the volume is not refused here: upstream binds the volume to whichever claim it
// links first and leaves a claim pre-bound by name to a taken volume Pending, which holds no data.)
func pvg004Volume(r *Review, v View) ([]Finding, error) {
	vol := pvRef(r.PV)
	ref := r.PV.Spec.ClaimRef
	pvc, err := liveClaim(ref, v) // nil for a claimRef that names no claim: PVG014's finding
	if err != nil {
		return nil, err
	}
	if pvc != nil && storage.Abandoned(pvc, r.PV.Name) && !provisionedCreate(r) {
		elsewhere, err := v.PersistentVolume(pvc.Spec.VolumeName)
		if err != nil {
			return nil, fmt.Errorf("reading PersistentVolume %s named by %s: %w", pvc.Spec.VolumeName, pvcRef(pvc), err)
		}
		if elsewhere != nil && storage.LinksTo(elsewhere.Spec.ClaimRef, pvc) {
			return []Finding{{
				Object:  vol,
				Field:   "spec.claimRef",
				Message: Textf("%s points spec.claimRef at %s, which is already bound to %s", vol, pvcRef(pvc), pvRef(elsewhere)),
				Hint:    Textf("point spec.claimRef at a claim that is not bound yet, or leave spec.claimRef as it was; %s stays with %s", pvcRef(pvc), pvRef(elsewhere)),
				fixes:   []Fix{undoClaimRef(r)},
			}}, nil
		}
	}
	if pvc == nil || provisionedCreate(r) || storage.CompletedTo(pvc, r.PV.Name) {
		return nil, nil
	}
	// A claim not bound yet that another volume is already linked to, with its uid, is that
	// volume's: upstream binds the claim to the volume linked to it, and a second link is a
	// second volume for one claim (two binders, or a binder that woke from a freeze, each
	// choosing a volume for it). The claim's own completed binding is the exception: that volume
	// holds its data, and upstream re-links it whatever else points at the claim.
	others, err := v.VolumesClaiming(pvc.Namespace, pvc.Name)
	if err != nil {
		return nil, fmt.Errorf("listing the volumes linked to %s: %w", pvcRef(pvc), err)
	}
	for _, other := range others {
		if other.Name != r.PV.Name && other.DeletionTimestamp == nil && storage.LinksTo(other.Spec.ClaimRef, pvc) {
			return []Finding{{
				Object:  vol,
				Field:   "spec.claimRef",
				Message: Textf("%s points spec.claimRef at %s, which %s is already linked to; one claim would be claimed by two volumes", vol, pvcRef(pvc), pvRef(other)),
				Hint:    Textf("leave %s to %s: leave spec.claimRef as it was", pvcRef(pvc), pvRef(other)),
				fixes:   []Fix{undoClaimRef(r)},
			}}, nil
		}
	}
	return nil, nil
}
