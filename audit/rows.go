package audit

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/pvguard/pvguard/clusterstate"
	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/storage"
)

// The rows of the dashboard's tables beside the findings: each volume with the claim it points
// at, and the claims not bound. The runner keeps them per object as it audits (Runner.Bindings,
// Runner.Pending); BindingsOf and PendingOf make them of a cluster state (`pvguard audit -o html`).

// Binding is one row of the dashboard's PV <-> PVC table.
type Binding struct {
	Volume, VolumePhase, Capacity, Class, ReclaimPolicy string
	// ClaimRef is the claim the volume points at (spec.claimRef), nil for none. Claim names it
	// and ClaimPhase is its phase, both rendered per reader (policy.Redact): a reader who may not
	// read the claim is told "a claim in another namespace", and no phase.
	ClaimRef          *policy.ObjectRef
	Claim, ClaimPhase policy.Text
}

// bindingOf is a volume's row: the claim it points at and that claim's phase ("missing" when the
// claim is gone or was re-created).
func bindingOf(pv *corev1.PersistentVolume, v policy.View) (Binding, error) {
	b := Binding{Volume: pv.Name, VolumePhase: string(pv.Status.Phase), Class: storage.VolumeClass(pv),
		ReclaimPolicy: string(pv.Spec.PersistentVolumeReclaimPolicy)}
	if q, ok := pv.Spec.Capacity[corev1.ResourceStorage]; ok {
		b.Capacity = q.String()
	}
	ref := pv.Spec.ClaimRef
	if ref == nil {
		return b, nil
	}
	claim := policy.ObjectRef{Kind: policy.KindPersistentVolumeClaim, Namespace: ref.Namespace, Name: ref.Name}
	b.ClaimRef, b.Claim = &claim, policy.Textf("%s", policy.NameOf(claim))
	phase, err := claimPhase(ref, v)
	b.ClaimPhase = policy.Textf("%s", policy.Either(claim, policy.Plain(policy.Word(phase)), policy.Text{}))
	if err != nil {
		return b, fmt.Errorf("reading the claim of %s: %w", pv.Name, err)
	}
	return b, nil
}

// claimPhase is the phase of the claim ref names, "missing" when it is gone or was re-created.
func claimPhase(ref *corev1.ObjectReference, v policy.View) (string, error) {
	if !storage.NamesAClaim(ref) {
		return "missing", nil
	}
	pvc, err := v.PersistentVolumeClaim(ref.Namespace, ref.Name)
	if err != nil || pvc == nil || ref.UID != "" && ref.UID != pvc.UID {
		return "missing", err
	}
	return string(pvc.Status.Phase), nil
}

// PendingClaim is one row of the dashboard's pending claims: a claim not bound.
type PendingClaim struct {
	Namespace, Name, Phase, Class, Request string
}

// pendingOf is the claim's pending row, unless it is bound: Bound and bind-completed, as the
// binders leave a claim whose binding they finished.
func pendingOf(c *corev1.PersistentVolumeClaim) (PendingClaim, bool) {
	if _, done := c.Annotations[storage.AnnBindCompleted]; done && c.Status.Phase == corev1.ClaimBound {
		return PendingClaim{}, false
	}
	p := PendingClaim{Namespace: c.Namespace, Name: c.Name, Phase: string(c.Status.Phase), Class: storage.ClaimClass(c)}
	if q, ok := c.Spec.Resources.Requests[corev1.ResourceStorage]; ok {
		p.Request = q.String()
	}
	return p, true
}

// PendingOf lists the claims of a cluster state that are not bound, by namespace and name.
func PendingOf(s *clusterstate.State) []PendingClaim {
	var out []PendingClaim
	for _, c := range s.Claims() {
		if p, ok := pendingOf(c); ok {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// BindingsOf lists every volume of a cluster state with the claim it points at, by volume name.
func BindingsOf(s *clusterstate.State) []Binding {
	out := make([]Binding, 0, len(s.Volumes()))
	for _, pv := range s.Volumes() {
		b, _ := bindingOf(pv, s) // a state's lookups cannot fail
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Volume < out[j].Volume })
	return out
}
