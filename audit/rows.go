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
	r, err := volumeRow(pv, v)
	return r.binding(pv.Name), err
}

// row is what an object's dashboard row is made of, kept per object between audits in place of
// the row itself: a volume's binding row (Binding) holds a pointer and two Texts with arguments,
// five allocations more than these fields, which name strings the cached object already holds.
// binding and pending make the rows, the same each time.
type row struct {
	// phase, class and size are a volume's phase, class and capacity, or a claim's phase, class
	// and request.
	phase, class, size string
	// reclaim is a volume's reclaim policy.
	reclaim string
	// claimNamespace, claimName and claimPhase are the claim a volume's claimRef names and that
	// claim's phase, when claimRef is set (hasClaimRef).
	claimNamespace, claimName, claimPhase string
}

// hasClaimRef says whether the volume whose row r is has a claimRef: claimPhase is "missing" for
// one that names no claim, and a claimRef that names one has a name (no flag then: seven strings
// fit the allocator's 112-byte class, a flag more takes 128 bytes).
func (r row) hasClaimRef() bool { return r.claimPhase != "" || r.claimName != "" }

// volumeRow is a volume's row: the claim it points at and that claim's phase ("missing" when the
// claim is gone or was re-created).
func volumeRow(pv *corev1.PersistentVolume, v policy.View) (row, error) {
	r := row{phase: string(pv.Status.Phase), class: storage.VolumeClass(pv), reclaim: string(pv.Spec.PersistentVolumeReclaimPolicy)}
	if q, ok := pv.Spec.Capacity[corev1.ResourceStorage]; ok {
		r.size = q.String()
	}
	ref := pv.Spec.ClaimRef
	if ref == nil {
		return r, nil
	}
	r.claimNamespace, r.claimName = ref.Namespace, ref.Name
	phase, err := claimPhase(ref, v)
	r.claimPhase = phase
	if err != nil {
		return r, fmt.Errorf("reading the claim of %s: %w", pv.Name, err)
	}
	return r, nil
}

// binding is the binding row of the volume named name whose row r is.
func (r row) binding(name string) Binding {
	b := Binding{Volume: name, VolumePhase: r.phase, Capacity: r.size, Class: r.class, ReclaimPolicy: r.reclaim}
	if !r.hasClaimRef() {
		return b
	}
	claim := policy.ObjectRef{Kind: policy.KindPersistentVolumeClaim, Namespace: r.claimNamespace, Name: r.claimName}
	b.ClaimRef, b.Claim = &claim, policy.Textf("%s", policy.NameOf(claim))
	b.ClaimPhase = policy.Textf("%s", policy.Either(claim, policy.Plain(policy.Word(r.claimPhase)), policy.Text{}))
	return b
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
	r, ok := claimRow(c)
	return r.pending(c.Namespace, c.Name), ok
}

// claimRow is the row of a claim not bound (pendingOf), false for a bound one.
func claimRow(c *corev1.PersistentVolumeClaim) (row, bool) {
	if _, done := c.Annotations[storage.AnnBindCompleted]; done && c.Status.Phase == corev1.ClaimBound {
		return row{}, false
	}
	r := row{phase: string(c.Status.Phase), class: storage.ClaimClass(c)}
	if q, ok := c.Spec.Resources.Requests[corev1.ResourceStorage]; ok {
		r.size = q.String()
	}
	return r, true
}

// pending is the pending row of the claim namespace/name whose row r is.
func (r row) pending(namespace, name string) PendingClaim {
	return PendingClaim{Namespace: namespace, Name: name, Phase: r.phase, Class: r.class, Request: r.size}
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
