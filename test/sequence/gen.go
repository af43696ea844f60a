package sequence

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/pvguard/pvguard/test/testobj"
)

// Gen makes random starting clusters and random writes from one seed.
type Gen struct {
	R    *rand.Rand
	next int
	// claims remembers every claim the generator has seen, by uid: the claimRef targets of
	// stale links, and the claims an external provisioner may still be provisioning for after
	// they were deleted or bound elsewhere (the races).
	claims map[types.UID]*corev1.PersistentVolumeClaim
}

// NewGen returns a generator for a seed.
func NewGen(seed uint64) *Gen {
	return &Gen{R: rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)), claims: map[types.UID]*corev1.PersistentVolumeClaim{}}
}

func (g *Gen) id() int { g.next++; return g.next }

func pick[T any](g *Gen, xs ...T) T { return xs[g.R.IntN(len(xs))] }

func (g *Gen) chance(percent int) bool { return g.R.IntN(100) < percent }

var (
	rwo  = corev1.ReadWriteOnce
	rox  = corev1.ReadOnlyMany
	rwx  = corev1.ReadWriteMany
	rwop = corev1.ReadWriteOncePod
)

func (g *Gen) ns() string { return pick(g, "team-a", "team-a", "team-b") }

func (g *Gen) size() string { return pick(g, "1Gi", "1Gi", "2Gi", "5Gi") }

func (g *Gen) modes() []corev1.PersistentVolumeAccessMode {
	return pick(g, []corev1.PersistentVolumeAccessMode{rwo}, []corev1.PersistentVolumeAccessMode{rwo}, []corev1.PersistentVolumeAccessMode{rwo, rox},
		[]corev1.PersistentVolumeAccessMode{rwx}, []corev1.PersistentVolumeAccessMode{rwop})
}

func (g *Gen) vac() *string {
	if !g.chance(8) {
		return nil
	}
	v := pick(g, "gold", "silver")
	return &v
}

func bigger(a, b string) bool { q, r := Quantity(a), Quantity(b); return q.Cmp(r) > 0 }

// newClaim is a pending claim of a fresh name and uid.
func (g *Gen) newClaim(class string) *corev1.PersistentVolumeClaim {
	n := g.id()
	// uids are in the apiserver's form: a populator's claim is named after one.
	c := Claim(g.ns(), fmt.Sprintf("c-%d", n), fmt.Sprintf("00000000-0000-4000-8000-%012d", n), g.size(), class, g.modes()...)
	if g.chance(10) {
		c.Spec.DataSourceRef = &corev1.TypedObjectReference{APIGroup: ptr.To("example.io"), Kind: "Hello", Name: "hello"}
	}
	if g.chance(8) {
		block := corev1.PersistentVolumeBlock
		c.Spec.VolumeMode = &block
	}
	c.Spec.VolumeAttributesClassName = g.vac()
	if g.chance(5) {
		c.Finalizers = nil
	}
	return c
}

// volumeFor is a static volume that fits the claim (or any claim, when c is nil).
func (g *Gen) volumeFor(c *corev1.PersistentVolumeClaim, class string) *corev1.PersistentVolume {
	size, modes := g.size(), g.modes()
	if c != nil {
		size = c.Spec.Resources.Requests.Storage().String()
		if g.chance(30) {
			size = pick(g, "2Gi", "5Gi")
			if bigger(c.Spec.Resources.Requests.Storage().String(), size) {
				size = c.Spec.Resources.Requests.Storage().String()
			}
		}
		modes = append([]corev1.PersistentVolumeAccessMode(nil), c.Spec.AccessModes...)
		if g.chance(30) && !slices.Contains(modes, rox) {
			modes = append(modes, rox)
		}
	}
	pv := Volume(fmt.Sprintf("pv-%d", g.id()), size, class, modes...)
	if c != nil {
		pv.Spec.VolumeMode = c.Spec.VolumeMode
		pv.Spec.VolumeAttributesClassName = c.Spec.VolumeAttributesClassName
	} else {
		pv.Spec.VolumeAttributesClassName = g.vac()
	}
	pv.Spec.PersistentVolumeReclaimPolicy = pick(g, corev1.PersistentVolumeReclaimRetain, corev1.PersistentVolumeReclaimRetain,
		corev1.PersistentVolumeReclaimDelete, corev1.PersistentVolumeReclaimRecycle)
	if g.chance(25) {
		pv.Spec.NodeAffinity = pick(g, HostAffinity("node-a"), HostAffinity("node-b"), ZoneAffinity("zone-a"))
	}
	if g.chance(5) {
		pv.Finalizers = nil
	}
	if g.chance(10) {
		SetAnn(&pv.ObjectMeta, annConfirm, pick(g, "Delete", "Recycle"))
	}
	return pv
}

// bind makes a bound pair of a volume and a claim, the way variant says it came about:
// "controller" (the PV controller chose the volume), "prebound-volume" (an admin pre-bound the
// volume), "prebound-claim" (the user named the volume).
func bind(pv *corev1.PersistentVolume, c *corev1.PersistentVolumeClaim, variant string) {
	pv.Spec.ClaimRef = RefTo(c)
	pv.Status.Phase = corev1.VolumeBound
	c.Spec.VolumeName = pv.Name
	SetAnn(&c.ObjectMeta, annBindCompleted, "yes")
	c.Status.Phase = corev1.ClaimBound
	c.Status.Capacity = pv.Spec.Capacity.DeepCopy()
	c.Status.AccessModes = append([]corev1.PersistentVolumeAccessMode(nil), pv.Spec.AccessModes...)
	c.Status.CurrentVolumeAttributesClassName = pv.Spec.VolumeAttributesClassName
	if variant != "prebound-volume" {
		SetAnn(&pv.ObjectMeta, annBoundBy, "yes")
	}
	if variant != "prebound-claim" {
		SetAnn(&c.ObjectMeta, annBoundBy, "yes")
	}
}

// provisionedPair is a claim of a dynamic class bound to the volume provisioned for it.
func (g *Gen) provisionedPair() (*corev1.PersistentVolume, *corev1.PersistentVolumeClaim) {
	class := pick(g, ClassFast, ClassLocal)
	c := g.newClaim(class)
	SetAnn(&c.ObjectMeta, annProvisioner, Driver)
	SetAnn(&c.ObjectMeta, annBetaProv, Driver)
	if class == ClassLocal {
		SetAnn(&c.ObjectMeta, annSelectedNode, pick(g, "node-a", "node-b"))
	}
	pv := Provisioned(c)
	AddFin(&pv.ObjectMeta, FinPV)
	if g.chance(20) {
		pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
		DelFin(&pv.ObjectMeta, FinProvisioner)
	}
	bind(pv, c, "provisioned")
	return pv, c
}

func (g *Gen) staticPair() (*corev1.PersistentVolume, *corev1.PersistentVolumeClaim) {
	class := pick(g, "", ClassManual, ClassLocal)
	c := g.newClaim(class)
	pv := g.volumeFor(c, class)
	if class == ClassLocal {
		node := pick(g, "node-a", "node-b")
		pv.Spec.NodeAffinity = HostAffinity(node)
		if g.chance(50) {
			SetAnn(&c.ObjectMeta, annSelectedNode, node)
		}
	}
	bind(pv, c, pick(g, "controller", "controller", "prebound-volume", "prebound-claim"))
	return pv, c
}

func (g *Gen) pair() (*corev1.PersistentVolume, *corev1.PersistentVolumeClaim) {
	if g.chance(35) {
		return g.provisionedPair()
	}
	return g.staticPair()
}

// World makes a random starting cluster: the base classes and nodes and a few pieces, each a
// state the invariants care about.
func (g *Gen) World() *World {
	w := BaseWorld()
	for range 2 + g.R.IntN(4) {
		g.piece(w)
	}
	g.Observe(w)
	return w
}

func (g *Gen) piece(w *World) {
	put := func(pv *corev1.PersistentVolume, c *corev1.PersistentVolumeClaim) {
		if pv != nil {
			w.Put(pv)
		}
		if c != nil {
			w.Put(c)
		}
	}
	switch g.R.IntN(15) {
	case 0, 1, 2: // a bound pair
		put(g.pair())
	case 3: // Released: the claim was deleted, or deleted and re-created under the same name
		pv, c := g.pair()
		pv.Status.Phase = corev1.VolumeReleased
		g.claims[c.UID] = c
		if g.chance(40) {
			again := Claim(c.Namespace, c.Name, fmt.Sprintf("uid-%d", g.id()), c.Spec.Resources.Requests.Storage().String(), className(c), c.Spec.AccessModes...)
			put(nil, again)
		}
		if g.chance(15) {
			pv.DeletionTimestamp = &deletionTime
		}
		put(pv, nil)
	case 4: // a pre-bound claim: it names a volume that is free, pre-bound to it, or taken
		c := g.newClaim(pick(g, "", ClassManual))
		pv := g.volumeFor(c, className(c))
		c.Spec.VolumeName = pv.Name
		switch g.R.IntN(3) {
		case 1:
			pv.Spec.ClaimRef = RefByName(c.Namespace, c.Name)
		case 2:
			other := g.newClaim(className(c))
			bind(pv, other, "controller")
			put(nil, other)
		}
		put(pv, c)
	case 5: // a pre-bound volume: reserved by name for a claim that exists or not yet
		c := g.newClaim(pick(g, "", ClassManual))
		pv := g.volumeFor(c, className(c))
		pv.Spec.ClaimRef = RefByName(c.Namespace, c.Name)
		put(pv, nil)
		if g.chance(60) {
			put(nil, c)
		} else {
			g.claims[c.UID] = c
		}
	case 6: // expansion in progress: the claim asks for more than its volume has yet
		pv, c := g.pair()
		c.Spec.Resources.Requests[corev1.ResourceStorage] = Quantity("10Gi")
		if g.chance(35) {
			// ... and the volume lost its claimRef (the PV controller will re-link it)
			pv.Spec.ClaimRef = nil
			DelAnn(&pv.ObjectMeta, annBoundBy)
			pv.Status.Phase = pick(g, corev1.VolumeAvailable, corev1.VolumeBound)
		}
		put(pv, c)
	case 7: // a claim being provisioned
		c := g.newClaim(pick(g, ClassFast, ClassLocal))
		SetAnn(&c.ObjectMeta, annProvisioner, Driver)
		SetAnn(&c.ObjectMeta, annBetaProv, Driver)
		if className(c) == ClassLocal || g.chance(20) {
			SetAnn(&c.ObjectMeta, annSelectedNode, pick(g, "node-a", "node-b"))
		}
		put(nil, c)
	case 8, 9: // free volumes
		put(g.volumeFor(nil, pick(g, "", ClassManual, ClassLocal)), nil)
	case 10: // pending claims
		put(nil, g.newClaim(pick(g, "", ClassManual, ClassFast, ClassLocal)))
	case 11: // the PV controller half way through a bind: the volume is linked, the claim not yet
		c := g.newClaim(pick(g, "", ClassManual))
		pv := g.volumeFor(c, className(c))
		pv.Spec.ClaimRef = RefTo(c)
		SetAnn(&pv.ObjectMeta, annBoundBy, "yes")
		pv.Status.Phase = pick(g, corev1.VolumeBound, corev1.VolumeAvailable)
		put(pv, c)
	case 12: // a volume linked to a claim that is bound to another volume (awaiting rollback)
		pv, c := g.staticPair()
		stale := g.volumeFor(c, pv.Spec.StorageClassName)
		stale.Spec.ClaimRef = RefTo(c)
		stale.Status.Phase = corev1.VolumeBound
		if g.chance(60) {
			SetAnn(&stale.ObjectMeta, annBoundBy, "yes")
		}
		put(pv, c)
		put(stale, nil)
	case 13: // a claim being deleted, still bound
		pv, c := g.pair()
		c.DeletionTimestamp = &deletionTime
		put(pv, c)
	case 14: // a volume populator at work: the claim it fills waits for its data, and the claim
		// it made for it (named after its uid) is bound to the volume it fills
		pv, prime := g.pair()
		target := g.newClaim(className(prime))
		target.Spec.DataSourceRef = &corev1.TypedObjectReference{APIGroup: ptr.To("example.io"), Kind: "Hello", Name: "hello"}
		target.Spec.Resources = *prime.Spec.Resources.DeepCopy()
		target.Spec.AccessModes = prime.Spec.AccessModes
		target.Spec.VolumeMode = prime.Spec.VolumeMode
		target.Spec.VolumeAttributesClassName = prime.Spec.VolumeAttributesClassName
		delete(w.PVCs, claimKey(prime.Namespace, prime.Name))
		prime.Namespace, prime.Name = pick(g, "populators", target.Namespace), "prime-"+string(target.UID)
		pv.Spec.ClaimRef = RefTo(prime)
		put(pv, prime)
		put(nil, target)
	}
}

// Pods puts pods on the world's nodes that use some of its claims: most bound claims and claims
// with a selected node get one, on a node their volume admits (or, now and then, on any node: a
// pod placed with spec.nodeName), running, scheduled but not running yet, finished, or not
// scheduled.
func (g *Gen) Pods(w *World) {
	nodes := slices.Sorted(maps.Keys(w.Nodes))
	for _, c := range w.SortedPVCs() {
		_, selected := c.Annotations[annSelectedNode]
		if c.Spec.VolumeName == "" && !selected || !g.chance(70) {
			continue
		}
		var near []string
		for _, n := range nodes {
			if pv := w.PVs[c.Spec.VolumeName]; pv == nil || reaches(w, pv, n) {
				near = append(near, n)
			}
		}
		if len(near) == 0 || g.chance(10) {
			near = nodes
		}
		p := testobj.Pod(c.Namespace, fmt.Sprintf("pod-%d", g.id()), pick(g, near...), corev1.PodRunning, c.Name)
		switch g.R.IntN(8) {
		case 0, 1:
			p.Status.Phase = corev1.PodPending
		case 2:
			p.Status.Phase = corev1.PodSucceeded
		case 3:
			p.Spec.NodeName, p.Status.Phase = "", corev1.PodPending
		}
		w.Put(p)
	}
}

// Observe remembers the claims of a world, so that later writes can name claims that are gone.
func (g *Gen) Observe(w *World) {
	for _, c := range w.PVCs {
		if _, ok := g.claims[c.UID]; !ok || has(c.ObjectMeta, annProvisioner) {
			g.claims[c.UID] = c
		}
	}
}

// provisioning lists the claims an external provisioner may be working for: every claim that
// asked for a volume of our driver, live or not (a provisioner finishing late is the race).
func (g *Gen) provisioning(w *World) []*corev1.PersistentVolumeClaim {
	var out []*corev1.PersistentVolumeClaim
	for _, uid := range sortedUIDs(g.claims) {
		c := g.claims[uid]
		if c.Annotations[annProvisioner] != Driver || c.Spec.VolumeName != "" {
			continue
		}
		if live := w.PVC(c.Namespace, c.Name); live != nil && live.UID == c.UID && live.Spec.VolumeName == "" {
			c = live
		}
		out = append(out, c)
	}
	return out
}

func sortedUIDs(m map[types.UID]*corev1.PersistentVolumeClaim) []types.UID {
	out := make([]types.UID, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
