package policy

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/pvguard/pvguard/storage"
)

func pvg018VolumeAttributesClassMatch() Rule {
	return Rule{
		ID:      "PVG018",
		Name:    "volume-attributes-class-match",
		Default: ActionDeny,
		Judges:  JudgesState,
		Kinds:   []Kind{KindPersistentVolume, KindPersistentVolumeClaim},
		Reads:   []Kind{KindPersistentVolume, KindPersistentVolumeClaim},
		Summary: "at bind, the volume and the claim name the same VolumeAttributesClass (unset and \"\" both mean none)",
		// Upstream's binder never pairs a claim with a volume of another VolumeAttributesClass
		// (it skips such volumes when matching, pre-bound ones included, and leaves a claim
		// pre-bound to one Pending): the class is the volume's performance tier, and a claim
		// given another tier than it asked for, or a tier it did not ask for, is misbound.
		Check: func(r *Review, v View, _ *Config) ([]Finding, error) {
			b, err := newBinding(r, v)
			if err != nil || b == nil {
				return nil, err
			}
			if pvg018Fits(r, b) {
				return nil, nil
			}
			want, got := storage.ClaimAttributesClass(b.PVC), storage.VolumeAttributesClass(b.PV)
			hint := Textf("name a volume %s in spec.volumeName, or leave it unset so that a matching volume is bound or provisioned",
				Word(pvg018VolumeWith(want)))
			fixes := unlinkFix(r, b)
			switch {
			case relinks(r, b):
				// A bound pair (seen by the audit, or re-linked): undoing the binding is not the
				// fix, and other rules refuse it.
				hint = Plain("the pair is bound: change the volume's attributes through the claim's spec.volumeAttributesClassName " +
					"(the external-resizer then modifies the volume), or correct whichever of the two records the wrong class")
				fixes = []Fix{undo(pvcRef(b.PVC), "spec.volumeAttributesClassName", nil)}
				if got != "" {
					fixes = []Fix{undo(pvcRef(b.PVC), "spec.volumeAttributesClassName", got)}
				}
			case b.Field == "spec.claimRef":
				hint = Textf("link the volume only to a claim that asks for %s, or leave spec.claimRef as it was", Word(pvg018ClassPhrase(got)))
			}
			return []Finding{{
				Object:  b.Subject,
				Field:   b.Field,
				Message: Textf("%s asks for %s, but %s has %s", pvcRef(b.PVC), Word(pvg018ClassPhrase(want)), pvRef(b.PV), Word(pvg018Has(got))),
				Hint:    hint,
				fixes:   fixes,
			}}, nil
		},
		StatusReads: map[Kind][]string{KindPersistentVolumeClaim: {"currentVolumeAttributesClassName", "modifyVolumeStatus"}},
	}
}

// pvg018Fits reports whether the pair a write links may be linked as far as the
// VolumeAttributesClass goes.
func pvg018Fits(r *Review, b *bindPair) bool {
	if storage.AttributesClassesMatch(b.PV, b.PVC) {
		return true
	}
	// The external provisioner saves the volume it made with the class the claim asked for when
	// provisioning began; the claim's class may have been changed since (it is mutable while the
	// claim is unbound). Refusing that save would orphan the new disk. As long as the claim does
	// not name the volume, upstream can pair them only through its matching, which skips a volume
	// of another class (the claim stays Pending until its class is set back), and the claim's
	// own link to the volume is judged here when it is written; so admitting the save links
	// nothing unsafe. A claim that already names the volume would be bound to it without any
	// check, so that save is judged like any other.
	if r.Kind == KindPersistentVolume && r.Operation == OperationCreate && b.PVC.Spec.VolumeName != b.PV.Name {
		if _, provisioned := b.PV.Annotations[storage.AnnProvisionedBy]; provisioned {
			return true
		}
	}
	// A volume re-linked to the bind-completed claim that names it (the PV controller repairing
	// a lost claimRef), or such a pair read by the audit, is judged against every class the claim
	// has or is being modified to: while the external-resizer modifies a volume, the claim's spec
	// names the new class and the volume keeps the old one until the resizer records the change,
	// on the volume first and on the claim's status second.
	if relinks(r, b) {
		got := storage.VolumeAttributesClass(b.PV)
		for _, given := range pvg018Given(b.PVC) {
			if given == got {
				return true
			}
		}
	}
	return false
}

// pvg018Given lists the VolumeAttributesClasses a bound claim has, or is being modified to: its
// spec, status.currentVolumeAttributesClassName (unset: none) and the target of a modification
// under way.
func pvg018Given(pvc *corev1.PersistentVolumeClaim) []string {
	given := []string{storage.ClaimAttributesClass(pvc), ""}
	if cur := pvc.Status.CurrentVolumeAttributesClassName; cur != nil {
		given[1] = *cur
	}
	if m := pvc.Status.ModifyVolumeStatus; m != nil {
		given = append(given, m.TargetVolumeAttributesClassName)
	}
	return given
}

// pvg018ClassPhrase names what a claim asks for: `VolumeAttributesClass "gold"`, or none.
func pvg018ClassPhrase(c string) string {
	if c == "" {
		return "no VolumeAttributesClass"
	}
	return fmt.Sprintf("VolumeAttributesClass %q", c)
}

// pvg018Has names what a volume has, after "has".
func pvg018Has(c string) string {
	if c == "" {
		return "none"
	}
	return fmt.Sprintf("%q", c)
}

// pvg018VolumeWith describes a volume that would fit a claim asking for c.
func pvg018VolumeWith(c string) string {
	if c == "" {
		return "without a volumeAttributesClassName"
	}
	return fmt.Sprintf("whose volumeAttributesClassName is %q", c)
}
