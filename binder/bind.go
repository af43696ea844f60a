package binder

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/storage"
)

// forbidTTL is how long a pair that policy denied is kept out of plans; after it the pair is
// tried again, in case the policy config changed.
const forbidTTL = time.Minute

// bind performs upstream's four bind writes in upstream's order: PV spec, PV status, PVC spec,
// PVC status. Each write is skipped when the object already says what it would write, so a bind
// interrupted between any two writes (a crash, a conflict) is completed by the next sync, and a
// repeated bind writes nothing. Every spec write is first judged by policy as the webhook would.
func (b *Binder) bind(ctx context.Context, v *corev1.PersistentVolume, claim *corev1.PersistentVolumeClaim) error {
	if bindDone(v, claim) {
		// Every sync of a bound pair decides this bind (as upstream's syncBoundClaim re-checks
		// the pair): with nothing to write it must not reserve the volume, or the reservation
		// would outlive the bind until the volume's next sync, and plans and explanations would
		// see a bind in flight that ended long ago.
		b.ledger.bindCompleted(claim.UID)
		return nil
	}
	start, ok := b.ledger.beginBind(v.Name, claim.UID, time.Now())
	if !ok {
		b.requestPlan() // another claim's bind of this volume, or its Available write, is in flight
		return nil
	}
	defer b.ledger.endBind(v.Name)

	if !linkedTo(v, claim) || !completedOn(claim, v) {
		// Judge the pair before the first write, so a denial never leaves half a binding.
		if denied, err := b.denied(ctx, v, claim); denied || err != nil {
			return err
		}
	}
	wrote, err := b.bindWrites(ctx, v, claim)
	if err != nil {
		return fmt.Errorf("binding claim %s/%s to volume %s: %w", claim.Namespace, claim.Name, v.Name, err)
	}
	b.ledger.bindCompleted(claim.UID)
	if wrote {
		b.metrics.binds.Inc()
		b.metrics.bindLatency.Observe(time.Since(start).Seconds())
		b.o.Log.V(1).Info("bound", "claim", claim.Namespace+"/"+claim.Name, "volume", v.Name)
	}
	return nil
}

// bindWrites makes those of the four bind writes that the objects do not say yet, in order, and
// reports whether it made any.
func (b *Binder) bindWrites(ctx context.Context, v *corev1.PersistentVolume, claim *corev1.PersistentVolumeClaim) (wrote bool, err error) {
	if !linkedTo(v, claim) {
		nv := linkVolume(v, claim)
		if err := b.write("bind-1-volume-spec", nv, func() error { return b.update(ctx, v, nv) }); err != nil {
			b.unreserve(v.Name, claim.UID)
			return wrote, err
		}
		v, wrote = nv, true
	}
	if v.Status.Phase != corev1.VolumeBound {
		nv := boundVolume(v)
		if err := b.write("bind-2-volume-status", nv, func() error { return b.updateStatus(ctx, v, nv) }); err != nil {
			return wrote, err
		}
		v, wrote = nv, true
	}
	if !completedOn(claim, v) {
		nc := completeClaim(claim, v)
		if err := b.write("bind-3-claim-spec", nc, func() error { return b.update(ctx, claim, nc) }); err != nil {
			return wrote, err
		}
		claim, wrote = nc, true
	}
	if claim.Status.Phase != corev1.ClaimBound || !slices.Equal(claim.Status.AccessModes, v.Spec.AccessModes) {
		nc := boundClaim(claim, v)
		if err := b.write("bind-4-claim-status", nc, func() error { return b.updateStatus(ctx, claim, nc) }); err != nil {
			return wrote, err
		}
		wrote = true
	}
	return wrote, nil
}

// bindDone reports whether the objects already say all that the four bind writes would.
func bindDone(v *corev1.PersistentVolume, claim *corev1.PersistentVolumeClaim) bool {
	return linkedTo(v, claim) && v.Status.Phase == corev1.VolumeBound && completedOn(claim, v) &&
		claim.Status.Phase == corev1.ClaimBound && slices.Equal(claim.Status.AccessModes, v.Spec.AccessModes)
}

// linkedTo reports whether the volume's claimRef names the claim with its uid.
func linkedTo(v *corev1.PersistentVolume, claim *corev1.PersistentVolumeClaim) bool {
	ref := v.Spec.ClaimRef
	return ref != nil && ref.Namespace == claim.Namespace && ref.Name == claim.Name && ref.UID == claim.UID
}

// completedOn reports whether the claim names the volume and says its binding is complete.
func completedOn(claim *corev1.PersistentVolumeClaim, v *corev1.PersistentVolume) bool {
	_, completed := claim.Annotations[storage.AnnBindCompleted]
	return completed && claim.Spec.VolumeName == v.Name
}

// linkVolume is the first write: the volume's claimRef, with bound-by-controller unless the user
// pre-bound the volume to the claim.
func linkVolume(v *corev1.PersistentVolume, claim *corev1.PersistentVolumeClaim) *corev1.PersistentVolume {
	nv := v.DeepCopy()
	if !storage.ClaimRefNames(v, claim) {
		setAnn(&nv.ObjectMeta, storage.AnnBoundByController, "yes")
	}
	nv.Spec.ClaimRef = &corev1.ObjectReference{
		Kind: "PersistentVolumeClaim", APIVersion: "v1",
		Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID, ResourceVersion: claim.ResourceVersion,
	}
	return nv
}

// boundVolume is the second write: the volume's status.
func boundVolume(v *corev1.PersistentVolume) *corev1.PersistentVolume {
	nv := v.DeepCopy()
	nv.Status.Phase, nv.Status.Message = corev1.VolumeBound, ""
	return nv
}

// completeClaim is the third write: the claim's volumeName and bind-completed, with
// bound-by-controller when the binder chose the volume.
func completeClaim(claim *corev1.PersistentVolumeClaim, v *corev1.PersistentVolume) *corev1.PersistentVolumeClaim {
	nc := claim.DeepCopy()
	if nc.Spec.VolumeName == "" {
		setAnn(&nc.ObjectMeta, storage.AnnBoundByController, "yes")
	}
	nc.Spec.VolumeName = v.Name
	setAnn(&nc.ObjectMeta, storage.AnnBindCompleted, "yes")
	return nc
}

// boundClaim is the fourth write: the claim's status, with the volume's access modes.
func boundClaim(claim *corev1.PersistentVolumeClaim, v *corev1.PersistentVolume) *corev1.PersistentVolumeClaim {
	nc := claim.DeepCopy()
	if claim.Status.Phase != corev1.ClaimBound {
		// Capacity is set only when the claim becomes Bound: later differences can be a resize.
		nc.Status.Capacity = v.Spec.Capacity.DeepCopy()
		// So is the VolumeAttributesClass the claim now has, as upstream does: after that the
		// external-resizer owns the field, and it reads a claim whose spec names a class its
		// status does not as a modification to make.
		if vac := v.Spec.VolumeAttributesClassName; vac != nil {
			name := *vac
			nc.Status.CurrentVolumeAttributesClassName = &name
		} else {
			nc.Status.CurrentVolumeAttributesClassName = nil
		}
	}
	nc.Status.Phase = corev1.ClaimBound
	nc.Status.AccessModes = v.Spec.AccessModes
	return nc
}

// denied asks policy about the binding the binder is about to make (BindDenials). A denial is
// not an error: the binder records it on the claim, keeps the pair out of plans for a while and
// looks elsewhere.
func (b *Binder) denied(ctx context.Context, v *corev1.PersistentVolume, claim *corev1.PersistentVolumeClaim) (bool, error) {
	denials, err := BindDenials(b.o.Engine(), b.o.Identity, b.o.Views(ctx), v, claim)
	if err != nil {
		b.unreserve(v.Name, claim.UID)
		return false, err
	}
	if len(denials) == 0 {
		return false, nil
	}
	// The event is read by whoever may read the claim's namespace's events: it names only what
	// they may read (the claims there, the volumes that are the namespace's).
	readers := policy.NamespaceReaders(claim.Namespace, b.o.Views(ctx), b.o.Engine().Config())
	msgs := make([]string, len(denials))
	for i, f := range denials {
		msgs[i] = f.For(readers)
	}
	b.metrics.policyDenials.Inc()
	b.o.Recorder.Event(claim, corev1.EventTypeWarning, ReasonPolicyForbidsBinding,
		fmt.Sprintf("pvguard did not bind %s: %s", volumeFor(readers, v.Name), strings.Join(msgs, "; ")))
	b.ledger.deny(claim.UID, v.Name, time.Now())
	b.requestPlan()
	b.queue.Add(key{kind: 'v', name: v.Name}) // its Available write may have waited for the bind
	return true, nil
}

// BindDenials is what policy denies of binding claim to v, as the binder (identity) would bind
// them: each half of the binding judged as the webhook would judge it written afresh, the
// volume's claimRef set from nothing (unless it already links the claim with its uid), and the
// claim's volumeName and bind-completed set from
// nothing. (Judging only the literal writes would let through a claim that named a volume before
// pvguard was installed: its volumeName does not change.) view holds the objects as they are.
// The binder asks it before its first bind write; `pvguard explain` asks it of each candidate
// pair, so its policy column is the binder's own judgement. An error means policy could not
// judge the pair; the findings are those of the rules that could.
func BindDenials(engine *policy.Engine, identity policy.UserInfo, view policy.View, v *corev1.PersistentVolume, claim *corev1.PersistentVolumeClaim) ([]policy.Finding, error) {
	return NewBindJudge(engine, identity, view, claim).Denials(v)
}

// BindJudge judges the binds of one claim to one volume after another, as BindDenials does, on
// copies it keeps and overwrites: an explanation judges its claim against every volume that fits
// it, thousands at 100,000 pairs, and copies made afresh for each pair were most of what a
// question allocated. The copies are shallow, with only the fields a bind writes replaced (the
// claimRef, the volume name, the annotation map when the bind changes it): policy never modifies
// what it judges (FuzzAdmit), and its findings name objects by reference, never pointing into
// them. A BindJudge is not safe for concurrent use.
type BindJudge struct {
	engine     *policy.Engine
	identity   policy.UserInfo
	view       policy.View
	claim      *corev1.PersistentVolumeClaim
	ref        corev1.ObjectReference
	oldC, newC corev1.PersistentVolumeClaim
	oldV, newV corev1.PersistentVolume
	pv, pvc    policy.Review
}

// NewBindJudge returns the judge of claim's binds as identity, over view (the objects as they
// are).
func NewBindJudge(engine *policy.Engine, identity policy.UserInfo, view policy.View, claim *corev1.PersistentVolumeClaim) *BindJudge {
	j := &BindJudge{engine: engine, identity: identity, view: view, claim: claim,
		ref: corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID}}
	// The claim half is judged from nothing: no volume name and no bind-completed before,
	// both after.
	j.oldC, j.newC = *claim, *claim
	j.oldC.Spec.VolumeName = ""
	j.oldC.Annotations = withoutAnn(claim.Annotations, storage.AnnBindCompleted)
	j.newC.Annotations = withAnn(claim.Annotations, storage.AnnBindCompleted, "yes")
	return j
}

// Claim is the claim whose binds j judges.
func (j *BindJudge) Claim() *corev1.PersistentVolumeClaim { return j.claim }

// Denials is BindDenials of the judge's claim and volume v.
func (j *BindJudge) Denials(v *corev1.PersistentVolume) ([]policy.Finding, error) {
	claim := j.claim
	// A volume already linked to the claim with its uid needs no volume write: that link was
	// judged when it was written (a populator's hand-off, the scheduler's choice, a provisioner's
	// save), as upstream's binder takes it as it is. The claim half is still judged from nothing.
	oldV, newV := v, v
	if !linkedTo(v, claim) {
		j.oldV, j.newV = *v, *v
		j.oldV.Spec.ClaimRef = nil
		j.newV.Spec.ClaimRef = &j.ref
		oldV, newV = &j.oldV, &j.newV
	}
	j.newC.Spec.VolumeName = v.Name
	// A volume the claim did not name is the binder's own choice: the claim half is judged as
	// the webhook judges the binder's claim write, after the volume write has pointed the volume
	// at the claim, or volume-grab (PVG010) set to deny would refuse every such binding. A claim
	// that named its volume is judged against the volume as it is, so a grab is still refused.
	claimView := j.view
	if claim.Spec.VolumeName == "" {
		claimView = withVolume{View: j.view, pv: newV}
	}
	j.pv = policy.Review{Kind: policy.KindPersistentVolume, Operation: policy.OperationUpdate, User: j.identity, PV: newV, OldPV: oldV}
	j.pvc = policy.Review{Kind: policy.KindPersistentVolumeClaim, Operation: policy.OperationUpdate, User: j.identity, PVC: &j.newC, OldPVC: &j.oldC}
	var denials []policy.Finding
	for _, r := range []struct {
		review *policy.Review
		view   policy.View
	}{{&j.pv, j.view}, {&j.pvc, claimView}} {
		d, err := j.engine.Admit(r.review, r.view)
		denials = append(denials, d.Deny...)
		if err != nil {
			return denials, fmt.Errorf("asking policy about binding claim %s/%s to volume %s: %w", claim.Namespace, claim.Name, v.Name, err)
		}
	}
	return denials, nil
}

// withVolume is a policy view in which one volume is as the binder is about to write it.
type withVolume struct {
	policy.View
	pv *corev1.PersistentVolume
}

func (w withVolume) PersistentVolume(name string) (*corev1.PersistentVolume, error) {
	if name == w.pv.Name {
		return w.pv, nil
	}
	return w.View.PersistentVolume(name)
}

// unreserve drops a reservation after a bind failed, and syncs the volume: its Available write
// (markAvailable) may have waited for the bind.
func (b *Binder) unreserve(volume string, claim types.UID) {
	if b.ledger.unreserve(volume, claim) {
		b.queue.Add(key{kind: 'v', name: volume})
	}
}

// Identity is the user the binder writes as, which policy judges its binds as (BindDenials).
func (b *Binder) Identity() policy.UserInfo { return b.o.Identity }

// UpstreamBinderIdentity is the user of kube-controller-manager's PersistentVolume controller,
// the binder when pvguard's is off: the webhook judges its bind writes as this user.
var UpstreamBinderIdentity = policy.UserInfo{
	Username: serviceaccount.MakeUsername("kube-system", "persistent-volume-binder"),
	Groups:   append(serviceaccount.MakeGroupNames("kube-system"), user.AllAuthenticated),
}

// volumeFor names the volume `volume "pv-1"` to readers who may be told its name (the claim
// names it, or it is their namespace's), else says what it is.
func volumeFor(readers policy.Audience, name string) string {
	if readers.Names(policy.ObjectRef{Kind: policy.KindPersistentVolume, Name: name}) {
		return fmt.Sprintf("volume %q", name)
	}
	return policy.HiddenVolume
}
