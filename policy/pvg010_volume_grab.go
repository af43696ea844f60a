package policy

import (
	"fmt"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/pvguard/pvguard/storage"
)

// PVG010 judges the state in which upstream's binder hands a volume to a claim by name: the claim
// names the volume in spec.volumeName and the volume is free (no claimRef), so upstream binds them
// at once. Whichever write completes that state is judged: the claim's (naming a free volume) or
// the volume's (freeing a volume, or creating a free one, that a claim names). A claim that names
// a volume whose claimRef names another claim gets nothing until the volume is re-pointed or
// freed, a write PVG010 judges then; of those claims only one naming the Released volume of its
// own deleted namesake is warned, at apply time, with what frees the volume (pvg010Linked): a
// tenant naming another's live volume is PVG004's denial, and Velero's restore, which names the
// volume its own restore claim left in the restored claim before pointing the volume at it, is
// not warned.
func pvg010VolumeGrab() Rule {
	return Rule{
		ID:      "PVG010",
		Name:    "volume-grab",
		Default: ActionWarn,
		Judges:  JudgesState,
		Kinds:   []Kind{KindPersistentVolumeClaim, KindPersistentVolume},
		Reads:   []Kind{KindPersistentVolume, KindPersistentVolumeClaim},
		Summary: "a claim gets a volume by naming it in spec.volumeName only when the volume is pre-bound to it or its grant annotation lists the claim's namespace",
		Check: func(r *Review, v View, c *Config) ([]Finding, error) {
			switch {
			case claimLinkChanged(r):
				return pvg010Claim(r, v, c)
			case r.Kind == KindPersistentVolume && r.PV != nil && r.PV.Spec.ClaimRef == nil &&
				(r.OldPV == nil || r.OldPV.Spec.ClaimRef != nil):
				return pvg010Freed(r, v, c)
			}
			return nil, nil
		},
		// The warning on a claim naming its deleted namesake's volume says what phase the volume is in.
		StatusReads: map[Kind][]string{KindPersistentVolume: {"phase"}},
	}
}

// pvg010Claim judges a claim that names a volume.
func pvg010Claim(r *Review, v View, c *Config) ([]Finding, error) {
	pvc := r.PVC
	pv, err := v.PersistentVolume(pvc.Spec.VolumeName)
	if err != nil {
		return nil, fmt.Errorf("reading PersistentVolume %s named by %s: %w", pvc.Spec.VolumeName, pvcRef(pvc), err)
	}
	// A volume that does not exist yet is not handed to this claim by this write: whoever creates
	// it decides (and is judged then).
	if pv == nil {
		return nil, nil
	}
	if pv.Spec.ClaimRef != nil {
		return pvg010Linked(r, v, pv)
	}
	grant := c.grantAnnotation()
	if grantsNamespace(pv.Annotations[grant], pvc.Namespace) {
		return nil, nil
	}
	message := Textf("%s names %s in spec.volumeName, but the volume is not pre-bound to it and does not grant namespace %s (annotation %s)",
		pvcRef(pvc), pvRef(pv), NamespaceOf(pvcRef(pvc)), Word(grant))
	hint := Textf("ask the owner of %s to pre-bind it to this claim (spec.claimRef) or to grant namespace %s with the annotation %s",
		pvRef(pv), NamespaceOf(pvcRef(pvc)), Word(grant))
	ref := claimRefJSON(pvc)
	if !storage.CompletedTo(pvc, pv.Name) {
		// With another volume linked to this claim, pre-binding this one to it too would be two
		// volumes for one claim, which PVG004 refuses: that is no way out.
		others, err := v.VolumesClaiming(pvc.Namespace, pvc.Name)
		if err != nil {
			return nil, fmt.Errorf("listing the volumes linked to %s: %w", pvcRef(pvc), err)
		}
		for _, other := range others {
			if other.Name != pv.Name && other.DeletionTimestamp == nil && storage.LinksTo(other.Spec.ClaimRef, pvc) {
				return []Finding{{
					Object:  pvcRef(pvc),
					Field:   "spec.volumeName",
					Message: message,
					Hint: Textf("%s is already linked to this claim, and no second volume may be linked to it: name that volume in spec.volumeName, or leave it unset",
						pvRef(other)),
					fixes: []Fix{undoVolumeName(r)},
				}}, nil
			}
		}
	}
	if storage.CompletedTo(pvc, pv.Name) {
		// The volume holds this claim's data: its link goes back with the claim's uid (PVG002).
		hint = Textf("ask the owner of %s to point its spec.claimRef back at this claim, with the claim's uid (the claim completed its binding to it), or to grant namespace %s with the annotation %s",
			pvRef(pv), NamespaceOf(pvcRef(pvc)), Word(grant))
		ref["uid"] = string(pvc.UID)
	}
	return []Finding{{
		Object:  pvcRef(pvc),
		Field:   "spec.volumeName",
		Message: message,
		Hint:    hint,
		fixes: []Fix{
			{Writes: []Write{{Object: pvcRef(pvc)}, {Object: pvRef(pv), Set: map[string]any{"spec.claimRef": ref}}}},
			{Writes: []Write{{Object: pvRef(pv), Set: map[string]any{annPath(grant): pvc.Namespace}}, {Object: pvcRef(pvc)}}},
		},
	}}, nil
}

// pvg010Linked judges a claim that names a volume linked to a claim: the write hands the volume
// to nobody (upstream binds a volume only to the claim its claimRef names), so the claim stays
// Pending. The tenant hears why at apply time:
//   - the claimRef names a live claim other than this one: PVG004 refuses the write and names
//     that claim as the reader may read it ("already claimed by a claim in another namespace");
//     a writer that rule exempts is a documented hand-over (rename-pvc copies the claim, then
//     re-points the volume), so this rule does not repeat it;
//   - the claimRef names an earlier claim of this claim's namespace and name, deleted (the uid it
//     carries is not this claim's and no live claim has it): this rule warns that the volume
//     stays with the claim that is gone until an admin clears spec.claimRef.uid, or its reclaim
//     policy deletes it.
//
// A volume released by a deleted claim of another name is not judged: that is the state in which
// a restore hands a volume over (Velero's RebindPVC names the volume in the restored claim, then
// ResetPVBinding points the volume at it), and it is the volume's re-pointing, an admin's write,
// that binds it, judged then by PVG004, PVG008 and this rule. Nothing a tenant writes on its claim
// makes a volume look like that (the claimRef, the only state read here, is the volume's), and
// what the restore writes on its claim (the velero.io/dynamic-pv-restore selector, no binder
// annotations) does not quiet the warning. The audit does not report these states: a Pending
// claim naming such a volume is `explain`'s to explain.
func pvg010Linked(r *Review, v View, pv *corev1.PersistentVolume) ([]Finding, error) {
	pvc, ref := r.PVC, pv.Spec.ClaimRef
	if r.audit || storage.ClaimRefNames(pv, pvc) || ref.Namespace != pvc.Namespace || ref.Name != pvc.Name || ref.UID == "" {
		return nil, nil
	}
	live, err := liveClaim(ref, v)
	if err != nil || live != nil {
		// A live claim of this name carrying that uid is this claim's previous incarnation seen
		// through a lagging cache: not judged (PVG004 says the same).
		return nil, err
	}
	claim, vol := pvcRef(pvc), pvRef(pv)
	hint, fixes := pvg010Frees(r, pv)
	return []Finding{{
		Object: claim,
		Field:  "spec.volumeName",
		Message: Textf("%s names %s in spec.volumeName, but the volume still belongs to an earlier claim of this name, %s, which was deleted: the volume is %s and is bound to no other claim, so this claim stays Pending",
			claim, vol, WithUID(claimRefOf(ref), ref.UID), Word(pvPhaseWord(pv))),
		Hint:  hint,
		fixes: fixes,
	}}, nil
}

// pvg010Frees says what frees a volume still linked to a deleted claim of the claim's name, by
// its reclaim policy.
func pvg010Frees(r *Review, pv *corev1.PersistentVolume) (Text, []Fix) {
	vol, claim := pvRef(pv), pvcRef(r.PVC)
	asWritten := Write{Object: claim}
	if pv.Spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimDelete {
		return Textf("its reclaim policy is Delete, so the volume is deleted rather than handed to this claim: leave spec.volumeName unset to get a new volume, or have an admin set spec.persistentVolumeReclaimPolicy of %s to Retain and clear its spec.claimRef.uid to hand its data to this claim", vol),
			[]Fix{
				clearing(claim, "spec.volumeName"),
				{Writes: []Write{asWritten, {Object: vol, Set: map[string]any{"spec.persistentVolumeReclaimPolicy": string(corev1.PersistentVolumeReclaimRetain)}},
					{Object: vol, Clear: []string{"spec.claimRef.uid", "spec.claimRef.resourceVersion"}}}},
			}
	}
	return Textf("an admin frees %s for this claim by clearing its spec.claimRef.uid (the volume is then pre-bound to this claim by name), or leave spec.volumeName unset to get another volume", vol),
		[]Fix{
			{Writes: []Write{asWritten, {Object: vol, Clear: []string{"spec.claimRef.uid", "spec.claimRef.resourceVersion"}}}},
			clearing(claim, "spec.volumeName"),
		}
}

// pvPhaseWord is a volume's phase for a message, "Released" when it has none yet.
func pvPhaseWord(pv *corev1.PersistentVolume) string {
	if pv.Status.Phase == "" {
		return string(corev1.VolumeReleased)
	}
	return string(pv.Status.Phase)
}

// pvg010Freed judges a write that leaves a volume free (created without claimRef, or its claimRef
// cleared): upstream binds it at once to a claim that names it, so a claim it does not grant
// would get it. The claim that completed its binding to the volume is its owner, which upstream
// re-links (PVG002 guards that).
func pvg010Freed(r *Review, v View, c *Config) ([]Finding, error) {
	claims, err := v.ClaimsNamingVolume(r.PV.Name)
	if err != nil {
		return nil, fmt.Errorf("listing the claims that name %s: %w", pvRef(r.PV), err)
	}
	grant := c.grantAnnotation()
	for _, pvc := range claims {
		if storage.CompletedTo(pvc, r.PV.Name) || grantsNamespace(r.PV.Annotations[grant], pvc.Namespace) {
			continue
		}
		verb := "frees"
		if r.OldPV == nil {
			verb = "creates free"
		}
		return []Finding{{
			Object: pvRef(r.PV),
			Field:  "spec.claimRef",
			Message: Textf("the write %s %s, which %s names in spec.volumeName: the volume would be bound to that claim at once, but it is not pre-bound to it and does not grant namespace %s (annotation %s)",
				Word(verb), pvRef(r.PV), pvcRef(pvc), NamespaceOf(pvcRef(pvc)), Word(grant)),
			Hint: Textf("pre-bind the volume (spec.claimRef) to the claim meant to have it, grant namespace %s with the annotation %s, or have %s drop spec.volumeName first",
				NamespaceOf(pvcRef(pvc)), Word(grant), pvcRef(pvc)),
			fixes: []Fix{
				{Writes: []Write{{Object: pvRef(r.PV), Set: map[string]any{"spec.claimRef": claimRefJSON(pvc)}}}},
				{Writes: []Write{{Object: pvRef(r.PV), Set: map[string]any{annPath(grant): pvc.Namespace}}}},
				{Writes: []Write{{Object: pvcRef(pvc), Clear: []string{"spec.volumeName"}}, {Object: pvRef(r.PV)}}},
			},
		}}, nil
	}
	return nil, nil
}

// grantsNamespace reports whether a grant annotation value (comma separated namespaces, globs
// allowed) includes the namespace. A malformed pattern grants nothing rather than everything.
func grantsNamespace(value, namespace string) bool {
	for _, p := range strings.Split(value, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if ok, err := path.Match(p, namespace); err == nil && ok {
			return true
		}
	}
	return false
}

// claimRefJSON is a claimRef pre-binding a volume to pvc by name, as the field holds it.
func claimRefJSON(pvc *corev1.PersistentVolumeClaim) map[string]any {
	return map[string]any{"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": pvc.Namespace, "name": pvc.Name}
}
