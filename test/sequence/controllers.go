package sequence

import (
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
)

// What the upstream controllers would write next in a given state, so that random sequences
// mix legitimate controller work with the writes under test (the issue's "clear claimRef, then
// let the binder re-bind" needs the binder's real writes). Each function returns every write its
// controller could make now; the explorer picks one. They follow the upstream logic (PV
// controller syncClaim/syncVolume/bind/unbind, the scheduler's volume binding, the external
// provisioner, the resizer, the protection controllers) in the simplified form the model needs.

// isBoundToClaim is upstream's IsVolumeBoundToClaim: the claimRef names the claim, and its uid
// when it has one.
func isBoundToClaim(pv *corev1.PersistentVolume, c *corev1.PersistentVolumeClaim) bool {
	ref := pv.Spec.ClaimRef
	return ref != nil && ref.Namespace == c.Namespace && ref.Name == c.Name && (ref.UID == "" || ref.UID == c.UID)
}

func className(c *corev1.PersistentVolumeClaim) string {
	if c.Spec.StorageClassName == nil {
		return ""
	}
	return *c.Spec.StorageClassName
}

func delayBinding(w *World, c *corev1.PersistentVolumeClaim) bool {
	sc := w.Classes[className(c)]
	return sc != nil && sc.VolumeBindingMode != nil && *sc.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer
}

func provisionable(w *World, c *corev1.PersistentVolumeClaim) bool {
	sc := w.Classes[className(c)]
	return sc != nil && sc.Provisioner == Driver
}

// satisfies is upstream's checkVolumeSatisfyClaim plus the matcher's class and mode checks.
func satisfies(w *World, pv *corev1.PersistentVolume, c *corev1.PersistentVolumeClaim) bool {
	return pv.Spec.StorageClassName == className(c) && misfit(w, c, pv, false) == ""
}

// BinderMoves are the PV controller's next writes: for each claim, the next write of its sync;
// for each volume, the next write of its sync.
func BinderMoves(w *World) []Step {
	var out []Step
	for _, c := range w.SortedPVCs() {
		if s, ok := syncClaim(w, c); ok {
			out = append(out, s)
		}
	}
	for _, pv := range w.SortedPVs() {
		if s, ok := syncVolume(w, pv); ok {
			out = append(out, s)
		}
	}
	return out
}

func syncClaim(w *World, c *corev1.PersistentVolumeClaim) (Step, bool) {
	if !has(c.ObjectMeta, annBindCompleted) {
		if c.Spec.VolumeName == "" {
			// A volume already linked to the claim is taken first, then the smallest that fits.
			var best *corev1.PersistentVolume
			for _, pv := range w.SortedPVs() {
				if pv.Spec.ClaimRef != nil && isBoundToClaim(pv, c) && satisfies(w, pv, c) {
					return bindNext(w, pv, c)
				}
			}
			if delayBinding(w, c) {
				return Step{}, false // the scheduler's business
			}
			for _, pv := range w.SortedPVs() {
				if pv.Spec.ClaimRef == nil && pv.DeletionTimestamp == nil && satisfies(w, pv, c) &&
					(best == nil || pv.Spec.Capacity.Storage().Cmp(*best.Spec.Capacity.Storage()) < 0) {
					best = pv
				}
			}
			if best != nil {
				return bindNext(w, best, c)
			}
			if provisionable(w, c) && c.Annotations[annProvisioner] != Driver {
				return PVCUpdate(w, PVBinder, Update, c.Namespace, c.Name, "PV controller asks the external provisioner", func(x *corev1.PersistentVolumeClaim) {
					SetAnn(&x.ObjectMeta, annBetaProv, Driver)
					SetAnn(&x.ObjectMeta, annProvisioner, Driver)
				})
			}
			return Step{}, false
		}
		pv := w.PVs[c.Spec.VolumeName]
		if pv == nil {
			return Step{}, false
		}
		if (pv.Spec.ClaimRef == nil && satisfies(w, pv, c)) || isBoundToClaim(pv, c) {
			return bindNext(w, pv, c)
		}
		return Step{}, false
	}
	pv := w.PVs[c.Spec.VolumeName]
	switch {
	case c.Spec.VolumeName == "" || pv == nil:
		return claimLost(w, c)
	case pv.Spec.ClaimRef == nil:
		// "volume is unbound, fixing"
		return bindNext(w, pv, c)
	case pv.Spec.ClaimRef.UID == c.UID:
		return bindNext(w, pv, c)
	}
	return claimLost(w, c)
}

func claimLost(w *World, c *corev1.PersistentVolumeClaim) (Step, bool) {
	return PVCUpdate(w, PVBinder, UpdateStatus, c.Namespace, c.Name, "PV controller: claim Lost", func(x *corev1.PersistentVolumeClaim) {
		x.Status.Phase = corev1.ClaimLost
	})
}

// bindNext is the next write of upstream's bind(): PV spec, PV status, PVC spec, PVC status,
// each made only when it changes something.
func bindNext(w *World, pv *corev1.PersistentVolume, c *corev1.PersistentVolumeClaim) (Step, bool) {
	if s, ok := PVUpdate(w, PVBinder, Update, pv.Name, "PV controller bind: volume", func(x *corev1.PersistentVolume) {
		if ref := x.Spec.ClaimRef; ref == nil || ref.Namespace != c.Namespace || ref.Name != c.Name || ref.UID != c.UID {
			x.Spec.ClaimRef = RefTo(c)
		}
		if !isBoundToClaim(pv, c) {
			SetAnn(&x.ObjectMeta, annBoundBy, "yes")
		}
	}); ok {
		return s, true
	}
	if s, ok := PVUpdate(w, PVBinder, UpdateStatus, pv.Name, "PV controller bind: volume Bound", func(x *corev1.PersistentVolume) {
		x.Status.Phase = corev1.VolumeBound
	}); ok {
		return s, true
	}
	if s, ok := PVCUpdate(w, PVBinder, Update, c.Namespace, c.Name, "PV controller bind: claim", func(x *corev1.PersistentVolumeClaim) {
		if x.Spec.VolumeName != pv.Name {
			x.Spec.VolumeName = pv.Name
			SetAnn(&x.ObjectMeta, annBoundBy, "yes")
		}
		if !has(x.ObjectMeta, annBindCompleted) {
			SetAnn(&x.ObjectMeta, annBindCompleted, "yes")
		}
	}); ok {
		return s, true
	}
	return PVCUpdate(w, PVBinder, UpdateStatus, c.Namespace, c.Name, "PV controller bind: claim Bound", func(x *corev1.PersistentVolumeClaim) {
		x.Status.Phase = corev1.ClaimBound
		if !reflect.DeepEqual(x.Status.AccessModes, pv.Spec.AccessModes) {
			x.Status.AccessModes = pv.Spec.AccessModes
		}
		if q, ok := x.Status.Capacity[corev1.ResourceStorage]; !ok || q.Cmp(*pv.Spec.Capacity.Storage()) != 0 {
			x.Status.Capacity = pv.Spec.Capacity.DeepCopy()
		}
	})
}

func volumePhase(w *World, pv *corev1.PersistentVolume, phase corev1.PersistentVolumePhase, what string) (Step, bool) {
	return PVUpdate(w, PVBinder, UpdateStatus, pv.Name, what, func(x *corev1.PersistentVolume) { x.Status.Phase = phase })
}

func syncVolume(w *World, pv *corev1.PersistentVolume) (Step, bool) {
	ref := pv.Spec.ClaimRef
	if ref == nil || ref.UID == "" {
		return volumePhase(w, pv, corev1.VolumeAvailable, "PV controller: volume Available")
	}
	c := w.PVC(ref.Namespace, ref.Name)
	if c != nil && c.UID != ref.UID {
		c = nil
	}
	switch {
	case c == nil:
		if pv.Status.Phase != corev1.VolumeReleased && pv.Status.Phase != corev1.VolumeFailed {
			return volumePhase(w, pv, corev1.VolumeReleased, "PV controller: claim gone, volume Released")
		}
		return Step{}, false
	case c.Spec.VolumeName == "":
		return Step{}, false
	case c.Spec.VolumeName == pv.Name:
		return volumePhase(w, pv, corev1.VolumeBound, "PV controller: volume Bound")
	case has(pv.ObjectMeta, annProvisionedBy) && pv.Spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimDelete:
		if pv.Status.Phase != corev1.VolumeReleased && pv.Status.Phase != corev1.VolumeFailed {
			return volumePhase(w, pv, corev1.VolumeReleased, "PV controller: claim bound elsewhere, provisioned volume Released")
		}
		return Step{}, false
	case has(pv.ObjectMeta, annBoundBy):
		return PVUpdate(w, PVBinder, Update, pv.Name, "PV controller unbind: claim bound elsewhere, clear claimRef", func(x *corev1.PersistentVolume) {
			x.Spec.ClaimRef = nil
			DelAnn(&x.ObjectMeta, annBoundBy)
		})
	}
	return PVUpdate(w, PVBinder, Update, pv.Name, "PV controller unbind: claim bound elsewhere, drop uid of a user's pre-bind", func(x *corev1.PersistentVolume) {
		x.Spec.ClaimRef.UID = ""
	})
}

// SchedulerMoves are the scheduler's writes for pending claims of a WaitForFirstConsumer class:
// a static bind of a volume that fits on some node (full PV update with claimRef and
// bound-by-controller), or selected-node on a claim to provision.
func SchedulerMoves(w *World) []Step {
	var out []Step
	for _, c := range w.SortedPVCs() {
		if c.Spec.VolumeName != "" || !delayBinding(w, c) || c.Annotations[annSelectedNode] != "" || c.DeletionTimestamp != nil {
			continue
		}
		for _, node := range []string{"node-a", "node-b"} {
			n := w.Nodes[node]
			for _, pv := range w.SortedPVs() {
				if pv.Spec.ClaimRef != nil || pv.DeletionTimestamp != nil || !satisfies(w, pv, c) || !admits(pv, n) {
					continue
				}
				if s, ok := PVUpdate(w, Scheduler, Update, pv.Name, "scheduler binds a volume on "+node, func(x *corev1.PersistentVolume) {
					x.Spec.ClaimRef = RefTo(c)
					SetAnn(&x.ObjectMeta, annBoundBy, "yes")
				}); ok {
					out = append(out, s)
				}
			}
			if provisionable(w, c) && n != nil {
				if s, ok := PVCUpdate(w, Scheduler, Update, c.Namespace, c.Name, "scheduler selects "+node+" for provisioning", func(x *corev1.PersistentVolumeClaim) {
					SetAnn(&x.ObjectMeta, annSelectedNode, node)
				}); ok {
					out = append(out, s)
				}
			}
		}
	}
	return out
}

func admits(pv *corev1.PersistentVolume, n *corev1.Node) bool {
	if n == nil {
		return false
	}
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return true
	}
	ok, err := corev1helpers.MatchNodeSelectorTerms(n, pv.Spec.NodeAffinity.Required)
	return err == nil && ok
}

// ProvisionerMoves are the external provisioner's writes: saving a volume for a claim that asked
// for one (including, from pending, a claim deleted or bound elsewhere since: the races), asking
// the scheduler to reschedule, deleting a Released Delete volume and then removing its finalizer,
// and keeping its finalizer in step with the reclaim policy.
func ProvisionerMoves(w *World, pending []*corev1.PersistentVolumeClaim) []Step {
	var out []Step
	for _, c := range pending {
		if w.PVs["pvc-"+string(c.UID)] != nil {
			continue
		}
		if delayBinding(w, c) && c.Annotations[annSelectedNode] == "" {
			continue
		}
		out = append(out, PVCreate(Provisioner, Provisioned(c), "provisioner saves the volume for "+c.Namespace+"/"+c.Name+" (uid "+string(c.UID)+")"))
	}
	for _, c := range w.SortedPVCs() {
		if c.Spec.VolumeName == "" && c.Annotations[annSelectedNode] != "" && c.Annotations[annProvisioner] == Driver {
			if s, ok := PVCUpdate(w, Provisioner, Update, c.Namespace, c.Name, "provisioner reschedules: drops selected-node", func(x *corev1.PersistentVolumeClaim) {
				DelAnn(&x.ObjectMeta, annSelectedNode)
			}); ok {
				out = append(out, s)
			}
		}
	}
	for _, pv := range w.SortedPVs() {
		if pv.Annotations[annProvisionedBy] != Driver {
			continue
		}
		del := pv.Spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimDelete
		hasFin := slices.Contains(pv.Finalizers, FinProvisioner)
		switch {
		case pv.DeletionTimestamp == nil && pv.Status.Phase == corev1.VolumeReleased && del:
			out = append(out, PVDelete(Provisioner, pv.Name, "provisioner deleted the backing volume, deletes the PV"))
		case pv.DeletionTimestamp != nil && hasFin:
			if s, ok := PVUpdate(w, Provisioner, Update, pv.Name, "provisioner removes its finalizer", func(x *corev1.PersistentVolume) {
				DelFin(&x.ObjectMeta, FinProvisioner)
			}); ok {
				out = append(out, s)
			}
		case pv.DeletionTimestamp == nil && del && pv.Status.Phase == corev1.VolumeBound && !hasFin:
			if s, ok := PVUpdate(w, Provisioner, Update, pv.Name, "provisioner adds its finalizer", func(x *corev1.PersistentVolume) {
				AddFin(&x.ObjectMeta, FinProvisioner)
			}); ok {
				out = append(out, s)
			}
		case !del && hasFin:
			if s, ok := PVUpdate(w, Provisioner, Update, pv.Name, "provisioner drops its finalizer: reclaim policy no longer Delete", func(x *corev1.PersistentVolume) {
				DelFin(&x.ObjectMeta, FinProvisioner)
			}); ok {
				out = append(out, s)
			}
		}
	}
	return out
}

// ResizerMoves are the external resizer's writes for a bound claim whose request is above its
// volume's capacity: grow the volume, then record the new capacity on the claim.
func ResizerMoves(w *World) []Step {
	var out []Step
	for _, c := range w.SortedPVCs() {
		pv := w.PVs[c.Spec.VolumeName]
		if pv == nil || !boundTo(pv, c) {
			continue
		}
		req, have := c.Spec.Resources.Requests[corev1.ResourceStorage], pv.Spec.Capacity[corev1.ResourceStorage]
		if req.Cmp(have) > 0 {
			if s, ok := PVUpdate(w, Resizer, Update, pv.Name, "resizer grows the volume", func(x *corev1.PersistentVolume) {
				x.Spec.Capacity[corev1.ResourceStorage] = req.DeepCopy()
			}); ok {
				out = append(out, s)
			}
			continue
		}
		if given, ok := c.Status.Capacity[corev1.ResourceStorage]; ok && given.Cmp(have) < 0 {
			if s, ok := PVCUpdate(w, Resizer, UpdateStatus, c.Namespace, c.Name, "resizer records the new capacity", func(x *corev1.PersistentVolumeClaim) {
				x.Status.Capacity[corev1.ResourceStorage] = have.DeepCopy()
			}); ok {
				out = append(out, s)
			}
		}
	}
	return out
}

// ProtectionMoves are the pv- and pvc-protection controllers' writes: add the finalizer to an
// object that lacks it; remove it from an object being deleted and no longer in use (a volume
// not Bound; a claim, as the model has no pods, always).
func ProtectionMoves(w *World) []Step {
	var out []Step
	for _, pv := range w.SortedPVs() {
		hasFin := slices.Contains(pv.Finalizers, FinPV)
		switch {
		case pv.DeletionTimestamp != nil && hasFin && pv.Status.Phase != corev1.VolumeBound:
			if s, ok := PVUpdate(w, PVProt, Update, pv.Name, "pv-protection removes its finalizer", func(x *corev1.PersistentVolume) { DelFin(&x.ObjectMeta, FinPV) }); ok {
				out = append(out, s)
			}
		case pv.DeletionTimestamp == nil && !hasFin:
			if s, ok := PVUpdate(w, PVProt, Update, pv.Name, "pv-protection adds its finalizer", func(x *corev1.PersistentVolume) { AddFin(&x.ObjectMeta, FinPV) }); ok {
				out = append(out, s)
			}
		}
	}
	for _, c := range w.SortedPVCs() {
		hasFin := slices.Contains(c.Finalizers, FinPVC)
		switch {
		case c.DeletionTimestamp != nil && hasFin:
			if s, ok := PVCUpdate(w, PVCProt, Update, c.Namespace, c.Name, "pvc-protection removes its finalizer", func(x *corev1.PersistentVolumeClaim) { DelFin(&x.ObjectMeta, FinPVC) }); ok {
				out = append(out, s)
			}
		case c.DeletionTimestamp == nil && !hasFin:
			if s, ok := PVCUpdate(w, PVCProt, Update, c.Namespace, c.Name, "pvc-protection adds its finalizer", func(x *corev1.PersistentVolumeClaim) { AddFin(&x.ObjectMeta, FinPVC) }); ok {
				out = append(out, s)
			}
		}
	}
	return out
}

// PopulatorMoves are a volume populator's hand-offs (lib-volume-populator's
// populator-machinery/controller.go syncPvc, KubeVirt CDI's pkg/controller/common/util.go
// Rebind): the volume of a bound claim made for a claim that waits for its data (named
// "prime-<its uid>") is pointed at that claim, with its uid. The PV controller then binds the
// claim and marks the populator's claim Lost (BinderMoves), and the populator deletes it.
func PopulatorMoves(w *World) []Step {
	var out []Step
	for _, to := range w.SortedPVCs() {
		if to.Spec.DataSourceRef == nil || to.Spec.VolumeName != "" || to.DeletionTimestamp != nil || w.PVC("populators", "prime-"+string(to.UID)) != nil {
			continue
		}
		// The prime claim: the target's class, size, modes and volume mode, and its node.
		prime := Claim("populators", "prime-"+string(to.UID), "prime-uid-"+string(to.UID), to.Spec.Resources.Requests.Storage().String(), className(to), to.Spec.AccessModes...)
		prime.Spec.VolumeMode = to.Spec.VolumeMode
		if n, ok := to.Annotations[annSelectedNode]; ok {
			SetAnn(&prime.ObjectMeta, annSelectedNode, n)
		}
		out = append(out, PVCCreate(Populator, prime, "populator creates its claim made for "+to.Name))
	}
	for _, from := range w.SortedPVCs() {
		pv := w.PVs[from.Spec.VolumeName]
		if pv == nil || !isBoundToClaim(pv, from) || !strings.HasPrefix(from.Name, "prime-") {
			continue
		}
		uid := strings.TrimPrefix(from.Name, "prime-")
		for _, to := range w.SortedPVCs() {
			if string(to.UID) != uid || to.Spec.VolumeName != "" || to.Spec.DataSourceRef == nil {
				continue
			}
			if s, ok := PVUpdate(w, Populator, Update, pv.Name, "populator hands the filled volume to "+to.Name, func(x *corev1.PersistentVolume) {
				x.Spec.ClaimRef = &corev1.ObjectReference{Namespace: to.Namespace, Name: to.Name, UID: to.UID, ResourceVersion: "1"}
			}); ok {
				out = append(out, s)
			}
		}
		if from.Status.Phase == corev1.ClaimLost && from.DeletionTimestamp == nil {
			out = append(out, PVCDelete(Populator, from.Namespace, from.Name, "populator deletes its claim"))
		}
	}
	return out
}
