package policy

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/pvguard/pvguard/storage"
)

// Binding vocabulary shared by the rules.
//
// A binding has two halves: the volume's spec.claimRef naming the claim, and the claim's
// spec.volumeName naming the volume. The upstream binder writes them in four steps (PV spec,
// PV status, PVC spec, PVC status), so each half appears on its own; the "at bind" rules fire on
// the write that creates or changes a half, and judge the pair it forms.

// bindPair is the volume and claim a write links together, plus the field that made the link.
type bindPair struct {
	PV    *corev1.PersistentVolume
	PVC   *corev1.PersistentVolumeClaim
	Field string
	// Subject is the object under review (either PV or PVC).
	Subject ObjectRef
}

// claimLinkChanged reports whether a claim write sets or changes spec.volumeName.
func claimLinkChanged(r *Review) bool {
	if r.Kind != KindPersistentVolumeClaim || r.PVC == nil || r.PVC.Spec.VolumeName == "" {
		return false
	}
	return r.OldPVC == nil || r.OldPVC.Spec.VolumeName != r.PVC.Spec.VolumeName
}

// LinksVolume reports whether the review is of a volume write that sets or changes the claim its
// spec.claimRef names (volumeLinkChanged): the writes the at-bind rules judge as a link.
func (r *Review) LinksVolume() bool { return volumeLinkChanged(r) }

// volumeLinkChanged reports whether a volume write sets or changes spec.claimRef's
// namespace, name or uid. Dropping only the uid is not a link: it is the upstream controller
// releasing a volume a user pre-bound, and the claim of that name is by then usually a new one,
// so judging it as a bind would refuse the controller's release.
func volumeLinkChanged(r *Review) bool {
	if r.Kind != KindPersistentVolume || r.PV == nil || r.PV.Spec.ClaimRef == nil {
		return false
	}
	if r.OldPV == nil || r.OldPV.Spec.ClaimRef == nil {
		return true
	}
	old, cur := r.OldPV.Spec.ClaimRef, r.PV.Spec.ClaimRef
	if cur.UID == "" && old.UID != "" && old.Namespace == cur.Namespace && old.Name == cur.Name {
		return false
	}
	return !storage.SameClaimRef(old, cur)
}

// newBinding resolves the pair a write links, or nil when the write links nothing or the other
// half does not exist yet. A volume whose claimRef uid is not the live claim's forms no pair:
// that is PVG002's finding, and the other rules would only repeat it. Within one evaluation
// (a memoView) the pair is resolved once and shared by the rules, which only read it.
func newBinding(r *Review, v View) (*bindPair, error) {
	m, ok := v.(*memoView)
	if !ok {
		b, found, err := resolveBinding(r, v)
		if !found {
			return nil, err
		}
		return &b, nil
	}
	if m.bindingOf == r {
		return m.binding, m.bindingErr
	}
	// The pair lives in the memo (every object of an audit resolves one: a heap object each,
	// otherwise), which the rules only read during the evaluation.
	b, found, err := resolveBinding(r, v)
	m.bindingOf, m.pair, m.binding, m.bindingErr = r, b, nil, err
	if found {
		m.binding = &m.pair
	}
	return m.binding, err
}

// resolveBinding is the pair r's write links, found false when it links none.
func resolveBinding(r *Review, v View) (bindPair, bool, error) {
	switch {
	case claimLinkChanged(r):
		pv, err := v.PersistentVolume(r.PVC.Spec.VolumeName)
		if err != nil {
			return bindPair{}, false, fmt.Errorf("reading the volume %s names: %w", r.Object(), err)
		}
		if pv == nil {
			return bindPair{}, false, nil
		}
		return bindPair{PV: pv, PVC: r.PVC, Field: "spec.volumeName", Subject: pvcRef(r.PVC)}, true, nil
	case volumeLinkChanged(r):
		ref := r.PV.Spec.ClaimRef
		pvc, err := namedClaim(ref, v)
		if err != nil {
			return bindPair{}, false, fmt.Errorf("reading the claim %s names: %w", r.Object(), err)
		}
		if pvc == nil {
			return bindPair{}, false, nil
		}
		if ref.UID != "" && ref.UID != pvc.UID {
			return bindPair{}, false, nil
		}
		return bindPair{PV: r.PV, PVC: pvc, Field: "spec.claimRef", Subject: pvRef(r.PV)}, true, nil
	}
	return bindPair{}, false, nil
}

// boundClaim returns the live claim an existing volume is bound to (claimRef with a uid that
// matches the live claim), for the rules that protect a binding after it is made.
func boundClaim(pv *corev1.PersistentVolume, v View) (*corev1.PersistentVolumeClaim, error) {
	ref := pv.Spec.ClaimRef
	if ref == nil || ref.UID == "" {
		return nil, nil
	}
	pvc, err := namedClaim(ref, v)
	if err != nil || pvc == nil || pvc.UID != ref.UID {
		return nil, err
	}
	return pvc, nil
}

// namedClaim reads the claim a claimRef names by namespace and name, or nil when there is none.
// Every rule reads a claimRef's claim through it: a claimRef without a name or a namespace
// names no claim, and reading one would not find nothing but fail (the webhook's live read is
// refused: "resource name may not be empty"), turning a malformed link into an error instead of
// PVG014's finding.
func namedClaim(ref *corev1.ObjectReference, v View) (*corev1.PersistentVolumeClaim, error) {
	if !storage.NamesAClaim(ref) {
		return nil, nil
	}
	return v.PersistentVolumeClaim(ref.Namespace, ref.Name)
}
