package explain

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/pvguard/pvguard/binder"
	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/storage"
)

// ErrUnknownVolume is returned for a volume that is not in the input.
var ErrUnknownVolume = errors.New("no such PersistentVolume")

// VolumeExplanation is the stable shape of `pvguard explain pv -o json` (docs/explain.md).
type VolumeExplanation struct {
	Volume string `json:"volume"`
	Phase  string `json:"phase"`
	// Since is when the volume entered its phase (status.lastPhaseTransitionTime), if known.
	Since         *time.Time `json:"since,omitempty"`
	ReclaimPolicy string     `json:"reclaimPolicy"`
	// Claim names the claim (namespace/name) the volume is bound or pre-bound to; ClaimState says
	// which, and whether that claim exists.
	Claim      string `json:"claim,omitempty"`
	ClaimState string `json:"claimState,omitempty"`
	// Next says what the binder does next with the volume (binder.DecideVolume).
	Next       string      `json:"next"`
	Finalizers []Finalizer `json:"finalizers,omitempty"`
	// Findings are the audit's findings on the volume, as `pvguard audit` prints them.
	Findings []string `json:"findings,omitempty"`
}

// Finalizer is one of the volume's finalizers, who holds it and what it waits for.
type Finalizer struct {
	Name     string `json:"name"`
	Holder   string `json:"holder"`
	WaitsFor string `json:"waitsFor"`
}

// knownFinalizers are the finalizers of volumes that Kubernetes' own controllers and the CSI
// sidecars hold.
var knownFinalizers = map[string]Finalizer{
	"kubernetes.io/pv-protection": {Holder: "kube-controller-manager's pv-protection controller",
		WaitsFor: "nothing until the volume is deleted; then for it not to be Bound to a claim"},
	"kubernetes.io/pv-controller": {Holder: "the PersistentVolume binder (pvguard's or kube-controller-manager's)",
		WaitsFor: "nothing until the volume is deleted; then for its storage to be deleted, or its reclaim policy to become Retain"},
	"external-provisioner.volume.kubernetes.io/finalizer": {Holder: "the CSI external-provisioner of the volume's driver",
		WaitsFor: "nothing until the volume is deleted; then for the provisioner to delete its storage (reclaim policy Delete)"},
}

// Volume explains the volume of that name: its phase and since when, its claim, what the binder
// does next, its finalizers and the audit's findings on it (by policy's default config).
func Volume(in Input, name string, now time.Time) (*VolumeExplanation, error) {
	state := in.state()
	v, _ := state.PersistentVolume(name)
	if v == nil {
		return nil, fmt.Errorf("%w %s", ErrUnknownVolume, name)
	}
	e := &VolumeExplanation{Volume: name, Phase: string(v.Status.Phase), ReclaimPolicy: string(v.Spec.PersistentVolumeReclaimPolicy)}
	if t := v.Status.LastPhaseTransitionTime; t != nil {
		at := t.UTC()
		e.Since = &at
	}
	s := binder.VolumeState{Volume: v, ClaimConfirmed: true}
	if ref := v.Spec.ClaimRef; ref != nil {
		e.Claim = ref.Namespace + "/" + ref.Name
		s.Claim, _ = state.PersistentVolumeClaim(ref.Namespace, ref.Name)
		switch {
		case ref.UID == "":
			e.ClaimState = "pre-bound by name"
		case s.Claim == nil:
			e.ClaimState = "bound to a claim that no longer exists"
		case s.Claim.UID != ref.UID:
			e.ClaimState = "bound to an earlier claim of that name (uid " + string(ref.UID) + ")"
		default:
			e.ClaimState = "bound"
		}
		if ref.UID == "" && s.Claim == nil {
			e.ClaimState += "; the claim does not exist"
		}
	}
	e.Next = next(v, binder.DecideVolume(s))
	for _, f := range v.Finalizers {
		k, ok := knownFinalizers[f]
		switch {
		case ok:
		case strings.HasPrefix(f, "external-attacher/"):
			k = Finalizer{Holder: "the CSI external-attacher of driver " + strings.TrimPrefix(f, "external-attacher/"),
				WaitsFor: "the volume to be detached from every node"}
		default:
			k = Finalizer{Holder: "unknown", WaitsFor: "unknown"}
		}
		k.Name = f
		e.Finalizers = append(e.Finalizers, k)
	}
	engine := in.Policy
	if engine == nil {
		engine = policy.NewEngine(policy.DefaultConfig())
	}
	findings, err := engine.AuditObject(v, state, now)
	if err != nil {
		return nil, err
	}
	for _, f := range findings {
		e.Findings = append(e.Findings, f.String())
	}
	sort.Strings(e.Findings)
	return e, nil
}

// next says in a sentence what the binder's decision for the volume means.
func next(v *corev1.PersistentVolume, a binder.VolumeAction) string {
	var parts []string
	switch {
	case a.Reuse:
		parts = append(parts, "the binder clears its claimRef and makes it Available again ("+storage.AnnReuseWhenReleased+")")
	case a.Unbind:
		parts = append(parts, "the binder unbinds it: its claim is bound to another volume")
	case a.Phase != "" && a.Phase != v.Status.Phase:
		parts = append(parts, "the binder sets its phase to "+string(a.Phase))
	case a.EnqueueClaim:
		parts = append(parts, "the binder completes the binding from the claim's side")
	}
	if a.Message != "" {
		parts = append(parts, a.Message)
	}
	if a.Event != nil {
		parts = append(parts, a.Event.Reason+": "+a.Event.Message)
	}
	if len(parts) == 0 {
		switch {
		case v.Status.Phase == corev1.VolumeReleased && v.Spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimRetain:
			return "nothing: reclaim policy Retain keeps it Released until someone deletes it or clears its claimRef (or sets " + storage.AnnReuseWhenReleased + "=true)"
		case v.Status.Phase == corev1.VolumeReleased && v.Spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimDelete:
			return "nothing from the binder: its external provisioner is to delete the storage and the volume"
		}
		return "nothing: the binder leaves it as it is"
	}
	return strings.Join(parts, "; ")
}
