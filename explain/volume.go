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

// VolumeExplanation is the stable shape of `pvguard explain pv -o json` (docs/explain.md). Every
// field that refers to another object, or says what the volume's claim is, is a policy.Text:
// served to a caller, it is rendered for them (volumeForReader), and each renders to a string.
type VolumeExplanation struct {
	Volume string `json:"volume"`
	Phase  string `json:"phase"`
	// Since is when the volume entered its phase (status.lastPhaseTransitionTime), if known.
	Since         *time.Time `json:"since,omitempty"`
	ReclaimPolicy string     `json:"reclaimPolicy"`
	// Claim names the claim (namespace/name) the volume is bound or pre-bound to; ClaimState says
	// which, and whether that claim exists. A caller who may not read the claim is told "a claim
	// in another namespace", and of its state only what the volume itself says.
	Claim      policy.Text `json:"claim,omitzero"`
	ClaimState policy.Text `json:"claimState,omitzero"`
	// ClaimRef is the claim Claim names, for the page's link: cleared of its name for a caller
	// who may not read it.
	ClaimRef *policy.ObjectRef `json:"-"`
	// Next says what the binder does next with the volume (binder.DecideVolume). It depends on
	// the claim's state, so a caller who may not read the claim is told only that.
	Next       policy.Text `json:"next"`
	Finalizers []Finalizer `json:"finalizers,omitempty"`
	// Findings are the audit's findings on the volume, as `pvguard audit` prints them.
	Findings []policy.Text `json:"findings,omitempty"`
}

// Finalizer is one of the volume's finalizers, who holds it and what it waits for.
type Finalizer struct {
	Name     string      `json:"name"`
	Holder   string      `json:"holder"`
	WaitsFor policy.Text `json:"waitsFor"`
}

// NextHidden is what a volume's explanation says the binder does next to a caller who may not
// read the volume's claim: the binder's decision depends on that claim's state.
const NextHidden = "what the binder does next depends on the state of its claim, which you cannot read"

// knownFinalizers are the finalizers of volumes that Kubernetes' own controllers and the CSI
// sidecars hold.
var knownFinalizers = map[string]Finalizer{
	"kubernetes.io/pv-protection": {Holder: "kube-controller-manager's pv-protection controller",
		WaitsFor: policy.Plain("nothing until the volume is deleted; then for it not to be Bound to a claim")},
	"kubernetes.io/pv-controller": {Holder: "the PersistentVolume binder (pvguard's or kube-controller-manager's)",
		WaitsFor: policy.Plain("nothing until the volume is deleted; then for its storage to be deleted, or its reclaim policy to become Retain")},
	"external-provisioner.volume.kubernetes.io/finalizer": {Holder: "the CSI external-provisioner of the volume's driver",
		WaitsFor: policy.Plain("nothing until the volume is deleted; then for the provisioner to delete its storage (reclaim policy Delete)")},
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
		claim := policy.ObjectRef{Kind: policy.KindPersistentVolumeClaim, Namespace: ref.Namespace, Name: ref.Name}
		e.Claim, e.ClaimRef = policy.Textf("%s", policy.NameOf(claim)), &claim
		s.Claim, _ = state.PersistentVolumeClaim(ref.Namespace, ref.Name)
		// What the volume itself says (its claimRef, which a reader of the volume reads), and
		// what only the claim says: whether it exists, and under which uid.
		var known, read policy.Text
		switch {
		case ref.UID == "":
			known = policy.Plain("pre-bound by name")
			read = known
			if s.Claim == nil {
				read = policy.Plain("pre-bound by name; the claim does not exist")
			}
		case s.Claim == nil:
			known, read = policy.Plain("bound"), policy.Plain("bound to a claim that no longer exists")
		case s.Claim.UID != ref.UID:
			known = policy.Plain("bound")
			read = policy.Textf("bound to an earlier claim of that name (uid %s)", policy.UID(claim, ref.UID))
		default:
			known, read = policy.Plain("bound"), policy.Plain("bound")
		}
		e.ClaimState = policy.Textf("%s", policy.Either(claim, read, known))
	}
	e.Next = next(v, binder.DecideVolume(s))
	if e.ClaimRef != nil {
		e.Next = policy.Textf("%s", policy.Either(*e.ClaimRef, e.Next, policy.Plain(NextHidden)))
	}
	for _, f := range v.Finalizers {
		k, ok := knownFinalizers[f]
		switch {
		case ok:
		case strings.HasPrefix(f, "external-attacher/"):
			k = Finalizer{Holder: "the CSI external-attacher of driver " + strings.TrimPrefix(f, "external-attacher/"),
				WaitsFor: policy.Plain("the volume to be detached from every node")}
		default:
			k = Finalizer{Holder: "unknown", WaitsFor: policy.Plain("unknown")}
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
	sort.Slice(findings, func(i, j int) bool { return findings[i].String() < findings[j].String() })
	for _, f := range findings {
		e.Findings = append(e.Findings, f.Text())
	}
	return e, nil
}

// next says in a sentence what the binder's decision for the volume means. The binder's messages
// about a volume name no object but the volume and its own claim (spec.claimRef), and Volume
// shows the sentence only to a caller who may read that claim.
func next(v *corev1.PersistentVolume, a binder.VolumeAction) policy.Text {
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
			return policy.Plain("nothing: reclaim policy Retain keeps it Released until someone deletes it or clears its claimRef (or sets " + storage.AnnReuseWhenReleased + "=true)")
		case v.Status.Phase == corev1.VolumeReleased && v.Spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimDelete:
			return policy.Plain("nothing from the binder: its external provisioner is to delete the storage and the volume")
		}
		return policy.Plain("nothing: the binder leaves it as it is")
	}
	return policy.Plain(policy.Word(strings.Join(parts, "; ")))
}
