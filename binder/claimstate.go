package binder

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvguard/pvguard/storage"
)

// A claim's state is built in one place, ClaimStateOf, from ClaimFacts: the binder's claim sync
// reads the facts from its cache and its ledger (cacheFacts), an explanation from the objects it
// explains and the plan it made of them (explain's planFacts). What the binder decides and what
// an explanation says it will decide therefore never read the claim's situation differently.

// ClaimFacts are what a claim's state is read from. A lookup's found false means there is no such
// object; an error is a read that failed, which ClaimStateOf returns (wrapped) without deciding.
type ClaimFacts interface {
	// Volume is the volume of that name.
	Volume(name string) (v *corev1.PersistentVolume, found bool, err error)
	// Classes are the storage classes.
	Classes() ([]*storagev1.StorageClass, error)
	// VolumesClaiming are the volumes whose spec.claimRef names the claim namespace/name.
	VolumesClaiming(namespace, name string) ([]*corev1.PersistentVolume, error)
	// Plan is the volume the pool plan gives the claim ("" for none), and whether the plan
	// considered the claim at all.
	Plan(claim types.UID) (volume string, planned bool)
	// Denied is the volumes policy denied the claim that are still kept from it (forbidTTL).
	Denied(claim types.UID) map[string]bool
	// PendingFree says free volumes still Pending may be bound (Binder.pendingFree).
	PendingFree() bool
	// Confirmed says a volume the facts do not hold does not exist: they are the truth (an
	// explanation's objects), not a cache that may lag (ClaimState.VolumeConfirmed).
	Confirmed() bool
}

// ClaimStateOf is the state of claim c as the facts tell it: the volume its spec.volumeName names,
// its class and the default class, and, for a claim that names no volume, either the volumes
// pre-bound to it (a WaitForFirstConsumer claim, which the planner leaves alone) or the volume the
// plan gives it, dropped with the claim left unplanned when the plan went stale (the volume was
// taken, changed or deleted since): the claim then asks for a plan again. It is generic over the
// facts' type so that the facts a claim sync reads are not boxed into an interface: that would be
// one more heap allocation per sync, and a resync syncs every claim (docs/benchmarks.md, "The
// binder's claim syncs"; BenchmarkClaimSyncs measures 252 B and 7 allocations a sync with it).
func ClaimStateOf[F ClaimFacts](c *corev1.PersistentVolumeClaim, f F) (ClaimState, error) {
	s := ClaimState{Claim: c, Denied: f.Denied(c.UID), VolumeConfirmed: f.Confirmed()}
	if c.Spec.VolumeName != "" {
		v, found, err := f.Volume(c.Spec.VolumeName)
		if err != nil {
			return s, fmt.Errorf("reading volume %s: %w", c.Spec.VolumeName, err)
		}
		if found {
			s.Volume = v
		}
	}
	classes, err := f.Classes()
	if err != nil {
		return s, fmt.Errorf("listing storage classes: %w", err)
	}
	s.DefaultClass = defaultClass(classes)
	if name := storage.ClaimClass(c); name != "" {
		for _, sc := range classes {
			if sc.Name == name {
				s.Class = sc
			}
		}
	}
	if c.Spec.VolumeName != "" {
		return s, nil // DecideClaim reads neither the plan nor pre-bound volumes for it
	}
	if isDelayBinding(c, s.Class) {
		// What the binder may complete is a binding that a volume pointing at the claim began.
		pre, err := f.VolumesClaiming(c.Namespace, c.Name)
		if err != nil {
			return s, fmt.Errorf("listing volumes pre-bound to claim %s/%s: %w", c.Namespace, c.Name, err)
		}
		s.PreBound = pre
		return s, nil
	}
	assigned, planned := f.Plan(c.UID)
	s.Planned = planned
	if assigned == "" {
		return s, nil
	}
	v, found, err := f.Volume(assigned)
	switch {
	case err != nil:
		return s, fmt.Errorf("reading planned volume %s: %w", assigned, err)
	case found && fitsUnbound(c, v, nil, false, f.PendingFree()):
		s.Assigned = v
	default:
		s.Planned = false // the plan went stale: plan again
	}
	return s, nil
}
