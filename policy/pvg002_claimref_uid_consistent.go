package policy

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/pvguard/pvguard/storage"
)

// PVG002 guards the volume's half of a binding as a property of the state, whatever write (verb,
// patch type, number of steps) would change it:
//   - a volume linked to a live claim (claimRef with that claim's uid) keeps the link until the
//     claim is deleted or has gone to another volume, the only cases in which upstream's
//     controllers undo a link;
//   - a volume that a live claim has completed a binding to (bind-completed, volumeName naming it)
//     links to nothing but that claim with its uid, which is how upstream re-links it;
//   - a uid a write gives the claimRef is the uid of the live claim it names;
//   - but a volume populator may hand the volume it filled from its own claim to the claim it
//     filled it for, in the state that identifies the hand-off (handoff.go).
//
// It judges a change, so the audit does not run it: a claimRef naming a claim that is gone
// describes a released volume once it has been written, and PVG020 and PVG022 report the states
// that are wrong (a Bound volume whose claim is gone, a claim whose volume points elsewhere).
func pvg002ClaimRefUIDConsistent() Rule {
	return Rule{
		ID:      "PVG002",
		Name:    "claimref-uid-consistent",
		Default: ActionDeny,
		Judges:  JudgesChange,
		Kinds:   []Kind{KindPersistentVolume},
		Reads:   []Kind{KindPersistentVolumeClaim, KindPersistentVolume},
		Summary: "a volume keeps its link to a live claim until the claim is deleted or goes to another volume (or a populator hands it to the claim it filled it for), links only to a claim that completed a binding to it, and any uid it is given is the live claim's",
		CEL: []CELForm{{
			Kind: KindPersistentVolume, Operations: []Operation{OperationUpdate}, Status: true, ExemptControllers: true,
			Refuses: celPhase("oldObject") + " == 'Bound' && " + celRefField("oldObject", "uid") + " != '' && !(" +
				celRefField("object", "uid") + " == oldObject.spec.claimRef.uid && " + celRefField("object", "name") + " == " + celRefField("oldObject", "name") +
				" && " + celRefField("object", "namespace") + " == " + celRefField("oldObject", "namespace") + ") && !(" +
				celRefField("object", "uid") + ".matches(" + celUUID + ") && " + celRefField("oldObject", "name") + ".endsWith('-' + object.spec.claimRef.uid))",
			Message: "'[PVG002 claimref-uid-consistent] PersistentVolume ' + object.metadata.name + ' is Bound to PersistentVolumeClaim ' + " +
				"oldObject.spec.claimRef.namespace + '/' + oldObject.spec.claimRef.name + ' (uid ' + oldObject.spec.claimRef.uid + ')' + " +
				"' and the write changes or clears spec.claimRef; a volume stays with its claim until the claim is deleted: to free the volume, delete the claim'",
			Weaker: "only a Bound volume's link is judged, and the binding controllers' writes are not (upstream unbinds a volume whose claim went to another volume or was deleted, which needs the claim to tell); " +
				"a Bound volume whose claim is gone keeps its link against everyone else until the PV controller marks it Released; " +
				"a hand-off is admitted when the volume leaves a claim named after the new claimRef's uid, without the reads that tell the target waits for its data",
		}},
		Check: func(r *Review, v View, _ *Config) ([]Finding, error) {
			if r.Kind != KindPersistentVolume || r.PV == nil {
				return nil, nil
			}
			old, cur := oldClaimRef(r), r.PV.Spec.ClaimRef
			if storage.SameLink(old, cur) {
				return nil, nil
			}
			found, err := pvg002LinkKept(r, v, old, cur)
			if found != nil || err != nil {
				return found, err
			}
			return pvg002GivenUID(r, v, old, cur)
		},
	}
}

// pvg002LinkKept judges a write that changes the link of a volume that holds, or is about to
// hold, a live claim's data.
func pvg002LinkKept(r *Review, v View, old, cur *corev1.ObjectReference) ([]Finding, error) {
	vol := pvRef(r.PV)
	if r.OldPV != nil {
		linked, err := boundClaim(r.OldPV, v)
		if err != nil {
			return nil, fmt.Errorf("reading the claim %s is linked to: %w", vol, err)
		}
		if linked != nil {
			// A populator handing the volume it filled to the claim it filled it for (handoff.go);
			// its own claim completed its binding to the volume, which is what it hands over.
			ok, err := handOff(r, v, linked, cur)
			if ok || err != nil {
				return nil, err
			}
		}
		if linked != nil && !storage.Abandoned(linked, r.PV.Name) {
			field := "spec.claimRef"
			if cur != nil && cur.Namespace == old.Namespace && cur.Name == old.Name {
				field = "spec.claimRef.uid"
			}
			return []Finding{{
				Object: vol,
				Field:  field,
				Message: Textf("%s is claimed by the live %s and the write %s; a volume stays with its claim until the claim is deleted or bound to another volume, or the volume's data can go to another claim",
					vol, WithUID(pvcRef(linked), linked.UID), linkChange(old, cur)),
				Hint:  Textf("to free the volume, delete %s: the volume is then Released and its reclaim policy applies", pvcRef(linked)),
				fixes: []Fix{{Writes: []Write{{Object: pvcRef(linked), Delete: true}}}},
			}}, nil
		}
	}
	// Clearing a link to another claim is the way back to the owner: upstream re-links a volume
	// without claimRef to the claim that completed its binding to it.
	own, err := owner(r.PV.Name, v)
	if err != nil || own == nil || storage.LinksTo(cur, own) || cur == nil {
		return nil, err
	}
	return []Finding{{
		Object: vol,
		Field:  "spec.claimRef",
		Message: Textf("%s completed its binding to %s (%s), so the volume holds its data, and the write %s",
			pvcRef(own), vol, Word(storage.AnnBindCompleted), linkChange(old, cur)),
		Hint: Textf("point spec.claimRef at %s, or delete that claim first", WithUID(pvcRef(own), own.UID)),
		fixes: []Fix{
			{Writes: []Write{{Object: vol, Set: map[string]any{"spec.claimRef": claimRefWithUID(own)}}}},
			{Writes: []Write{{Object: pvcRef(own), Delete: true}, {Object: vol}}},
		},
	}}, nil
}

// pvg002GivenUID judges a uid the write gives the claimRef: it must be the live claim's, or
// upstream's controller releases the volume at once (and with reclaim policy Delete deletes it).
// A provisioner's new volume is the exception: it holds no data, and that release is how upstream
// cleans up a volume whose claim went away while it was being provisioned.
func pvg002GivenUID(r *Review, v View, old, cur *corev1.ObjectReference) ([]Finding, error) {
	// A reference without a name or namespace names no claim whose uid it could carry: that is
	// PVG014's finding, and this rule would only repeat it.
	if cur == nil || cur.UID == "" || !storage.NamesAClaim(cur) || provisionedCreate(r) {
		return nil, nil
	}
	// A uid kept while the name changes is given anew: it is the old claim's, and the claim now
	// named has another (upstream then releases the volume at once).
	if old != nil && storage.SameClaimRef(old, cur) {
		return nil, nil
	}
	vol := pvRef(r.PV)
	pvc, err := namedClaim(cur, v)
	if err != nil {
		return nil, fmt.Errorf("reading %s named by spec.claimRef: %w", claimRefString(cur), err)
	}
	// Whether the claim exists is told only to a reader who may read it: to others the two
	// findings read the same, so that a request cannot learn it.
	named, uid := claimRefOf(cur), UID(claimRefOf(cur), cur.UID)
	unknown := Textf("spec.claimRef.uid %s is not the uid of a live %s; the volume would be released at once (and deleted with reclaim policy Delete)", uid, named)
	switch {
	case pvc == nil:
		return []Finding{{
			Object: vol,
			Field:  "spec.claimRef.uid",
			Message: Textf("%s", Either(named, Textf("spec.claimRef.uid %s names %s, which does not exist; the volume would be released at once (and deleted with reclaim policy Delete)",
				uid, named), unknown)),
			Hint: Textf("%s", Either(named, Plain("drop spec.claimRef.uid to pre-bind the volume by name, or create the claim first"),
				Plain("drop spec.claimRef.uid to pre-bind the volume by name"))),
			fixes: []Fix{clearing(vol, "spec.claimRef.uid")},
		}}, nil
	case pvc.UID != cur.UID:
		return []Finding{{
			Object: vol,
			Field:  "spec.claimRef.uid",
			Message: Textf("%s", Either(named, Textf("spec.claimRef.uid %s is not the uid %s of the live %s (a re-created claim of the same name?); the volume would be released at once (and deleted with reclaim policy Delete)",
				uid, UID(pvcRef(pvc), pvc.UID), pvcRef(pvc)), unknown)),
			Hint:  Plain("drop spec.claimRef.uid to pre-bind the volume by name"),
			fixes: []Fix{clearing(vol, "spec.claimRef.uid")},
		}}, nil
	}
	return nil, nil
}

// linkChange describes what a write does to a volume's claimRef, completing "the write ...".
func linkChange(old, cur *corev1.ObjectReference) Text {
	switch {
	case cur == nil:
		return Textf("clears spec.claimRef (was %s)", linkString(old))
	case old != nil && cur.Namespace == old.Namespace && cur.Name == old.Name && cur.UID == "":
		return Textf("drops spec.claimRef.uid %s", UID(claimRefOf(old), old.UID))
	case old != nil && cur.Namespace == old.Namespace && cur.Name == old.Name:
		return Textf("changes spec.claimRef.uid from %s to %s", UID(claimRefOf(old), old.UID), UID(claimRefOf(cur), cur.UID))
	}
	return Textf("points spec.claimRef at %s", linkString(cur))
}

// claimRefWithUID is a claimRef linking a volume to pvc, with its uid, as the field holds it.
func claimRefWithUID(pvc *corev1.PersistentVolumeClaim) map[string]any {
	ref := claimRefJSON(pvc)
	ref["uid"] = string(pvc.UID)
	return ref
}
