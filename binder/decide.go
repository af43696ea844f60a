package binder

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/pvguard/pvguard/storage"
)

// The binder's decisions are pure functions of what it knows about one object. The loop reads
// the state from the cache (and, where the cache's word is not enough, from the apiserver), asks
// DecideClaim or DecideVolume, and carries out the returned action with idempotent writes.

// Event is an event to record on the object, with upstream's reasons.
type Event struct {
	Type, Reason, Message string
}

// Event reasons, as the upstream PersistentVolume controller records them.
const (
	ReasonFailedBinding        = "FailedBinding"
	ReasonVolumeMismatch       = "VolumeMismatch"
	ReasonWaitForFirstConsumer = "WaitForFirstConsumer"
	ReasonExternalProvisioning = "ExternalProvisioning"
	ReasonProvisioningFailed   = "ProvisioningFailed"
	ReasonClaimLost            = "ClaimLost"
	ReasonClaimMisbound        = "ClaimMisbound"
	ReasonVolumeFailedDelete   = "VolumeFailedDelete"
	ReasonVolumeFailedRecycle  = "VolumeFailedRecycle"
	// ReasonVolumeReused is pvguard's: a Released volume made Available by
	// storage.AnnReuseWhenReleased.
	ReasonVolumeReused = "VolumeReused"
	// ReasonPolicyForbidsBinding is pvguard's: the pair the binder chose is denied by policy.
	ReasonPolicyForbidsBinding = "PolicyForbidsBinding"
)

// ClaimState is what the binder knows about a claim.
type ClaimState struct {
	Claim *corev1.PersistentVolumeClaim
	// Volume is the volume spec.volumeName names, nil if absent (confirmed by a live read when
	// VolumeConfirmed is set).
	Volume          *corev1.PersistentVolume
	VolumeConfirmed bool
	// Class is the claim's StorageClass (nil when it has none or it does not exist) and
	// DefaultClass the cluster's default class.
	Class        *storagev1.StorageClass
	DefaultClass *storagev1.StorageClass
	// Planned reports whether the pool planner has considered this claim; Assigned is the
	// volume it chose, nil if none fits. The planner considers claims of Immediate classes only.
	Planned  bool
	Assigned *corev1.PersistentVolume
	// PreBound lists the volumes whose spec.claimRef names the claim. It is read for claims of a
	// WaitForFirstConsumer class, which the planner leaves alone: for them the binder only
	// completes a binding the scheduler (or a provisioner, or the user) began.
	PreBound []*corev1.PersistentVolume
	// Denied holds the volumes policy denied this claim less than forbidTTL ago. A volume already
	// pointed at the claim, or named by it, is not bound again while its denial stands: each try
	// would be denied again, and the claim and the volume, each waking the other's sync, would
	// spin.
	Denied map[string]bool
}

// ClaimAction is what to do for a claim. Zero fields mean nothing to do.
type ClaimAction struct {
	// Bind performs the four bind writes for the claim and this volume.
	Bind *corev1.PersistentVolume
	// Phase is the claim phase to set, with Event recorded only if the phase changes...
	Phase corev1.PersistentVolumeClaimPhase
	// ...while Event is recorded on every decision that carries it (as upstream does, the
	// recorder aggregates repeats).
	Event       *Event
	EventOnlyOn bool
	// SetClass gives a claim without a class the default class (retroactive default class).
	SetClass string
	// Provisioner annotates the claim for an external provisioner.
	Provisioner string
	// NeedPlan asks the pool planner to consider the claim; NeedLiveVolume asks for a live read
	// of the volume before deciding.
	NeedPlan       bool
	NeedLiveVolume bool
}

// DecideClaim decides what to do for one claim.
func DecideClaim(s ClaimState) ClaimAction {
	c := s.Claim
	if c.DeletionTimestamp != nil {
		return ClaimAction{}
	}
	if _, done := c.Annotations[storage.AnnBindCompleted]; done {
		return decideBoundClaim(s)
	}
	if c.Spec.VolumeName != "" {
		return decidePreboundClaim(s)
	}
	delayed := isDelayBinding(c, s.Class)
	switch {
	case delayed:
		// The scheduler binds free volumes to a WaitForFirstConsumer claim itself (it writes
		// the volume's claimRef once it has picked a node) and sets selected-node only to ask
		// for provisioning there. Binding a free volume here would race the scheduler for
		// volumes it reserved for other pods, or take a static volume while a provisioner
		// creates one; so, as upstream, only a volume already pointed at the claim is bound.
		if v := preBoundVolume(c, allowed(s.PreBound, s.Denied)); v != nil {
			return ClaimAction{Bind: v}
		}
	case !s.Planned:
		return ClaimAction{NeedPlan: true}
	case s.Assigned != nil:
		return ClaimAction{Bind: s.Assigned}
	}
	if !claimHasClass(c) && s.DefaultClass != nil {
		return ClaimAction{SetClass: s.DefaultClass.Name}
	}
	a := ClaimAction{Phase: corev1.ClaimPending}
	class := storage.ClaimClass(c)
	_, scheduled := c.Annotations[storage.AnnSelectedNode]
	switch {
	case delayed && !scheduled:
		a.Event = &Event{corev1.EventTypeNormal, ReasonWaitForFirstConsumer, "waiting for first consumer to be created before binding"}
	case class != "" && s.Class == nil:
		a.Event = &Event{corev1.EventTypeWarning, ReasonProvisioningFailed, fmt.Sprintf("storageclass.storage.k8s.io %q not found", class)}
	case class != "" && s.Class.Provisioner == storage.NoProvisioner:
		a.Event = &Event{corev1.EventTypeNormal, ReasonFailedBinding, fmt.Sprintf("no persistent volumes available for this claim and storage class %q cannot provision one", class)}
	case class != "":
		if c.Annotations[storage.AnnStorageProvisioner] != s.Class.Provisioner || c.Annotations[storage.AnnBetaStorageProvisioner] != s.Class.Provisioner {
			a.Provisioner = s.Class.Provisioner
		}
		a.Event = &Event{corev1.EventTypeNormal, ReasonExternalProvisioning, fmt.Sprintf(
			"Waiting for a volume to be created either by the external provisioner '%s' or manually by the system administrator. If volume creation is delayed, please verify that the provisioner is running and correctly registered.", s.Class.Provisioner)}
	default:
		a.Event = &Event{corev1.EventTypeNormal, ReasonFailedBinding, "no persistent volumes available for this claim and no storage class is set"}
	}
	return a
}

// allowed is volumes without those policy denied the claim.
func allowed(volumes []*corev1.PersistentVolume, denied map[string]bool) []*corev1.PersistentVolume {
	if len(denied) == 0 {
		return volumes
	}
	var out []*corev1.PersistentVolume
	for _, v := range volumes {
		if !denied[v.Name] {
			out = append(out, v)
		}
	}
	return out
}

// decidePreboundClaim handles a claim whose user named a volume in spec.volumeName.
func decidePreboundClaim(s ClaimState) ClaimAction {
	c, v := s.Claim, s.Volume
	switch {
	case v == nil || s.Denied[v.Name]:
		return ClaimAction{Phase: corev1.ClaimPending}
	case v.Spec.ClaimRef == nil:
		if err := storage.Satisfies(v, c); err != nil {
			return ClaimAction{Phase: corev1.ClaimPending, Event: &Event{corev1.EventTypeWarning, ReasonVolumeMismatch,
				fmt.Sprintf("Cannot bind to requested volume %q: %s", v.Name, err)}}
		}
		return ClaimAction{Bind: v}
	case storage.ClaimRefNames(v, c):
		return ClaimAction{Bind: v}
	default:
		return ClaimAction{Phase: corev1.ClaimPending, Event: &Event{corev1.EventTypeWarning, ReasonFailedBinding,
			fmt.Sprintf("volume %q already bound to a different claim.", v.Name)}}
	}
}

// decideBoundClaim handles a claim whose binding completed once. A volume missing from the
// cache is confirmed with a live read before the claim is declared Lost.
func decideBoundClaim(s ClaimState) ClaimAction {
	c, v := s.Claim, s.Volume
	lost := func(reason, msg string) ClaimAction {
		return ClaimAction{Phase: corev1.ClaimLost, Event: &Event{corev1.EventTypeWarning, reason, msg}, EventOnlyOn: true}
	}
	switch {
	case c.Spec.VolumeName == "":
		return lost(ReasonClaimLost, "Bound claim has lost reference to PersistentVolume. Data on the volume is lost!")
	case v == nil && !s.VolumeConfirmed:
		return ClaimAction{NeedLiveVolume: true}
	case v == nil:
		return lost(ReasonClaimLost, "Bound claim has lost its PersistentVolume. Data on the volume is lost!")
	case v.Spec.ClaimRef == nil || v.Spec.ClaimRef.UID == c.UID:
		return ClaimAction{Bind: v}
	default:
		return lost(ReasonClaimMisbound, "Two claims are bound to the same volume, this one is bound incorrectly")
	}
}

// VolumeState is what the binder knows about a volume.
type VolumeState struct {
	Volume *corev1.PersistentVolume
	// Claim is the claim spec.claimRef names (by namespace and name), nil when absent.
	// ClaimConfirmed is set when the claim's absence, or its different uid, was confirmed by a
	// live read: the cache alone never releases a volume.
	Claim          *corev1.PersistentVolumeClaim
	ClaimConfirmed bool
}

// VolumeAction is what to do for a volume. Zero fields mean nothing to do.
type VolumeAction struct {
	Phase corev1.PersistentVolumePhase
	// Message is the status message set with Phase.
	Message string
	Event   *Event
	// Unbind undoes a binding the claim no longer wants: a volume the binder bound loses its
	// claimRef, one a user pre-bound keeps the name and loses the uid. Reuse clears the claimRef
	// of a released volume so it is Available again.
	Unbind bool
	Reuse  bool
	// EnqueueClaim asks for the claim to be synced (it is mid-binding); ClaimEvent is recorded on it.
	EnqueueClaim  bool
	ClaimEvent    *Event
	NeedLiveClaim bool
	// SetFinalizers replaces the volume's finalizers with Finalizers (the in-tree deletion
	// protection finalizer, see deletionFinalizers) before anything else is written, as
	// upstream's syncVolume does.
	SetFinalizers bool
	Finalizers    []string
}

// DecideVolume decides what to do for one volume.
func DecideVolume(s VolumeState) VolumeAction {
	a := decideVolume(s)
	if !a.NeedLiveClaim {
		a.Finalizers, a.SetFinalizers = deletionFinalizers(s.Volume)
	}
	return a
}

func decideVolume(s VolumeState) VolumeAction {
	v := s.Volume
	ref := v.Spec.ClaimRef
	if ref == nil || ref.UID == "" {
		return VolumeAction{Phase: corev1.VolumeAvailable}
	}
	claim := s.Claim
	released := v.Status.Phase == corev1.VolumeReleased || v.Status.Phase == corev1.VolumeFailed
	if claim != nil && claim.UID != ref.UID {
		if !s.ClaimConfirmed && !released {
			return VolumeAction{NeedLiveClaim: true}
		}
		claim = nil // deleted and re-created under the same name
	}
	if claim == nil {
		// A volume already released was confirmed when it was; its claim's uid cannot return.
		if !released {
			if !s.ClaimConfirmed {
				return VolumeAction{NeedLiveClaim: true}
			}
			return VolumeAction{Phase: corev1.VolumeReleased}
		}
		if v.Status.Phase == corev1.VolumeFailed {
			return VolumeAction{}
		}
		return reclaim(v)
	}
	switch claim.Spec.VolumeName {
	case "":
		if !storage.ModesMatch(v, claim) {
			return VolumeAction{
				Event: &Event{corev1.EventTypeWarning, ReasonVolumeMismatch,
					fmt.Sprintf("Cannot bind PersistentVolume to requested PersistentVolumeClaim %q due to incompatible volumeMode.", claim.Name)},
				ClaimEvent: &Event{corev1.EventTypeWarning, ReasonVolumeMismatch,
					fmt.Sprintf("Cannot bind PersistentVolume %q to requested PersistentVolumeClaim due to incompatible volumeMode.", v.Name)},
			}
		}
		return VolumeAction{EnqueueClaim: true}
	case v.Name:
		return VolumeAction{Phase: corev1.VolumeBound}
	default:
		if _, dynamic := v.Annotations[storage.AnnProvisionedBy]; dynamic && v.Spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimDelete {
			if v.Status.Phase != corev1.VolumeReleased && v.Status.Phase != corev1.VolumeFailed {
				return VolumeAction{Phase: corev1.VolumeReleased}
			}
			return reclaim(v)
		}
		return VolumeAction{Unbind: true}
	}
}

// reclaim applies the reclaim policy to a Released volume whose claim is gone.
func reclaim(v *corev1.PersistentVolume) VolumeAction {
	switch v.Spec.PersistentVolumeReclaimPolicy {
	case corev1.PersistentVolumeReclaimRecycle:
		// Recycle is deprecated upstream; pvguard never scrubs data itself.
		return VolumeAction{Phase: corev1.VolumeFailed, Message: "Recycle is deprecated and not performed by pvguard",
			Event: &Event{corev1.EventTypeWarning, ReasonVolumeFailedRecycle, "Recycle is deprecated and not performed by pvguard; scrub the volume and make it Available by clearing spec.claimRef, or delete it"}}
	case corev1.PersistentVolumeReclaimDelete:
		if plugin, inTree := provisionedInTree(v); inTree {
			// Upstream's own deleter plugin would delete the storage and then drop the
			// finalizer; pvguard has no in-tree plugins, so it stops where upstream fails to
			// find one. The finalizer stays: it is what keeps the storage from being leaked.
			return VolumeAction{Phase: corev1.VolumeFailed, Message: "pvguard has no deleter for in-tree volume plugin " + plugin,
				Event: &Event{corev1.EventTypeWarning, ReasonVolumeFailedDelete, fmt.Sprintf(
					"pvguard has no deleter for in-tree volume plugin %q: delete the storage by hand, then set the reclaim policy to Retain (pvguard then removes the %s finalizer) and delete the PersistentVolume", plugin, storage.FinalizerPVController)}}
		}
		if _, external := v.Annotations[storage.AnnProvisionedBy]; external {
			// The external provisioner that made it deletes it. For a plugin migrated to CSI
			// that is its driver's provisioner, which upstream points at the volume with
			// pv.kubernetes.io/migrated-to; pvguard does not write that annotation.
			return VolumeAction{}
		}
		return VolumeAction{Phase: corev1.VolumeFailed, Message: "no deleter for a statically provisioned volume",
			Event: &Event{corev1.EventTypeWarning, ReasonVolumeFailedDelete, "error getting deleter volume plugin for volume: no deletable volume plugin matched; delete the storage and the PersistentVolume by hand"}}
	default:
		if v.Annotations[storage.AnnReuseWhenReleased] == "true" {
			return VolumeAction{Reuse: true, Event: &Event{corev1.EventTypeNormal, ReasonVolumeReused,
				fmt.Sprintf("claim %s/%s is gone; %s makes the volume Available again with its data", v.Spec.ClaimRef.Namespace, v.Spec.ClaimRef.Name, storage.AnnReuseWhenReleased)}}
		}
		return VolumeAction{}
	}
}
