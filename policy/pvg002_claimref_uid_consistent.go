package policy

import (
	"fmt"
)

func pvg002ClaimRefUIDConsistent() Rule {
	return Rule{
		ID:      "PVG002",
		Name:    "claimref-uid-consistent",
		Default: ActionDeny,
		Kinds:   []Kind{KindPersistentVolume},
		Summary: "a volume's claimRef.uid is the uid of the live claim it names, a set uid never changes, and a bound volume is never re-pointed",
		Check: func(r *Review, v View, _ *Config) ([]Finding, error) {
			// Clearing claimRef, or only its uid, is how a volume is released; only writes that
			// set or change the reference can break it.
			if !volumeLinkChanged(r) {
				return nil, nil
			}
			vol := pvRef(r.PV)
			old, cur := oldClaimRef(r), r.PV.Spec.ClaimRef

			if old != nil && old.UID != "" {
				// A re-pointed reference is one problem, not two: its uid changes too, and the
				// fix (release first) is the same, so it alone is reported.
				if cur.Namespace != old.Namespace || cur.Name != old.Name {
					return []Finding{{
						Object: vol,
						Field:  "spec.claimRef",
						Message: fmt.Sprintf("%s is bound to %s (uid %s) and spec.claimRef is re-pointed to %s; re-pointing a bound volume hands one claim's data to another",
							vol, claimRefString(old), old.UID, claimRefString(cur)),
						Hint: "release the volume first by clearing spec.claimRef, then bind it again",
					}}, nil
				}
				if cur.UID != "" && cur.UID != old.UID {
					return []Finding{{
						Object: vol,
						Field:  "spec.claimRef.uid",
						Message: fmt.Sprintf("%s is bound to %s with uid %s and spec.claimRef.uid changes to %s; a set uid never changes to another uid",
							vol, claimRefString(old), old.UID, cur.UID),
						Hint: "clear spec.claimRef and let the binder bind the volume again",
					}}, nil
				}
			}

			// A reference without a name or namespace names no claim whose uid it could carry:
			// that is PVG014's finding, and this rule would only repeat it.
			if cur.UID == "" || !NamesAClaim(cur) {
				return nil, nil
			}
			pvc, err := namedClaim(cur, v)
			if err != nil {
				return nil, fmt.Errorf("reading %s named by spec.claimRef: %w", claimRefString(cur), err)
			}
			switch {
			case pvc == nil:
				// The upstream controller releases a volume whose claim is gone as soon as it
				// sees it, and with reclaim policy Delete deletes the data with it.
				return []Finding{{
					Object: vol,
					Field:  "spec.claimRef.uid",
					Message: fmt.Sprintf("spec.claimRef.uid %s names %s, which does not exist; the volume would be released at once (and deleted with reclaim policy Delete)",
						cur.UID, claimRefString(cur)),
					Hint: "drop spec.claimRef.uid to pre-bind the volume by name, or create the claim first",
				}}, nil
			case pvc.UID != cur.UID:
				return []Finding{{
					Object: vol,
					Field:  "spec.claimRef.uid",
					Message: fmt.Sprintf("spec.claimRef.uid %s is not the uid %s of the live %s (a re-created claim of the same name?)",
						cur.UID, pvc.UID, pvcRef(pvc)),
					Hint: "drop spec.claimRef.uid to pre-bind the volume by name",
				}}, nil
			}
			return nil, nil
		},
	}
}
