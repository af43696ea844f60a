package policy

import (
	"fmt"
	"path"
	"strings"
)

func pvg010VolumeGrab() Rule {
	return Rule{
		ID:      "PVG010",
		Name:    "volume-grab",
		Default: ActionWarn,
		Judges:  JudgesState,
		Kinds:   []Kind{KindPersistentVolumeClaim},
		Reads:   []Kind{KindPersistentVolume},
		Summary: "a claim names in spec.volumeName only a volume pre-bound to it, or one whose grant annotation lists its namespace",
		Check: func(r *Review, v View, c *Config) ([]Finding, error) {
			if !claimLinkChanged(r) {
				return nil, nil
			}
			pvc := r.PVC
			pv, err := v.PersistentVolume(pvc.Spec.VolumeName)
			if err != nil {
				return nil, fmt.Errorf("reading PersistentVolume %s named by %s: %w", pvc.Spec.VolumeName, pvcRef(pvc), err)
			}
			// A volume that does not exist yet cannot be grabbed; whoever creates it decides whom
			// it is for (the claim stays Pending until then).
			if pv == nil || claimRefNames(pv, pvc) {
				return nil, nil
			}
			grant := c.grantAnnotation()
			if grantsNamespace(pv.Annotations[grant], pvc.Namespace) {
				return nil, nil
			}
			why := fmt.Sprintf("the volume is not pre-bound to it and does not grant namespace %s (annotation %s)", pvc.Namespace, grant)
			if ref := pv.Spec.ClaimRef; ref != nil && ref.Name != "" {
				other := ObjectRef{Kind: KindPersistentVolumeClaim, Namespace: ref.Namespace, Name: ref.Name}
				if ref.Namespace == pvc.Namespace && ref.Name == pvc.Name {
					why = fmt.Sprintf("the volume belongs to an earlier %s (uid %s)", other, ref.UID)
				} else {
					why = fmt.Sprintf("the volume is reserved for %s", other)
				}
			}
			return []Finding{{
				Object:  pvcRef(pvc),
				Field:   "spec.volumeName",
				Message: fmt.Sprintf("%s names %s in spec.volumeName, but %s", pvcRef(pvc), pvRef(pv), why),
				Hint: fmt.Sprintf("ask the owner of %s to pre-bind it to this claim (spec.claimRef) or to grant namespace %s with the annotation %s",
					pvRef(pv), pvc.Namespace, grant),
			}}, nil
		},
	}
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
