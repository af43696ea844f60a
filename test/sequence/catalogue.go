package sequence

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The catalogue of writes: every kind of field change the invariants care about, by every kind
// of identity, on the main resource and on status, alone or several in one write (every verb and
// patch type ends as an old -> new pair, so a multi-field write is how a merge patch, a JSON
// patch, an edit or a replace that changes several fields looks to the webhook).

var identityWeights = []struct {
	who    Identity
	weight int
}{
	{Tenant, 20}, {Admin, 20}, {PVBinder, 12}, {KCM, 3}, {Scheduler, 6}, {Provisioner, 12},
	{Resizer, 6}, {Expander, 3}, {PVProt, 5}, {PVCProt, 5}, {Kubelet, 5}, {Populator, 6},
}

func (g *Gen) who() Identity {
	total := 0
	for _, x := range identityWeights {
		total += x.weight
	}
	n := g.R.IntN(total)
	for _, x := range identityWeights {
		if n < x.weight {
			return x.who
		}
		n -= x.weight
	}
	return Admin
}

// NextStep is a random write for the world: a move an upstream controller or a user of the
// storage flows would make now (45%), or a write from the catalogue by a random identity.
func (g *Gen) NextStep(w *World) Step {
	g.Observe(w)
	for range 100 {
		var (
			s  Step
			ok bool
		)
		switch {
		case w.Gates.MutablePVNodeAffinity && g.chance(20):
			s, ok = g.affinityChange(w)
		case g.chance(45):
			s, ok = g.flowMove(w)
		default:
			s, ok = g.randomWrite(w)
		}
		if ok {
			return s
		}
	}
	c := g.newClaim(ClassManual)
	return PVCCreate(Tenant, c, "tenant creates a claim")
}

// affinityChange changes the node affinity of a volume linked to a claim, as an admin or a storage
// vendor's controller may with the MutablePVNodeAffinity gate on (a disk moved or made regional).
func (g *Gen) affinityChange(w *World) (Step, bool) {
	var linked []*corev1.PersistentVolume
	for _, pv := range w.SortedPVs() {
		if pv.Spec.ClaimRef != nil {
			linked = append(linked, pv)
		}
	}
	if len(linked) == 0 {
		return Step{}, false
	}
	pv := pick(g, linked...)
	aff := pick(g, HostAffinity("node-a"), HostAffinity("node-b"), HostAffinity("node-a", "node-b"), ZoneAffinity("zone-a"), ZoneAffinity("zone-b"), nil)
	what := "node affinity dropped"
	if aff != nil {
		what = "node affinity " + describeSelector(aff.Required)
	}
	return PVUpdate(w, pick(g, Admin, Provisioner), Update, pv.Name, what, func(p *corev1.PersistentVolume) { p.Spec.NodeAffinity = aff })
}

// NextUpstreamStep is a move of the upstream flows only (a controller's next write, or what a
// tenant or admin does in the documented flows); false when there is none.
func (g *Gen) NextUpstreamStep(w *World) (Step, bool) {
	g.Observe(w)
	return g.flowMove(w)
}

func (g *Gen) flowMove(w *World) (Step, bool) {
	var cands []Step
	cands = append(cands, BinderMoves(w)...)
	cands = append(cands, SchedulerMoves(w)...)
	cands = append(cands, ProvisionerMoves(w, g.provisioning(w))...)
	cands = append(cands, ResizerMoves(w)...)
	cands = append(cands, ProtectionMoves(w)...)
	cands = append(cands, PopulatorMoves(w)...)
	cands = append(cands, g.userMoves(w)...)
	if len(cands) == 0 {
		return Step{}, false
	}
	return cands[g.R.IntN(len(cands))], true
}

// userMoves are what tenants and admins do in the upstream flows: create, expand and delete
// claims; reuse a Released volume; confirm a reclaim policy change.
func (g *Gen) userMoves(w *World) []Step {
	var out []Step
	out = append(out, PVCCreate(Tenant, g.newClaim(pick(g, "", ClassManual, ClassFast, ClassLocal)), "tenant creates a claim"))
	for _, c := range w.SortedPVCs() {
		if c.DeletionTimestamp == nil {
			out = append(out, PVCDelete(Tenant, c.Namespace, c.Name, "tenant deletes the claim"))
		}
		if c.Status.Phase == corev1.ClaimBound {
			if s, ok := PVCUpdate(w, Tenant, Update, c.Namespace, c.Name, "tenant expands the claim", func(x *corev1.PersistentVolumeClaim) {
				q := x.Spec.Resources.Requests[corev1.ResourceStorage]
				if given, ok := x.Status.Capacity[corev1.ResourceStorage]; ok && given.Cmp(q) > 0 {
					q = given.DeepCopy()
				}
				q.Add(Quantity("1Gi"))
				x.Spec.Resources.Requests[corev1.ResourceStorage] = q
			}); ok {
				out = append(out, s)
			}
		}
	}
	for _, pv := range w.SortedPVs() {
		if pv.Status.Phase == corev1.VolumeReleased && pv.Spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimRetain &&
			pv.Spec.ClaimRef != nil && liveRef(w, pv.Spec.ClaimRef) == nil {
			// Freed, the volume goes at once to a claim that names it: the documented reuse is
			// of a volume nobody names (freeing one for such a claim is PVG010's warning).
			named := slices.ContainsFunc(w.SortedPVCs(), func(c *corev1.PersistentVolumeClaim) bool { return c.Spec.VolumeName == pv.Name })
			if s, ok := PVUpdate(w, Admin, Update, pv.Name, "admin reuses the Released volume: clears claimRef", func(x *corev1.PersistentVolume) {
				x.Spec.ClaimRef = nil
			}); ok && !named {
				out = append(out, s)
			}
			if pv.Spec.ClaimRef != nil {
				if s, ok := PVUpdate(w, Admin, Update, pv.Name, "admin reuses the Released volume: drops claimRef.uid", func(x *corev1.PersistentVolume) {
					x.Spec.ClaimRef.UID = ""
				}); ok {
					out = append(out, s)
				}
			}
		}
		if pv.Spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimRetain && volumeInUse(pv) && has(pv.ObjectMeta, annConfirm) {
			// A confirmation left from an earlier write confirms nothing (I8): the admin removes
			// it before confirming a change.
			if s, ok := PVUpdate(w, Admin, Update, pv.Name, "admin removes a leftover reclaim confirmation", func(x *corev1.PersistentVolume) {
				DelAnn(&x.ObjectMeta, annConfirm)
			}); ok {
				out = append(out, s)
			}
		} else if pv.Spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimRetain && volumeInUse(pv) {
			if s, ok := PVUpdate(w, Admin, Update, pv.Name, "admin switches to Delete, confirmed", func(x *corev1.PersistentVolume) {
				x.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimDelete
				SetAnn(&x.ObjectMeta, annConfirm, "Delete")
			}); ok {
				out = append(out, s)
			}
		}
	}
	return out
}

func (g *Gen) randomWrite(w *World) (Step, bool) {
	who := g.who()
	switch n := g.R.IntN(100); {
	case n < 38:
		return g.pvSpecWrite(w, who)
	case n < 45:
		return g.pvStatusWrite(w, who)
	case n < 52:
		return PVCreate(who, g.randomVolume(w), "create a volume"), true
	case n < 55:
		pvs := w.SortedPVs()
		if len(pvs) == 0 {
			return Step{}, false
		}
		return PVDelete(who, pick(g, pvs...).Name, "delete the volume"), true
	case n < 80:
		return g.pvcSpecWrite(w, who)
	case n < 87:
		return g.pvcStatusWrite(w, who)
	case n < 96:
		c, what := g.randomClaim(w)
		return PVCCreate(who, c, what), true
	default:
		pvcs := w.SortedPVCs()
		if len(pvcs) == 0 {
			return Step{}, false
		}
		c := pick(g, pvcs...)
		return PVCDelete(who, c.Namespace, c.Name, "delete the claim"), true
	}
}

// claimRefTarget is a reference a write may point a volume at: a live claim with its uid or
// without, a live claim with a stale uid, a claim that is gone, or nothing that ever existed.
func (g *Gen) claimRefTarget(w *World) (*corev1.ObjectReference, string) {
	pvcs := w.SortedPVCs()
	gone := g.goneClaims(w)
	switch n := g.R.IntN(100); {
	case n < 35 && len(pvcs) > 0:
		c := pick(g, pvcs...)
		return RefTo(c), "live " + c.Name + " with its uid"
	case n < 55 && len(pvcs) > 0:
		c := pick(g, pvcs...)
		return RefByName(c.Namespace, c.Name), "live " + c.Name + " by name"
	case n < 65 && len(pvcs) > 0:
		c := pick(g, pvcs...)
		return refWithUID(c.Namespace, c.Name, fmt.Sprintf("uid-stale-%d", g.id())), "live " + c.Name + " with a stale uid"
	case n < 85 && len(gone) > 0:
		c := pick(g, gone...)
		return RefTo(c), "gone " + c.Name + " (uid " + string(c.UID) + ")"
	case n < 92:
		return RefByName(g.ns(), fmt.Sprintf("nobody-%d", g.id())), "a claim that does not exist, by name"
	}
	return refWithUID(g.ns(), fmt.Sprintf("nobody-%d", g.id()), fmt.Sprintf("uid-x-%d", g.id())), "a claim that does not exist, with a uid"
}

// goneClaims are remembered claims no longer live (deleted, or re-created with another uid).
func (g *Gen) goneClaims(w *World) []*corev1.PersistentVolumeClaim {
	var out []*corev1.PersistentVolumeClaim
	for _, uid := range sortedUIDs(g.claims) {
		c := g.claims[uid]
		if live := w.PVC(c.Namespace, c.Name); live == nil || live.UID != c.UID {
			out = append(out, c)
		}
	}
	return out
}

type pvMutation func(g *Gen, w *World, pv *corev1.PersistentVolume) string

var pvMutations = []struct {
	weight int
	f      pvMutation
}{
	{8, func(g *Gen, w *World, pv *corev1.PersistentVolume) string {
		if pv.Spec.ClaimRef == nil {
			return ""
		}
		pv.Spec.ClaimRef = nil
		return "clear claimRef"
	}},
	{8, func(g *Gen, w *World, pv *corev1.PersistentVolume) string {
		ref, what := g.claimRefTarget(w)
		pv.Spec.ClaimRef = ref
		return "claimRef -> " + what
	}},
	{5, func(g *Gen, w *World, pv *corev1.PersistentVolume) string {
		if pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID == "" {
			return ""
		}
		pv.Spec.ClaimRef.UID = ""
		return "drop claimRef.uid"
	}},
	{4, func(g *Gen, w *World, pv *corev1.PersistentVolume) string {
		if pv.Spec.ClaimRef == nil {
			return ""
		}
		if c := w.PVC(pv.Spec.ClaimRef.Namespace, pv.Spec.ClaimRef.Name); c != nil && c.UID != pv.Spec.ClaimRef.UID && g.chance(50) {
			pv.Spec.ClaimRef.UID = c.UID
			return "claimRef.uid -> the live claim's uid"
		}
		pv.Spec.ClaimRef.UID = types.UID(fmt.Sprintf("uid-y-%d", g.id()))
		return "claimRef.uid -> another uid"
	}},
	{4, func(g *Gen, w *World, pv *corev1.PersistentVolume) string {
		if pv.Spec.ClaimRef == nil {
			return ""
		}
		pvcs := w.SortedPVCs()
		if len(pvcs) == 0 {
			return ""
		}
		c := pick(g, pvcs...)
		pv.Spec.ClaimRef.Namespace, pv.Spec.ClaimRef.Name = c.Namespace, c.Name
		return "claimRef re-pointed to " + c.Namespace + "/" + c.Name + ", uid kept"
	}},
	{2, func(g *Gen, w *World, pv *corev1.PersistentVolume) string {
		ref, _ := g.claimRefTarget(w)
		if g.chance(50) {
			ref.Name = ""
			pv.Spec.ClaimRef = ref
			return "claimRef without name"
		}
		ref.Namespace = ""
		pv.Spec.ClaimRef = ref
		return "claimRef without namespace"
	}},
	{3, toggleAnn(annBoundBy, "yes")},
	{3, toggleAnn(annProvisionedBy, Driver)},
	{7, func(g *Gen, w *World, pv *corev1.PersistentVolume) string {
		policies := []corev1.PersistentVolumeReclaimPolicy{corev1.PersistentVolumeReclaimRetain, corev1.PersistentVolumeReclaimDelete, corev1.PersistentVolumeReclaimRecycle}
		to := pick(g, policies...)
		from := pv.Spec.PersistentVolumeReclaimPolicy
		pv.Spec.PersistentVolumeReclaimPolicy = to
		what := fmt.Sprintf("reclaim %s -> %s", from, to)
		switch n := g.R.IntN(100); {
		case n < 40:
			SetAnn(&pv.ObjectMeta, annConfirm, string(to))
			what += ", confirmed"
		case n < 55:
			SetAnn(&pv.ObjectMeta, annConfirm, pick(g, "Delete", "Recycle", "yes"))
			what += ", confirmation " + pv.Annotations[annConfirm]
		case n < 65:
			DelAnn(&pv.ObjectMeta, annConfirm)
			what += ", confirmation removed"
		}
		return what
	}},
	{3, pvReclaimConfirmation},
	{6, pvFinalizer},
	{4, func(g *Gen, w *World, pv *corev1.PersistentVolume) string {
		q := pick(g, "500Mi", "1Gi", "2Gi", "5Gi", "10Gi")
		pv.Spec.Capacity = corev1.ResourceList{corev1.ResourceStorage: Quantity(q)}
		return "capacity " + q
	}},
	{3, func(g *Gen, w *World, pv *corev1.PersistentVolume) string {
		pv.Spec.AccessModes = g.modes()
		return fmt.Sprintf("access modes %v", pv.Spec.AccessModes)
	}},
	{1, func(g *Gen, w *World, pv *corev1.PersistentVolume) string {
		m := corev1.PersistentVolumeBlock
		if mode(pv.Spec.VolumeMode) == m {
			m = corev1.PersistentVolumeFilesystem
		}
		pv.Spec.VolumeMode = &m
		return "volumeMode " + string(m)
	}},
	{2, func(g *Gen, w *World, pv *corev1.PersistentVolume) string {
		if w.Gates.MutablePVNodeAffinity && g.chance(40) {
			// Changes only the gate lets through: widening to both nodes or dropping the affinity.
			if pv.Spec.NodeAffinity = pick(g, HostAffinity("node-a", "node-b"), nil); pv.Spec.NodeAffinity == nil {
				return "node affinity dropped"
			}
		} else {
			pv.Spec.NodeAffinity = pick(g, HostAffinity("node-a"), HostAffinity("node-b"), ZoneAffinity("zone-b"))
		}
		return "node affinity " + describeSelector(pv.Spec.NodeAffinity.Required)
	}},
	{1, func(g *Gen, w *World, pv *corev1.PersistentVolume) string {
		v := g.vac()
		pv.Spec.VolumeAttributesClassName = v
		return "volumeAttributesClassName " + vac(v)
	}},
}

type pvcMutation func(g *Gen, w *World, c *corev1.PersistentVolumeClaim) string

var pvcMutations = []struct {
	weight int
	f      pvcMutation
}{
	{8, func(g *Gen, w *World, c *corev1.PersistentVolumeClaim) string {
		names := slices.Sorted(maps.Keys(w.PVs))
		if len(names) == 0 || g.chance(10) {
			c.Spec.VolumeName = fmt.Sprintf("pv-none-%d", g.id())
		} else {
			c.Spec.VolumeName = pick(g, names...)
		}
		return "volumeName -> " + c.Spec.VolumeName
	}},
	{2, func(g *Gen, w *World, c *corev1.PersistentVolumeClaim) string {
		if c.Spec.VolumeName == "" {
			return ""
		}
		c.Spec.VolumeName = ""
		return "clear volumeName"
	}},
	{5, toggleClaimAnn(annBindCompleted, "yes")},
	{3, toggleClaimAnn(annBoundBy, "yes")},
	{4, claimSelectedNode},
	{2, claimProvisioner},
	{5, func(g *Gen, w *World, c *corev1.PersistentVolumeClaim) string {
		q := pick(g, "500Mi", "1Gi", "2Gi", "5Gi", "10Gi", "20Gi")
		c.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceStorage: Quantity(q)}
		return "request " + q
	}},
	{1, func(g *Gen, w *World, c *corev1.PersistentVolumeClaim) string {
		c.Spec.AccessModes = g.modes()
		return fmt.Sprintf("access modes %v", c.Spec.AccessModes)
	}},
	{1, func(g *Gen, w *World, c *corev1.PersistentVolumeClaim) string {
		m := corev1.PersistentVolumeBlock
		if mode(c.Spec.VolumeMode) == m {
			m = corev1.PersistentVolumeFilesystem
		}
		c.Spec.VolumeMode = &m
		return "volumeMode " + string(m)
	}},
	{1, func(g *Gen, w *World, c *corev1.PersistentVolumeClaim) string {
		v := g.vac()
		c.Spec.VolumeAttributesClassName = v
		return "volumeAttributesClassName " + vac(v)
	}},
	{5, claimFinalizer},
}

// The metadata changes of the catalogue, shared by the writes of the main resource and of
// status: the status strategies reset only the spec, so a status write carries metadata changes
// as an update of the object does.

func pvReclaimConfirmation(g *Gen, w *World, pv *corev1.PersistentVolume) string {
	if g.chance(40) {
		DelAnn(&pv.ObjectMeta, annConfirm)
		return "drop the reclaim confirmation"
	}
	v := pick(g, "Delete", "Recycle")
	SetAnn(&pv.ObjectMeta, annConfirm, v)
	return "reclaim confirmation " + v
}

func pvFinalizer(g *Gen, w *World, pv *corev1.PersistentVolume) string {
	f := pick(g, FinPV, FinPV, FinProvisioner, FinPVCtrl, "example.com/keep")
	if slices.Contains(pv.Finalizers, f) {
		DelFin(&pv.ObjectMeta, f)
		return "remove finalizer " + f
	}
	AddFin(&pv.ObjectMeta, f)
	return "add finalizer " + f
}

func claimSelectedNode(g *Gen, w *World, c *corev1.PersistentVolumeClaim) string {
	if has(c.ObjectMeta, annSelectedNode) && g.chance(40) {
		DelAnn(&c.ObjectMeta, annSelectedNode)
		return "drop selected-node"
	}
	n := pick(g, "node-a", "node-b", "node-a", "node-b", "node-gone")
	SetAnn(&c.ObjectMeta, annSelectedNode, n)
	return "selected-node " + n
}

func claimProvisioner(g *Gen, w *World, c *corev1.PersistentVolumeClaim) string {
	SetAnn(&c.ObjectMeta, annProvisioner, Driver)
	SetAnn(&c.ObjectMeta, annBetaProv, Driver)
	return "storage-provisioner " + Driver
}

func claimFinalizer(g *Gen, w *World, c *corev1.PersistentVolumeClaim) string {
	f := pick(g, FinPVC, FinPVC, "example.com/keep")
	if slices.Contains(c.Finalizers, f) {
		DelFin(&c.ObjectMeta, f)
		return "remove finalizer " + f
	}
	AddFin(&c.ObjectMeta, f)
	return "add finalizer " + f
}

// pvMetaMutations and pvcMetaMutations are what a status write changes in the metadata beside
// the status: mostly the protection finalizers and the binder's annotations (the destructive
// status writes), and an annotation no rule reads (the harmless ones).
var pvMetaMutations = []struct {
	weight int
	f      pvMutation
}{
	{6, pvFinalizer},
	{3, toggleAnn(annBoundBy, "yes")},
	{3, toggleAnn(annProvisionedBy, Driver)},
	{2, pvReclaimConfirmation},
	{2, toggleAnn(annOwner, "alice")},
}

var pvcMetaMutations = []struct {
	weight int
	f      pvcMutation
}{
	{6, claimFinalizer},
	{6, toggleClaimAnn(annBindCompleted, "yes")},
	{3, toggleClaimAnn(annBoundBy, "yes")},
	{2, claimSelectedNode},
	{1, claimProvisioner},
	{2, toggleClaimAnn(annOwner, "alice")},
}

// annOwner is an annotation no rule reads.
const annOwner = "example.com/owner"

func toggleAnn(key, value string) pvMutation {
	return func(g *Gen, w *World, pv *corev1.PersistentVolume) string {
		if has(pv.ObjectMeta, key) {
			DelAnn(&pv.ObjectMeta, key)
			return "remove " + key
		}
		SetAnn(&pv.ObjectMeta, key, value)
		return "add " + key
	}
}

func toggleClaimAnn(key, value string) pvcMutation {
	return func(g *Gen, w *World, c *corev1.PersistentVolumeClaim) string {
		if has(c.ObjectMeta, key) {
			DelAnn(&c.ObjectMeta, key)
			return "remove " + key
		}
		SetAnn(&c.ObjectMeta, key, value)
		return "add " + key
	}
}

func weighted[T any](g *Gen, xs []struct {
	weight int
	f      T
}) T {
	total := 0
	for _, x := range xs {
		total += x.weight
	}
	n := g.R.IntN(total)
	for _, x := range xs {
		if n < x.weight {
			return x.f
		}
		n -= x.weight
	}
	return xs[0].f
}

// mutate makes n changes to x drawn from muts and says what each changed (a draw that changed
// nothing says nothing).
func mutate[M ~func(*Gen, *World, X) string, X any](g *Gen, w *World, x X, n int, muts []struct {
	weight int
	f      M
}) []string {
	var whats []string
	for range n {
		if what := weighted(g, muts)(g, w, x); what != "" {
			whats = append(whats, what)
		}
	}
	return whats
}

// fields is how many field changes a write makes: mostly one, sometimes two or three.
func (g *Gen) fields() int {
	switch n := g.R.IntN(100); {
	case n < 65:
		return 1
	case n < 90:
		return 2
	}
	return 3
}

func (g *Gen) pvSpecWrite(w *World, who Identity) (Step, bool) {
	pvs := w.SortedPVs()
	if len(pvs) == 0 {
		return Step{}, false
	}
	pv := pick(g, pvs...)
	var whats []string
	s, ok := PVUpdate(w, who, Update, pv.Name, "", func(x *corev1.PersistentVolume) {
		whats = mutate(g, w, x, g.fields(), pvMutations)
	})
	s.What = strings.Join(whats, "; ")
	return s, ok
}

func (g *Gen) pvcSpecWrite(w *World, who Identity) (Step, bool) {
	pvcs := w.SortedPVCs()
	if len(pvcs) == 0 {
		return Step{}, false
	}
	c := pick(g, pvcs...)
	var whats []string
	s, ok := PVCUpdate(w, who, Update, c.Namespace, c.Name, "", func(x *corev1.PersistentVolumeClaim) {
		whats = mutate(g, w, x, g.fields(), pvcMutations)
	})
	s.What = strings.Join(whats, "; ")
	return s, ok
}

func (g *Gen) pvStatusWrite(w *World, who Identity) (Step, bool) {
	pvs := w.SortedPVs()
	if len(pvs) == 0 {
		return Step{}, false
	}
	pv := pick(g, pvs...)
	var whats []string
	s, ok := PVUpdate(w, who, UpdateStatus, pv.Name, "", func(x *corev1.PersistentVolume) {
		meta, status := g.statusWriteParts()
		if status {
			phase := pick(g, corev1.VolumePending, corev1.VolumeAvailable, corev1.VolumeBound, corev1.VolumeReleased, corev1.VolumeFailed)
			x.Status.Phase = phase
			whats = append(whats, "phase "+string(phase))
		}
		whats = append(whats, mutate(g, w, x, meta, pvMetaMutations)...)
		if g.chance(10) {
			// A change of the main resource sent through status: the strategy drops its spec
			// part, keeps its metadata part.
			whats = append(whats, mutate(g, w, x, 1, pvMutations)...)
		}
	})
	s.What = strings.Join(whats, "; ")
	return s, ok
}

// statusWriteParts is what a status write changes: how many metadata fields, and whether the
// status; at least one of them.
func (g *Gen) statusWriteParts() (meta int, status bool) {
	switch n := g.R.IntN(100); {
	case n < 50:
		return 0, true
	case n < 75:
		return g.fields(), true
	}
	return g.fields(), false
}

func (g *Gen) pvcStatusWrite(w *World, who Identity) (Step, bool) {
	pvcs := w.SortedPVCs()
	if len(pvcs) == 0 {
		return Step{}, false
	}
	c := pick(g, pvcs...)
	var whats []string
	s, ok := PVCUpdate(w, who, UpdateStatus, c.Namespace, c.Name, "", func(x *corev1.PersistentVolumeClaim) {
		meta, status := g.statusWriteParts()
		switch {
		case !status:
		case g.chance(10):
			v := g.vac()
			x.Status.CurrentVolumeAttributesClassName = v
			whats = append(whats, "status.currentVolumeAttributesClassName "+vac(v))
		case g.chance(40):
			q := pick(g, "1Gi", "2Gi", "5Gi", "10Gi")
			x.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: Quantity(q)}
			whats = append(whats, "status.capacity "+q)
		default:
			phase := pick(g, corev1.ClaimPending, corev1.ClaimBound, corev1.ClaimLost)
			x.Status.Phase = phase
			whats = append(whats, "phase "+string(phase))
		}
		whats = append(whats, mutate(g, w, x, meta, pvcMetaMutations)...)
		if g.chance(10) {
			whats = append(whats, mutate(g, w, x, 1, pvcMutations)...)
		}
	})
	s.What = strings.Join(whats, "; ")
	return s, ok
}

// randomVolume is a volume a create may bring: free, linked to a claim somehow, or looking
// provisioned.
func (g *Gen) randomVolume(w *World) *corev1.PersistentVolume {
	pv := g.volumeFor(nil, pick(g, "", ClassManual, ClassFast, ClassLocal))
	if g.chance(50) {
		pv.Spec.ClaimRef, _ = g.claimRefTarget(w)
	}
	if g.chance(25) {
		SetAnn(&pv.ObjectMeta, annProvisionedBy, Driver)
		AddFin(&pv.ObjectMeta, FinProvisioner)
	}
	if g.chance(15) {
		SetAnn(&pv.ObjectMeta, annBoundBy, "yes")
	}
	return pv
}

// randomClaim is a claim a create may bring: new, or a re-creation of a deleted claim's name
// with a new uid, possibly naming a volume or carrying binder annotations.
func (g *Gen) randomClaim(w *World) (*corev1.PersistentVolumeClaim, string) {
	c := g.newClaim(pick(g, "", ClassManual, ClassFast, ClassLocal))
	what := "create a claim"
	if gone := g.goneClaims(w); len(gone) > 0 && g.chance(35) {
		old := pick(g, gone...)
		if w.PVC(old.Namespace, old.Name) == nil {
			c.Namespace, c.Name = old.Namespace, old.Name
			what = "re-create a deleted claim's name with a new uid"
		}
	}
	if names := slices.Sorted(maps.Keys(w.PVs)); len(names) > 0 && g.chance(30) {
		c.Spec.VolumeName = pick(g, names...)
		what += ", naming " + c.Spec.VolumeName
	}
	if pvcs := w.SortedPVCs(); len(pvcs) > 0 && g.chance(12) {
		// A claim made for another (a populator's, or one forged to look like it), named after
		// that claim's uid, copying its node.
		target := pick(g, pvcs...)
		c.Namespace, c.Name = pick(g, target.Namespace, "populators"), "prime-"+string(target.UID)
		c.Spec.DataSourceRef = nil
		if n, ok := target.Annotations[annSelectedNode]; ok && g.chance(50) {
			SetAnn(&c.ObjectMeta, annSelectedNode, n)
		}
		what = "create a claim made for " + target.Name
	}
	if g.chance(10) {
		SetAnn(&c.ObjectMeta, annBindCompleted, "yes")
		what += ", bind-completed"
	}
	if g.chance(15) {
		SetAnn(&c.ObjectMeta, annSelectedNode, pick(g, "node-a", "node-b"))
	}
	return c, what
}
