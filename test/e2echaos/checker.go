package e2echaos

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The invariant checker. It states each rule afresh, in a few lines of its own, over objects
// read live from the apiserver: it must not import pvguard's policy or binder packages, or a bug
// there would be a bug here too and the two would agree.

// Annotations and finalizers, spelled out rather than imported, for the same reason.
const (
	annBindCompleted     = "pv.kubernetes.io/bind-completed"
	annBoundByController = "pv.kubernetes.io/bound-by-controller"
	annSelectedNode      = "volume.kubernetes.io/selected-node"
	finalizerPV          = "kubernetes.io/pv-protection"
	finalizerPVC         = "kubernetes.io/pvc-protection"
)

// The invariants a Violation names.
const (
	// InvDoubleClaim: a volume claimed by two claims, or a claim held by two volumes.
	InvDoubleClaim = "double-claim"
	// InvDeniedPair: a claim and a volume linked although a deny rule refuses the pair.
	InvDeniedPair = "denied-pair-linked"
	// InvUnbound: a claim left unbound although a free volume fits it.
	InvUnbound = "satisfiable-claim-unbound"
	// InvReleased: a volume Released, Failed or taken away while its claim exists.
	InvReleased = "released-with-live-claim"
	// InvLost: a claim Lost, or bound to a volume that is gone or points elsewhere.
	InvLost = "claim-lost"
	// InvDeleted: an object the test created (and did not delete) is gone.
	InvDeleted = "object-deleted"
	// InvFinalizer: a protection finalizer, or one the test set, is missing.
	InvFinalizer = "finalizer-missing"
	// InvInconsistent: the two halves of a binding, their phases or annotations disagree.
	InvInconsistent = "binding-inconsistent"
	// InvMonitor: the monitor could not judge an event (a live read failed).
	InvMonitor = "monitor-error"
)

// ClaimKey names a claim.
type ClaimKey struct{ Namespace, Name string }

func (k ClaimKey) String() string { return k.Namespace + "/" + k.Name }

func keyOf(c *corev1.PersistentVolumeClaim) ClaimKey { return ClaimKey{c.Namespace, c.Name} }

// Intent is what the test's creator did that the objects' current state no longer shows.
type Intent struct {
	// PreboundVolumes maps a volume to the claim its creator pre-bound it to (a claimRef
	// without uid).
	PreboundVolumes map[string]ClaimKey
	// NamedVolumes maps a claim to the volume its creator named in spec.volumeName.
	NamedVolumes map[ClaimKey]string
	// Volumes and Claims are the objects the test created and never deleted: they must exist.
	Volumes map[string]bool
	Claims  map[ClaimKey]bool
	// Finalizers the test set, by object: "pv/NAME" or "pvc/NAMESPACE/NAME".
	Finalizers map[string][]string
	// ProtectionFinalizers requires kubernetes.io/pv-protection on every volume and
	// kubernetes.io/pvc-protection on every claim (the apiserver's admission adds them).
	ProtectionFinalizers bool
	// GrabDenied says the policy config denies volume-grab: a claim whose creator named a volume
	// not pre-bound to it may take it only if the volume's GrantAnnotation lists its namespace.
	GrabDenied      bool
	GrantAnnotation string
}

// State is the objects in scope, read live.
type State struct {
	PVs   []corev1.PersistentVolume
	PVCs  []corev1.PersistentVolumeClaim
	Nodes []corev1.Node
}

// Violation is one broken invariant.
type Violation struct {
	Invariant string
	Object    string
	Detail    string
}

func (v Violation) String() string { return v.Invariant + " " + v.Object + ": " + v.Detail }

// Check judges a state against every invariant and returns the violations, sorted.
func Check(s State, in Intent) []Violation {
	c := newChecker(s, in)
	c.existence()
	c.finalizers()
	c.links()
	c.satisfiable()
	sort.Slice(c.out, func(i, j int) bool { return c.out[i].String() < c.out[j].String() })
	return c.out
}

type checker struct {
	in      Intent
	pvs     map[string]*corev1.PersistentVolume
	pvNames []string
	pvcs    map[ClaimKey]*corev1.PersistentVolumeClaim
	pvcKeys []ClaimKey
	byUID   map[types.UID]*corev1.PersistentVolumeClaim
	nodes   map[string]*corev1.Node
	out     []Violation
}

func newChecker(s State, in Intent) *checker {
	c := &checker{in: in, pvs: map[string]*corev1.PersistentVolume{}, pvcs: map[ClaimKey]*corev1.PersistentVolumeClaim{},
		byUID: map[types.UID]*corev1.PersistentVolumeClaim{}, nodes: map[string]*corev1.Node{}}
	for i := range s.PVs {
		pv := &s.PVs[i]
		c.pvs[pv.Name] = pv
		c.pvNames = append(c.pvNames, pv.Name)
	}
	for i := range s.PVCs {
		pvc := &s.PVCs[i]
		c.pvcs[keyOf(pvc)] = pvc
		c.pvcKeys = append(c.pvcKeys, keyOf(pvc))
		c.byUID[pvc.UID] = pvc
	}
	for i := range s.Nodes {
		c.nodes[s.Nodes[i].Name] = &s.Nodes[i]
	}
	sort.Strings(c.pvNames)
	sort.Slice(c.pvcKeys, func(i, j int) bool { return c.pvcKeys[i].String() < c.pvcKeys[j].String() })
	return c
}

func (c *checker) add(inv, obj, format string, args ...any) {
	c.out = append(c.out, Violation{Invariant: inv, Object: obj, Detail: fmt.Sprintf(format, args...)})
}

func pvObj(name string) string         { return "pv/" + name }
func pvcObj(k ClaimKey) string         { return "pvc/" + k.String() }
func has(list []string, s string) bool { return slices.Contains(list, s) }

func (c *checker) existence() {
	for name := range c.in.Volumes {
		if c.pvs[name] == nil {
			c.add(InvDeleted, pvObj(name), "the volume the test created is gone")
		}
	}
	for k := range c.in.Claims {
		if c.pvcs[k] == nil {
			c.add(InvDeleted, pvcObj(k), "the claim the test created is gone")
		}
	}
}

func (c *checker) finalizers() {
	for _, name := range c.pvNames {
		pv := c.pvs[name]
		want := c.in.Finalizers[pvObj(name)]
		if c.in.ProtectionFinalizers {
			want = append([]string{finalizerPV}, want...)
		}
		for _, f := range want {
			if !has(pv.Finalizers, f) {
				c.add(InvFinalizer, pvObj(name), "finalizer %s missing (has %v)", f, pv.Finalizers)
			}
		}
	}
	for _, k := range c.pvcKeys {
		pvc := c.pvcs[k]
		want := c.in.Finalizers[pvcObj(k)]
		if c.in.ProtectionFinalizers {
			want = append([]string{finalizerPVC}, want...)
		}
		for _, f := range want {
			if !has(pvc.Finalizers, f) {
				c.add(InvFinalizer, pvcObj(k), "finalizer %s missing (has %v)", f, pvc.Finalizers)
			}
		}
	}
}

// claimOf returns the live claim a volume's claimRef holds by uid (nil when it holds none, or
// names a claim that is gone or was re-created).
func (c *checker) claimOf(pv *corev1.PersistentVolume) *corev1.PersistentVolumeClaim {
	ref := pv.Spec.ClaimRef
	if ref == nil || ref.UID == "" {
		return nil
	}
	pvc := c.byUID[ref.UID]
	if pvc == nil || pvc.Namespace != ref.Namespace || pvc.Name != ref.Name {
		return nil
	}
	return pvc
}

func completed(pvc *corev1.PersistentVolumeClaim) bool {
	_, ok := pvc.Annotations[annBindCompleted]
	return ok
}

func releasedPhase(p corev1.PersistentVolumePhase) bool {
	return p == corev1.VolumeReleased || p == corev1.VolumeFailed
}

// links checks every link between a volume and a claim: no sharing, no denied pair, both halves
// and their phases and annotations in agreement, and nothing released under a live claim.
func (c *checker) links() {
	heldBy := map[types.UID][]string{}       // claim uid -> volumes whose claimRef holds it
	namedBy := map[string][]ClaimKey{}       // volume -> claims that completed a binding to it
	linked := map[ClaimKey]map[string]bool{} // claim -> volumes linked to it by either half
	link := func(k ClaimKey, pv string) {
		if linked[k] == nil {
			linked[k] = map[string]bool{}
		}
		linked[k][pv] = true
	}
	for _, name := range c.pvNames {
		pv := c.pvs[name]
		ref := pv.Spec.ClaimRef
		pvc := c.claimOf(pv)
		switch {
		case ref == nil || ref.UID == "":
			if pv.Status.Phase == corev1.VolumeBound {
				c.add(InvInconsistent, pvObj(name), "phase Bound without a claim uid")
			}
			if _, ok := pv.Annotations[annBoundByController]; ok && ref == nil {
				c.add(InvInconsistent, pvObj(name), "free volume still marked %s", annBoundByController)
			}
		case pvc == nil:
			if pv.Status.Phase == corev1.VolumeBound {
				c.add(InvInconsistent, pvObj(name), "Bound to %s/%s (uid %s), which does not exist", ref.Namespace, ref.Name, ref.UID)
			}
		default:
			heldBy[pvc.UID] = append(heldBy[pvc.UID], name)
			link(keyOf(pvc), name)
			if releasedPhase(pv.Status.Phase) {
				c.add(InvReleased, pvObj(name), "phase %s while its claim %s exists", pv.Status.Phase, keyOf(pvc))
			}
		}
	}
	for _, k := range c.pvcKeys {
		pvc := c.pvcs[k]
		if pvc.Status.Phase == corev1.ClaimLost {
			c.add(InvLost, pvcObj(k), "phase Lost")
		}
		if !completed(pvc) {
			if pvc.Status.Phase == corev1.ClaimBound {
				c.add(InvInconsistent, pvcObj(k), "phase Bound without %s", annBindCompleted)
			}
			continue
		}
		name := pvc.Spec.VolumeName
		pv := c.pvs[name]
		switch {
		case name == "":
			c.add(InvLost, pvcObj(k), "%s without spec.volumeName", annBindCompleted)
			continue
		case pv == nil:
			c.add(InvLost, pvcObj(k), "bound to volume %s, which does not exist", name)
			continue
		}
		namedBy[name] = append(namedBy[name], k)
		link(k, name)
		if pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != pvc.UID {
			if other := c.claimOf(pv); other != nil {
				c.add(InvDoubleClaim, pvObj(name), "claimed by %s, but %s is bound to it too", keyOf(other), k)
			} else {
				c.add(InvLost, pvcObj(k), "bound to volume %s, whose claimRef %v does not point back", name, pv.Spec.ClaimRef)
			}
		}
	}
	for _, name := range c.pvNames {
		if ks := namedBy[name]; len(ks) > 1 {
			c.add(InvDoubleClaim, pvObj(name), "claims %v all completed a binding to it", ks)
		}
	}
	for _, k := range c.pvcKeys {
		pvc := c.pvcs[k]
		if vs := heldBy[pvc.UID]; len(vs) > 1 {
			c.add(InvDoubleClaim, pvcObj(k), "held by several volumes %v", vs)
		}
		for _, name := range sortedSet(linked[k]) {
			pv := c.pvs[name]
			for _, why := range c.denied(pvc, pv) {
				c.add(InvDeniedPair, pvcObj(k), "linked to %s although %s", name, why)
			}
			c.consistent(pvc, pv)
		}
	}
}

// consistent checks the two halves of a link: both point at each other, both Bound, and the
// annotations say who made the link.
func (c *checker) consistent(pvc *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume) {
	k := keyOf(pvc)
	obj := pvcObj(k) + "<->" + pv.Name
	if pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != pvc.UID || pvc.Spec.VolumeName != pv.Name {
		if pvc.Spec.VolumeName == "" {
			c.add(InvInconsistent, obj, "half bound: the volume holds the claim, the claim names no volume")
		}
		return // the other cases are reported as lost or double claims
	}
	if pvc.Annotations[annBindCompleted] != "yes" {
		c.add(InvInconsistent, obj, "claim names the volume without %s: yes", annBindCompleted)
	}
	if pv.Status.Phase != corev1.VolumeBound || pvc.Status.Phase != corev1.ClaimBound {
		c.add(InvInconsistent, obj, "phases volume %q, claim %q; want both Bound", pv.Status.Phase, pvc.Status.Phase)
	}
	userVolume := c.in.PreboundVolumes[pv.Name] == k
	if got := pv.Annotations[annBoundByController] == "yes"; got == userVolume {
		c.add(InvInconsistent, obj, "volume %s=%v, but its creator pre-bound it: %v", annBoundByController, got, userVolume)
	}
	userClaim := c.in.NamedVolumes[k] == pv.Name
	if got := pvc.Annotations[annBoundByController] == "yes"; got == userClaim {
		c.add(InvInconsistent, obj, "claim %s=%v, but its creator named the volume: %v", annBoundByController, got, userClaim)
	}
	want, got := pv.Spec.Capacity[corev1.ResourceStorage], pvc.Status.Capacity[corev1.ResourceStorage]
	if got.Cmp(want) != 0 {
		c.add(InvInconsistent, obj, "claim status capacity %s, volume capacity %s", got.String(), want.String())
	}
	if !slices.Equal(pvc.Status.AccessModes, pv.Spec.AccessModes) {
		c.add(InvInconsistent, obj, "claim status access modes %v, volume %v", pvc.Status.AccessModes, pv.Spec.AccessModes)
	}
}

// denied lists why a pair must never be linked: the deny rules of docs/rules.md that judge a
// pair (volume mode, capacity, access modes, node affinity; volume-grab when configured to
// deny), upstream's refusal of a class mismatch unless the volume was pre-bound to the claim, and
// a volume its creator pre-bound to another claim.
func (c *checker) denied(pvc *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume) []string {
	var out []string
	k := keyOf(pvc)
	if a, b := modeOf(pvc.Spec.VolumeMode), modeOf(pv.Spec.VolumeMode); a != b {
		out = append(out, fmt.Sprintf("the claim is %s and the volume %s", a, b))
	}
	want, offer := pvc.Spec.Resources.Requests[corev1.ResourceStorage], pv.Spec.Capacity[corev1.ResourceStorage]
	if offer.Cmp(want) < 0 {
		out = append(out, fmt.Sprintf("the volume's %s is below the request %s", offer.String(), want.String()))
	}
	for _, m := range pvc.Spec.AccessModes {
		if !slices.Contains(pv.Spec.AccessModes, m) {
			out = append(out, fmt.Sprintf("the volume lacks access mode %s", m))
		}
	}
	if node := pvc.Annotations[annSelectedNode]; node != "" {
		if n := c.nodes[node]; n != nil && !nodeAdmits(pv, n) {
			out = append(out, fmt.Sprintf("the claim is scheduled to %s, which the volume's node affinity excludes", node))
		}
	}
	owner, prebound := c.in.PreboundVolumes[pv.Name]
	if prebound && owner != k {
		out = append(out, fmt.Sprintf("its creator pre-bound the volume to %s", owner))
	}
	if classOf(pvc) != pv.Spec.StorageClassName && owner != k {
		out = append(out, fmt.Sprintf("classes differ (%q, %q)", classOf(pvc), pv.Spec.StorageClassName))
	}
	if c.in.GrabDenied && c.in.NamedVolumes[k] == pv.Name && owner != k && !grants(pv.Annotations[c.in.GrantAnnotation], pvc.Namespace) {
		out = append(out, fmt.Sprintf("the claim named the volume, which does not grant namespace %s (volume-grab is deny)", pvc.Namespace))
	}
	return out
}

// satisfiable reports unbound claims that a free volume fits: a maximum matching between the
// unbound claims and the free volumes, so that one volume counts for one claim.
func (c *checker) satisfiable() {
	var claims []*corev1.PersistentVolumeClaim
	for _, k := range c.pvcKeys {
		pvc := c.pvcs[k]
		if pvc.DeletionTimestamp != nil || completed(pvc) || pvc.Status.Phase == corev1.ClaimBound {
			continue
		}
		held := false
		for _, pv := range c.pvs {
			if c.claimOf(pv) == pvc {
				held = true
			}
		}
		if !held {
			claims = append(claims, pvc)
		}
	}
	var free []*corev1.PersistentVolume
	for _, name := range c.pvNames {
		pv := c.pvs[name]
		if pv.DeletionTimestamp != nil || releasedPhase(pv.Status.Phase) || (pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.UID != "") {
			continue
		}
		free = append(free, pv)
	}
	fits := func(pvc *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume) bool {
		if ref := pv.Spec.ClaimRef; ref != nil && (ref.Namespace != pvc.Namespace || ref.Name != pvc.Name) {
			return false
		}
		if pvc.Spec.VolumeName != "" && pvc.Spec.VolumeName != pv.Name {
			return false
		}
		// Classes must match even for a volume pre-bound to the claim: upstream tolerates the
		// mismatch there, pvguard plans by class, and this check is the conservative one.
		return classOf(pvc) == pv.Spec.StorageClassName && len(c.denied(pvc, pv)) == 0
	}
	for ci, vi := range maxMatching(len(claims), len(free), func(ci, vi int) bool { return fits(claims[ci], free[vi]) }) {
		c.add(InvUnbound, pvcObj(keyOf(claims[ci])), "unbound (phase %q) although the free volume %s fits it", claims[ci].Status.Phase, free[vi].Name)
	}
}

// Bindable is how many claims some assignment could bind at once, judged by the creator's
// intent alone (every claim as if unbound, every volume as if free but for its creator's
// pre-binding). A run is compared with it, so that a binder that binds nothing cannot pass.
func Bindable(s State, in Intent) int {
	_, claims, vols, fits := c0(s, in)
	return len(maxMatching(len(claims), len(vols), fits))
}

// c0 is the checker over a state with its claims and volumes in order and Bindable's pair test.
func c0(s State, in Intent) (*checker, []*corev1.PersistentVolumeClaim, []*corev1.PersistentVolume, func(ci, vi int) bool) {
	c := newChecker(s, in)
	var claims []*corev1.PersistentVolumeClaim
	for _, k := range c.pvcKeys {
		claims = append(claims, c.pvcs[k])
	}
	var vols []*corev1.PersistentVolume
	for _, name := range c.pvNames {
		vols = append(vols, c.pvs[name])
	}
	fits := func(ci, vi int) bool {
		pvc, pv := claims[ci], vols[vi]
		if named, ok := in.NamedVolumes[keyOf(pvc)]; ok && named != pv.Name {
			return false
		}
		return classOf(pvc) == pv.Spec.StorageClassName && len(c.denied(pvc, pv)) == 0
	}
	return c, claims, vols, fits
}

// Shortfall explains a run that bound fewer claims than Bindable: for each unbound claim, an
// augmenting path, if there is one, from it through volumes it fits and the claims bound to
// them to a volume nobody holds, with when each volume was created and bound. A binding cannot
// be undone, so a path whose free volume arrived after the bindings along it is one no online
// binder could have avoided.
func Shortfall(s State, in Intent) []string {
	_, claims, vols, fits := c0(s, in)
	holder := map[int]int{}
	for vi, pv := range vols {
		ref := pv.Spec.ClaimRef
		if ref == nil {
			continue
		}
		for ci, pvc := range claims {
			if pvc.Namespace == ref.Namespace && pvc.Name == ref.Name && pvc.Spec.VolumeName == pv.Name {
				holder[vi] = ci
			}
		}
	}
	volume := func(vi int) string {
		pv := vols[vi]
		at := ""
		if t := pv.Status.LastPhaseTransitionTime; t != nil {
			at = " since " + t.Format("15:04:05")
		}
		return fmt.Sprintf("volume %s (%s, created %s, %s%s)", pv.Name, pv.Spec.Capacity.Storage(), pv.CreationTimestamp.Format("15:04:05"), pv.Status.Phase, at)
	}
	claim := func(ci int) string {
		pvc := claims[ci]
		return fmt.Sprintf("claim %s/%s (requests %s, created %s)", pvc.Namespace, pvc.Name, pvc.Spec.Resources.Requests.Storage(), pvc.CreationTimestamp.Format("15:04:05"))
	}
	var out []string
	for start, pvc := range claims {
		if pvc.Annotations[annBindCompleted] != "" {
			continue
		}
		// Breadth first: claim -> a volume it fits -> the claim bound to that volume -> ...
		type step struct{ ci, vi, prev int }
		steps := []step{{ci: start, vi: -1, prev: -1}}
		seen := map[int]bool{}
		end := -1
		for next := 0; next < len(steps) && end < 0; next++ {
			if steps[next].ci < 0 {
				continue
			}
			for vi := range vols {
				if seen[vi] || !fits(steps[next].ci, vi) {
					continue
				}
				seen[vi] = true
				h, held := holder[vi]
				if !held {
					steps = append(steps, step{ci: -1, vi: vi, prev: next})
					end = len(steps) - 1
					break
				}
				steps = append(steps, step{ci: h, vi: vi, prev: next})
			}
		}
		if end < 0 {
			continue
		}
		// Walked back from the free volume, then read from the unbound claim: it fits the first
		// volume, whose claim fits the next, and so on.
		var path []string
		for i := end; i >= 0; i = steps[i].prev {
			if st := steps[i]; st.ci >= 0 {
				path = append(path, claim(st.ci))
			}
			if st := steps[i]; st.vi >= 0 {
				path = append(path, volume(st.vi))
			}
		}
		slices.Reverse(path)
		out = append(out, strings.Join(path, " -> "))
	}
	return out
}

// maxMatching returns a maximum matching (claim index -> volume index) of a bipartite graph by
// augmenting paths; edge is asked once per pair.
func maxMatching(claims, volumes int, edge func(ci, vi int) bool) map[int]int {
	adj := make([][]int, claims)
	for ci := range claims {
		for vi := range volumes {
			if edge(ci, vi) {
				adj[ci] = append(adj[ci], vi)
			}
		}
	}
	owner := make([]int, volumes)
	for i := range owner {
		owner[i] = -1
	}
	var try func(ci int, seen []bool) bool
	try = func(ci int, seen []bool) bool {
		for _, vi := range adj[ci] {
			if seen[vi] {
				continue
			}
			seen[vi] = true
			if owner[vi] < 0 || try(owner[vi], seen) {
				owner[vi] = ci
				return true
			}
		}
		return false
	}
	for ci := range claims {
		try(ci, make([]bool, volumes))
	}
	out := map[int]int{}
	for vi, ci := range owner {
		if ci >= 0 {
			out[ci] = vi
		}
	}
	return out
}

func modeOf(m *corev1.PersistentVolumeMode) corev1.PersistentVolumeMode {
	if m == nil || *m == "" {
		return corev1.PersistentVolumeFilesystem
	}
	return *m
}

func classOf(pvc *corev1.PersistentVolumeClaim) string {
	if pvc.Spec.StorageClassName == nil {
		return ""
	}
	return *pvc.Spec.StorageClassName
}

// nodeAdmits evaluates a volume's required node affinity against a node's labels: the terms are
// ORed, the expressions of a term ANDed.
func nodeAdmits(pv *corev1.PersistentVolume, n *corev1.Node) bool {
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return true
	}
	for _, term := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
		ok := len(term.MatchExpressions) > 0
		for _, e := range term.MatchExpressions {
			v, present := n.Labels[e.Key]
			switch e.Operator {
			case corev1.NodeSelectorOpIn:
				ok = ok && present && slices.Contains(e.Values, v)
			case corev1.NodeSelectorOpNotIn:
				ok = ok && !(present && slices.Contains(e.Values, v))
			case corev1.NodeSelectorOpExists:
				ok = ok && present
			case corev1.NodeSelectorOpDoesNotExist:
				ok = ok && !present
			default:
				ok = false // the tests use none of the others
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// grants reports whether a comma-separated namespace list names ns exactly (the tests use no
// globs).
func grants(list, ns string) bool {
	for _, p := range strings.Split(list, ",") {
		if strings.TrimSpace(p) == ns {
			return true
		}
	}
	return false
}

func sortedSet(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Monitor judges changes as they happen, for what a final state cannot show: a volume Released,
// deleted or unbound while its claim exists, even if it was bound again later, and a claim that
// was Lost for a while. Feed it every volume and claim change (an informer does); Lookup reads a
// claim live, so the monitor judges with the apiserver's word rather than its own lagging copy.
type Monitor struct {
	Lookup  func(namespace, name string) (*corev1.PersistentVolumeClaim, error)
	InScope func(namespace, name string) bool

	mu         sync.Mutex
	violations []Violation
	released   []string
	unbinds    []string
	// holders tracks which volumes hold each claim uid; doubles notes every moment one claim
	// was held by two volumes (the binder repairs it, but it bound twice).
	holders map[types.UID]map[string]bool
	doubles []string
}

// hold records which claim uid a volume holds now.
func (m *Monitor) hold(pv *corev1.PersistentVolume, deleted bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.holders == nil {
		m.holders = map[types.UID]map[string]bool{}
	}
	for uid, vols := range m.holders {
		if vols[pv.Name] {
			delete(vols, pv.Name)
			if len(vols) == 0 {
				delete(m.holders, uid)
			}
		}
	}
	ref := pv.Spec.ClaimRef
	if deleted || ref == nil || ref.UID == "" {
		return
	}
	if m.holders[ref.UID] == nil {
		m.holders[ref.UID] = map[string]bool{}
	}
	m.holders[ref.UID][pv.Name] = true
	if len(m.holders[ref.UID]) > 1 {
		m.doubles = append(m.doubles, fmt.Sprintf("%s/%s held by %v", ref.Namespace, ref.Name, sortedSet(m.holders[ref.UID])))
	}
}

// Doubles returns the moments a claim was held by two volumes at once.
func (m *Monitor) Doubles() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.doubles)
}

func (m *Monitor) record(v Violation) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.violations = append(m.violations, v)
}

// liveHolder returns the live claim that ref holds by uid, if any.
func (m *Monitor) liveHolder(obj string, ref *corev1.ObjectReference) (*corev1.PersistentVolumeClaim, bool) {
	if ref == nil || ref.UID == "" {
		return nil, true
	}
	pvc, err := m.Lookup(ref.Namespace, ref.Name)
	if err != nil {
		m.record(Violation{InvMonitor, obj, fmt.Sprintf("reading claim %s/%s: %v", ref.Namespace, ref.Name, err)})
		return nil, false
	}
	if pvc == nil || pvc.UID != ref.UID {
		return nil, true
	}
	return pvc, true
}

// VolumeChanged judges a volume's change; old is nil when it was added.
func (m *Monitor) VolumeChanged(old, cur *corev1.PersistentVolume) {
	if !m.InScope("", cur.Name) {
		return
	}
	m.hold(cur, false)
	obj := pvObj(cur.Name)
	if releasedPhase(cur.Status.Phase) && (old == nil || old.Status.Phase != cur.Status.Phase) {
		if pvc, ok := m.liveHolder(obj, cur.Spec.ClaimRef); ok && pvc != nil {
			m.record(Violation{InvReleased, obj, fmt.Sprintf("became %s while its claim %s (uid %s) exists", cur.Status.Phase, keyOf(pvc), pvc.UID)})
		} else if ok {
			m.mu.Lock()
			m.released = append(m.released, cur.Name)
			m.mu.Unlock()
		}
	}
	if old == nil || old.Spec.ClaimRef == nil || old.Spec.ClaimRef.UID == "" {
		return
	}
	if ref := cur.Spec.ClaimRef; ref != nil && ref.UID == old.Spec.ClaimRef.UID {
		return
	}
	pvc, ok := m.liveHolder(obj, old.Spec.ClaimRef)
	switch {
	case !ok:
	case pvc != nil && (pvc.Spec.VolumeName == cur.Name || pvc.Spec.VolumeName == ""):
		m.record(Violation{InvReleased, obj, fmt.Sprintf("claimRef changed from %s (uid %s) to %v while that claim exists and wants this volume",
			keyOf(pvc), pvc.UID, cur.Spec.ClaimRef)})
	default:
		m.mu.Lock()
		m.unbinds = append(m.unbinds, cur.Name)
		m.mu.Unlock()
	}
}

// VolumeDeleted judges a volume's deletion.
func (m *Monitor) VolumeDeleted(pv *corev1.PersistentVolume) {
	if !m.InScope("", pv.Name) {
		return
	}
	m.hold(pv, true)
	if pvc, ok := m.liveHolder(pvObj(pv.Name), pv.Spec.ClaimRef); ok && pvc != nil {
		m.record(Violation{InvDeleted, pvObj(pv.Name), fmt.Sprintf("deleted while its claim %s exists", keyOf(pvc))})
	}
}

// ClaimChanged judges a claim's change; old is nil when it was added.
func (m *Monitor) ClaimChanged(old, cur *corev1.PersistentVolumeClaim) {
	if !m.InScope(cur.Namespace, cur.Name) {
		return
	}
	obj := pvcObj(keyOf(cur))
	if cur.Status.Phase == corev1.ClaimLost && (old == nil || old.Status.Phase != corev1.ClaimLost) {
		m.record(Violation{InvLost, obj, "became Lost"})
	}
	if old != nil && completed(old) && old.Spec.VolumeName != "" && cur.Spec.VolumeName != old.Spec.VolumeName {
		m.record(Violation{InvLost, obj, fmt.Sprintf("spec.volumeName changed from %s to %q after the binding completed", old.Spec.VolumeName, cur.Spec.VolumeName)})
	}
}

// Violations returns what the monitor saw break.
func (m *Monitor) Violations() []Violation {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.violations)
}

// Released returns the volumes seen Released or Failed after their claim was gone (legitimate).
func (m *Monitor) Released() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.released)
}

// Unbinds returns the volumes seen losing a claim that had gone elsewhere (legitimate repairs).
func (m *Monitor) Unbinds() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.unbinds)
}

// LinkViolations judges the links between claims and volumes at one instant, for a watch that
// judges after every change (LinkWatch); Check judges more, but only a settled state. It reports:
//
//   - a claim held by two volumes: counting the volumes that are phase Bound with a claimRef
//     naming the claim by uid, plus the volume the claim names once bind-completed is set,
//     there are two different ones. A volume that holds the claim's uid without being Bound is
//     not counted unless the claim names it: that is the first of the four bind writes, made
//     before the claim names a volume, and a binding being rolled back passes through it;
//   - a volume claimed by two claims: two claims with bind-completed name it in spec.volumeName;
//   - a claim Lost.
func LinkViolations(pvs []*corev1.PersistentVolume, pvcs []*corev1.PersistentVolumeClaim) []Violation {
	var out []Violation
	byUID := map[types.UID]*corev1.PersistentVolumeClaim{}
	for _, pvc := range pvcs {
		byUID[pvc.UID] = pvc
	}
	holders := map[types.UID]map[string]bool{}
	hold := func(uid types.UID, pv string) {
		if holders[uid] == nil {
			holders[uid] = map[string]bool{}
		}
		holders[uid][pv] = true
	}
	for _, pv := range pvs {
		ref := pv.Spec.ClaimRef
		if ref == nil || ref.UID == "" || pv.Status.Phase != corev1.VolumeBound {
			continue
		}
		if pvc := byUID[ref.UID]; pvc != nil && pvc.Namespace == ref.Namespace && pvc.Name == ref.Name {
			hold(pvc.UID, pv.Name)
		}
	}
	named := map[string][]ClaimKey{}
	for _, pvc := range pvcs {
		if pvc.Status.Phase == corev1.ClaimLost {
			out = append(out, Violation{InvLost, pvcObj(keyOf(pvc)), fmt.Sprintf("phase Lost (spec.volumeName %q)", pvc.Spec.VolumeName)})
		}
		if completed(pvc) && pvc.Spec.VolumeName != "" {
			hold(pvc.UID, pvc.Spec.VolumeName)
			named[pvc.Spec.VolumeName] = append(named[pvc.Spec.VolumeName], keyOf(pvc))
		}
	}
	for _, pvc := range pvcs {
		if vs := holders[pvc.UID]; len(vs) > 1 {
			out = append(out, Violation{InvDoubleClaim, pvcObj(keyOf(pvc)),
				fmt.Sprintf("held by volumes %v (Bound with its uid, or named by it: %q)", sortedSet(vs), pvc.Spec.VolumeName)})
		}
	}
	for pv, ks := range named {
		if len(ks) > 1 {
			sort.Slice(ks, func(i, j int) bool { return ks[i].String() < ks[j].String() })
			out = append(out, Violation{InvDoubleClaim, pvObj(pv), fmt.Sprintf("claims %v all completed a binding to it", ks)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// Sighting is a violation a LinkWatch saw: from its first event to the event that cleared it
// (zero while it holds).
type Sighting struct {
	Violation
	First, Cleared time.Time
}

func (s Sighting) String() string {
	how := "still so at the end"
	if !s.Cleared.IsZero() {
		how = fmt.Sprintf("for %v", s.Cleared.Sub(s.First).Round(time.Millisecond))
	}
	return fmt.Sprintf("%s, from %s %s", s.Violation, s.First.Format("15:04:05.000"), how)
}

// LinkWatch keeps the volumes and claims in scope as a watch reports them and judges
// LinkViolations after every change, so that a misbinding repaired a second later is still seen.
// Each stream (volumes, claims) is applied in order, so each side is a state the apiserver
// really had; a violation that needs both sides names objects whose every counted half was
// written, so the two streams' relative lag cannot make one up.
type LinkWatch struct {
	InScope func(namespace, name string) bool

	mu        sync.Mutex
	pvs       map[string]*corev1.PersistentVolume
	pvcs      map[ClaimKey]*corev1.PersistentVolumeClaim
	open      map[string]*Sighting
	sightings []*Sighting
	events    int
}

// Volume records a volume's change (deleted: it is gone) and judges.
func (w *LinkWatch) Volume(pv *corev1.PersistentVolume, deleted bool) {
	if !w.InScope("", pv.Name) {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pvs == nil {
		w.pvs = map[string]*corev1.PersistentVolume{}
	}
	if deleted {
		delete(w.pvs, pv.Name)
	} else {
		w.pvs[pv.Name] = pv
	}
	w.judge()
}

// Claim records a claim's change (deleted: it is gone) and judges.
func (w *LinkWatch) Claim(pvc *corev1.PersistentVolumeClaim, deleted bool) {
	if !w.InScope(pvc.Namespace, pvc.Name) {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pvcs == nil {
		w.pvcs = map[ClaimKey]*corev1.PersistentVolumeClaim{}
	}
	if deleted {
		delete(w.pvcs, keyOf(pvc))
	} else {
		w.pvcs[keyOf(pvc)] = pvc
	}
	w.judge()
}

// judge runs with w.mu held.
func (w *LinkWatch) judge() {
	w.events++
	now := time.Now()
	if w.open == nil {
		w.open = map[string]*Sighting{}
	}
	pvs := make([]*corev1.PersistentVolume, 0, len(w.pvs))
	for _, pv := range w.pvs {
		pvs = append(pvs, pv)
	}
	pvcs := make([]*corev1.PersistentVolumeClaim, 0, len(w.pvcs))
	for _, pvc := range w.pvcs {
		pvcs = append(pvcs, pvc)
	}
	current := map[string]bool{}
	for _, v := range LinkViolations(pvs, pvcs) {
		k := v.Invariant + " " + v.Object
		current[k] = true
		if w.open[k] == nil {
			s := &Sighting{Violation: v, First: now}
			w.open[k] = s
			w.sightings = append(w.sightings, s)
		}
	}
	for k, s := range w.open {
		if !current[k] {
			s.Cleared = now
			delete(w.open, k)
		}
	}
}

// Sightings returns every violation seen, in the order first seen, and how many changes were
// judged.
func (w *LinkWatch) Sightings() ([]Sighting, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]Sighting, len(w.sightings))
	for i, s := range w.sightings {
		out[i] = *s
	}
	return out, w.events
}
