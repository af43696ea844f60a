package policy

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/pvguard/pvguard/storage"
)

// protectionFinalizer is a finalizer PVG012 guards and what to do instead of removing it.
type protectionFinalizer struct {
	Name, Hint string
}

// protectionFinalizers are the finalizers that keep a volume or claim, and the storage behind
// it, alive while it is in use, each with what the owning controller waits for.
var protectionFinalizers = []protectionFinalizer{
	{storage.FinalizerPVProtection, "the pv-protection controller removes it once no claim is bound to the volume; delete the bound claim instead"},
	{storage.FinalizerPVCProtection, "the pvc-protection controller removes it once no pod uses the claim; delete the pods that use the claim instead"},
	{storage.FinalizerPVController, "the PersistentVolume controller removes it once the volume is reclaimed; wait for the reclaim to finish"},
	{storage.FinalizerExternalProvisioner, "the external provisioner removes it once it has deleted the backing storage; wait for it, or fix the provisioner if it is stuck"},
}

func pvg012ProtectionFinalizers() Rule {
	return Rule{
		ID:      "PVG012",
		Name:    "protection-finalizers",
		Default: ActionDeny,
		Judges:  JudgesChange,
		Kinds:   []Kind{KindPersistentVolume, KindPersistentVolumeClaim},
		Reads:   []Kind{KindPersistentVolumeClaim},
		Summary: "protection finalizers stay on a volume or claim in use unless the controllers that own them remove them; a volume being deleted that no live claim is linked to is no longer in use",
		CEL: []CELForm{{
			Kind: KindPersistentVolume, Operations: []Operation{OperationUpdate}, Status: true, ExemptControllers: true,
			Refuses: celProtectionRemoved(true) + " && " + celVolumeInUse() + " && !has(oldObject.metadata.deletionTimestamp)",
			Message: "'[PVG012 protection-finalizers] ' + request.userInfo.username + ' removed a protection finalizer from PersistentVolume ' + object.metadata.name + " +
				"', which is in use; its controller removes it once the volume is no longer in use'",
			Weaker: "a volume being deleted is not judged: whether a live claim still holds it needs that claim",
		}, {
			Kind: KindPersistentVolumeClaim, Operations: []Operation{OperationUpdate}, Status: true, ExemptControllers: true,
			Refuses: celProtectionRemoved(false) + " && (" + celVolumeName("oldObject") + " != '' || " + celPhase("oldObject") + " == 'Bound')",
			Message: "'[PVG012 protection-finalizers] ' + request.userInfo.username + ' removed a protection finalizer from PersistentVolumeClaim ' + " +
				"object.metadata.namespace + '/' + object.metadata.name + ', which is bound; its controller removes it once the claim is no longer in use'",
		}},
		Check: func(r *Review, v View, c *Config) ([]Finding, error) {
			if r.Operation != OperationUpdate || c.IsController(r.User) {
				return nil, nil
			}
			old, cur := reviewMeta(r)
			// Most updates keep every finalizer; the in-use description is built only for
			// those that drop one.
			if !slices.ContainsFunc(protectionFinalizers, func(pf protectionFinalizer) bool { return finalizerRemoved(old, cur, pf.Name) }) {
				return nil, nil
			}
			var use Text
			var inUse bool
			switch r.Kind {
			case KindPersistentVolume:
				use, inUse = volumeInUse(r.OldPV)
				// Who may remove a finalizer cannot always be known in advance (an external
				// provisioner's identity is the installer's choice), so the state decides: a
				// volume being deleted that no live claim holds (linked with its uid and not
				// gone to another volume) has nothing left to protect, and its finalizers are
				// the last step of its deletion.
				if inUse && r.OldPV.DeletionTimestamp != nil {
					linked, err := boundClaim(r.OldPV, v)
					if err != nil {
						return nil, fmt.Errorf("reading the claim %s is linked to: %w", pvRef(r.OldPV), err)
					}
					inUse = linked != nil && !storage.Abandoned(linked, r.OldPV.Name)
				}
			case KindPersistentVolumeClaim:
				use, inUse = claimInUse(r.OldPVC)
			}
			if !inUse {
				return nil, nil
			}
			var out []Finding
			for _, pf := range protectionFinalizers {
				if !finalizerRemoved(old, cur, pf.Name) || protectsNothing(r, pf.Name) {
					continue
				}
				out = append(out, Finding{
					Field: "metadata.finalizers",
					Message: Textf("%s removed finalizer %s from %s, which is %s",
						Word(requester(r.User)), Word(pf.Name), r.Object(), use),
					Hint:  Plain(Word(pf.Hint)),
					fixes: pvg012Fixes(r, pf.Name),
				})
			}
			return out, nil
		},
		StatusReads: map[Kind][]string{KindPersistentVolume: {"phase"}, KindPersistentVolumeClaim: {"phase"}},
	}
}

// celProtectionRemoved is true when the write drops a protection finalizer that still protects
// something (protectsNothing, for a volume).
func celProtectionRemoved(volume bool) string {
	var any []string
	for _, pf := range protectionFinalizers {
		removed := celFinalizerRemoved(celQuote(pf.Name))
		if volume && pf.Name == storage.FinalizerExternalProvisioner {
			removed = "(" + removed + " && object.spec.persistentVolumeReclaimPolicy == 'Delete')"
		}
		any = append(any, removed)
	}
	return "(" + strings.Join(any, " || ") + ")"
}

// protectsNothing reports whether a finalizer guards nothing in the state the write leaves: the
// external provisioner's finalizer exists so that the storage of a volume with reclaim policy
// Delete is deleted before the volume object is; under Retain or Recycle nobody deletes that
// storage, and the provisioner itself removes the finalizer when a volume's policy becomes one of
// them (sig-storage-lib-external-provisioner, handleProtectionFinalizer).
func protectsNothing(r *Review, finalizer string) bool {
	return finalizer == storage.FinalizerExternalProvisioner && r.Kind == KindPersistentVolume &&
		r.PV.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete
}

// pvg012Fixes are the writes a finalizer's hint names that pvguard's objects can carry: for
// pv-protection, deleting the claim bound to the volume. The others name a wait, or pods.
func pvg012Fixes(r *Review, finalizer string) []Fix {
	if finalizer != storage.FinalizerPVProtection || r.OldPV == nil || r.OldPV.Spec.ClaimRef == nil {
		return nil
	}
	return []Fix{{Writes: []Write{{Object: claimRefOf(r.OldPV.Spec.ClaimRef), Delete: true}}}}
}
