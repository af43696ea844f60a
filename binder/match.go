package binder

import (
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/pvguard/pvguard/storage"
)

// claimHasClass reports whether the claim names a class at all (even ""), so that the
// retroactive default class leaves it alone.
func claimHasClass(c *corev1.PersistentVolumeClaim) bool {
	_, beta := c.Annotations[storage.AnnBetaStorageClass]
	return beta || c.Spec.StorageClassName != nil
}

// isDelayBinding reports whether the claim's class waits for the first consumer.
func isDelayBinding(c *corev1.PersistentVolumeClaim, class *storagev1.StorageClass) bool {
	return class != nil && class.VolumeBindingMode != nil && *class.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer
}

// fitsUnbound reports whether an unbound claim may take a volume in the pool: the volume is
// free (Available; or Pending, never synced by a binder, when pendingFree), not being deleted,
// satisfies the claim, matches its selector, and, for a claim scheduled to a node, is reachable
// from it.
func fitsUnbound(c *corev1.PersistentVolumeClaim, v *corev1.PersistentVolume, node *corev1.Node, scheduled, pendingFree bool) bool {
	return newFitCache().fitsUnbound(c, v, node, scheduled, pendingFree)
}

// fitCache parses each claim's label selector and each volume's node affinity once: the planner
// asks about many pairs of a class (the pre-bound pass, and poolLists once per kind of claim),
// and parsing them for every pair would dominate a plan (BenchmarkFitsUnbound measures it).
// Objects are keyed by pointer: one plan's objects do not
// change while it runs.
type fitCache struct {
	selectors  map[*corev1.PersistentVolumeClaim]parsedSelector
	affinities map[*corev1.PersistentVolume]parsedAffinity
}

type parsedSelector struct {
	sel storage.ClaimSelector
	err error
}

type parsedAffinity struct {
	aff storage.VolumeAffinity
	err error
}

func newFitCache() *fitCache {
	return &fitCache{selectors: map[*corev1.PersistentVolumeClaim]parsedSelector{}, affinities: map[*corev1.PersistentVolume]parsedAffinity{}}
}

func (f *fitCache) fitsUnbound(c *corev1.PersistentVolumeClaim, v *corev1.PersistentVolume, node *corev1.Node, scheduled, pendingFree bool) bool {
	if VolumeAvailabilityFor(c, v, pendingFree) != VolumeOpen {
		return false
	}
	// The checks are policy's own (PVG001, PVG005-PVG009, PVG018), so the binder never picks a volume
	// the webhook would refuse for the claim.
	if storage.Satisfies(v, c) != nil {
		return false
	}
	if !f.selectorAdmits(c, v) {
		return false
	}
	return !scheduled || f.affinityAdmits(v, node)
}

// VolumeAvailability is what fitsUnbound makes of a volume before it asks whether the volume
// satisfies the claim: whether it is open to the claim at all.
type VolumeAvailability int8

const (
	// VolumeOpen: the volume may be given to the claim, if it satisfies it.
	VolumeOpen VolumeAvailability = iota
	// VolumeBeingDeleted: the volume has a deletion timestamp.
	VolumeBeingDeleted
	// VolumeClaimedElsewhere: the volume's claimRef names another claim (or another incarnation
	// of this one).
	VolumeClaimedElsewhere
	// VolumeNotFree: the volume has no claimRef but is not Available (nor Pending, when pending
	// volumes count as free).
	VolumeNotFree
)

// VolumeAvailabilityFor tells whether the volume is open to an unbound claim, by the checks
// fitsUnbound makes first (pvguard explain reports them; the planner decides by them).
func VolumeAvailabilityFor(c *corev1.PersistentVolumeClaim, v *corev1.PersistentVolume, pendingFree bool) VolumeAvailability {
	switch {
	case v.DeletionTimestamp != nil:
		return VolumeBeingDeleted
	case v.Spec.ClaimRef != nil && !storage.ClaimRefNames(v, c):
		return VolumeClaimedElsewhere
	case v.Spec.ClaimRef == nil && !isFree(v, pendingFree):
		return VolumeNotFree
	}
	return VolumeOpen
}

// isFree reports whether a volume without a claimRef may be bound: it is Available, or Pending
// (never synced by a binder) when pendingFree.
func isFree(v *corev1.PersistentVolume, pendingFree bool) bool {
	return v.Status.Phase == corev1.VolumeAvailable || pendingFree && isPending(v)
}

// selector is the claim's label selector, parsed once.
func (f *fitCache) selector(c *corev1.PersistentVolumeClaim) parsedSelector {
	sel, ok := f.selectors[c]
	if !ok {
		sel.sel, sel.err = storage.ParseClaimSelector(c)
		f.selectors[c] = sel
	}
	return sel
}

// selectorAdmits reports whether the claim's selector is valid and matches the volume.
func (f *fitCache) selectorAdmits(c *corev1.PersistentVolumeClaim, v *corev1.PersistentVolume) bool {
	sel := f.selector(c)
	return sel.err == nil && sel.sel.Admits(v)
}

// affinityAdmits reports whether the volume is reachable from the node a claim was scheduled to.
func (f *fitCache) affinityAdmits(v *corev1.PersistentVolume, node *corev1.Node) bool {
	aff, ok := f.affinities[v]
	if !ok {
		aff.aff, aff.err = storage.ParseVolumeAffinity(v)
		f.affinities[v] = aff
	}
	// A node that cannot be read (gone, or not cached yet) admits only volumes without affinity.
	// PVG009 judges such a node by storage.AssumedNode, which lets through more (a volume pinned to
	// its host, or to labels that cannot be known), so every pair chosen here is one the webhook
	// admits; the binder only waits, where guessing could place data where the pod cannot run,
	// and the scheduler rewrites the annotation for a node that is gone.
	return aff.err == nil && aff.aff.Admits(node)
}

// DefaultClass is the class the binder gives a claim without one (defaultClass).
func DefaultClass(classes []*storagev1.StorageClass) *storagev1.StorageClass {
	return defaultClass(classes)
}

// defaultClass picks the default class as upstream does: the newest of several, then by name.
func defaultClass(classes []*storagev1.StorageClass) *storagev1.StorageClass {
	var best *storagev1.StorageClass
	for _, sc := range classes {
		if !storage.IsDefaultClass(sc) {
			continue
		}
		if best == nil || sc.CreationTimestamp.After(best.CreationTimestamp.Time) ||
			(sc.CreationTimestamp.Equal(&best.CreationTimestamp) && sc.Name < best.Name) {
			best = sc
		}
	}
	return best
}

// isPending reports whether no binder has synced the volume yet: it has no phase, or Pending.
func isPending(v *corev1.PersistentVolume) bool {
	return v.Status.Phase == corev1.VolumePending || v.Status.Phase == ""
}

// preBoundVolume picks the volume a claim's binding is to be completed with, among volumes whose
// claimRef names it: one that carries the claim's uid (the scheduler's or a provisioner's write,
// or a bind begun before a crash) before one pre-bound by name only, then by name, so that the
// choice does not depend on list order. Only a volume the claim may take counts (as in the
// planner's pre-bound pass); nil when there is none.
func preBoundVolume(c *corev1.PersistentVolumeClaim, volumes []*corev1.PersistentVolume) *corev1.PersistentVolume {
	var best *corev1.PersistentVolume
	fits := newFitCache()
	for _, v := range volumes {
		if !storage.ClaimRefNames(v, c) || !fits.fitsUnbound(c, v, nil, false, false) {
			continue
		}
		if best == nil {
			best = v
			continue
		}
		withUID, bestWithUID := v.Spec.ClaimRef.UID != "", best.Spec.ClaimRef.UID != ""
		if withUID != bestWithUID {
			if withUID {
				best = v
			}
			continue
		}
		if v.Name < best.Name {
			best = v
		}
	}
	return best
}
