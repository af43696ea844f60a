package policy

import (
	"fmt"
	"path"
	"strings"

	"github.com/pvguard/pvguard/storage"
)

// PVG010 judges the state in which upstream's binder hands a volume to a claim by name: the claim
// names the volume in spec.volumeName and the volume is free (no claimRef), so upstream binds them
// at once. Whichever write completes that state is judged: the claim's (naming a free volume) or
// the volume's (freeing a volume, or creating a free one, that a claim names). A claim that names
// a volume whose claimRef names another claim is not judged: nothing binds it until the volume is
// re-pointed or freed, a write PVG010 judges then (a tenant naming another's live volume is
// PVG004's denial). So Velero's restore, which names the volume in its claim before pointing the
// volume at it, is not warned, and no message names a claim that is gone.
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
	}
}

// pvg010Claim judges a claim that names a volume.
func pvg010Claim(r *Review, v View, c *Config) ([]Finding, error) {
	pvc := r.PVC
	pv, err := v.PersistentVolume(pvc.Spec.VolumeName)
	if err != nil {
		return nil, fmt.Errorf("reading PersistentVolume %s named by %s: %w", pvc.Spec.VolumeName, pvcRef(pvc), err)
	}
	// A volume that does not exist yet, or is linked to some claim, is not handed to this claim by
	// this write: whoever creates or frees it decides (and is judged then).
	if pv == nil || pv.Spec.ClaimRef != nil {
		return nil, nil
	}
	grant := c.grantAnnotation()
	if grantsNamespace(pv.Annotations[grant], pvc.Namespace) {
		return nil, nil
	}
	return []Finding{{
		Object: pvcRef(pvc),
		Field:  "spec.volumeName",
		Message: Textf("%s names %s in spec.volumeName, but the volume is not pre-bound to it and does not grant namespace %s (annotation %s)",
			pvcRef(pvc), pvRef(pv), NamespaceOf(pvcRef(pvc)), Word(grant)),
		Hint: Textf("ask the owner of %s to pre-bind it to this claim (spec.claimRef) or to grant namespace %s with the annotation %s",
			pvRef(pv), NamespaceOf(pvcRef(pvc)), Word(grant)),
	}}, nil
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
