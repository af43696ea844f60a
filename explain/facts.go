package explain

import (
	"cmp"
	"hash/maphash"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pvguard/pvguard/binder"
	"github.com/pvguard/pvguard/storage"
)

// The facts the candidate table reads once per volume and once per claim (table.go), and the
// failed-check bits they give.

// checkCount is len(Checks), as a constant (TestCheckCount holds them equal).
const checkCount = 11

// checkBit is the bit of check i of Checks in a row's failed set.
func checkBit(i int) uint16 { return 1 << i }

// judgedMask are the bits of judgedAfter: a volume that fails none of them is judged by policy.
var judgedMask = func() uint16 {
	var m uint16
	for i, c := range Checks {
		if judgedAfter[c] {
			m |= checkBit(i)
		}
	}
	return m
}()

// claimRefBit and policyBit are CheckClaimRef's and CheckPolicy's bits.
var (
	claimRefBit = checkBit(slices.Index(Checks, CheckClaimRef))
	policyBit   = checkBit(slices.Index(Checks, CheckPolicy))
)

// volumeFacts is what the checks read of a volume that does not depend on the claim, read once
// per input (index.facts) rather than once per question: its class, VolumeAttributesClass,
// volume mode, capacity and access modes (a bit per mode; odd is set for a mode without one).
// One is kept per volume of every plan explained: what the volume itself holds is read from it
// when needed, not copied here.
type volumeFacts struct {
	class, attributesClass string
	mode                   corev1.PersistentVolumeMode
	// capacity is the volume's capacity in bytes, when it is a whole number of them that an
	// int64 holds (capacityExact); otherwise the check reads the volume's.
	capacity int64
	// refKey is the hash (refKeyOf) of the namespace and name of the claim its claimRef names
	// (hasRef: it has one), whatever its uid: volumesClaiming reads it.
	refKey uint64
	// The small fields last, together: 72 bytes a volume.
	capacityExact, hasRef bool
	modes                 uint8
	odd                   bool
	// avail is the volume's availability to a claim its claimRef does not name (with
	// PendingFree false and true); usedPhase says its phase is Available, Pending or none.
	avail     [2]binder.VolumeAvailability
	usedPhase bool
}

// nobody is a claim no claimRef names (no object has these names): a volume's availability to
// it is its availability to every claim its claimRef does not name.
var nobody = &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "\x00", Name: "\x00"}}

// modeBits are the access modes' bits in volumeFacts.modes.
var modeBits = map[corev1.PersistentVolumeAccessMode]uint8{corev1.ReadWriteOnce: 1, corev1.ReadOnlyMany: 2,
	corev1.ReadWriteMany: 4, corev1.ReadWriteOncePod: 8}

// accessBits are the modes' bits, and whether one has none.
func accessBits(modes []corev1.PersistentVolumeAccessMode) (bitset uint8, odd bool) {
	for _, m := range modes {
		b, ok := modeBits[m]
		bitset, odd = bitset|b, odd || !ok
	}
	return bitset, odd
}

// factsOf reads the facts of each volume, in the state's order. Every question compares each
// volume's class and mode with the claim's: the facts' equal strings share one copy, so that
// those comparisons read memory the facts keep together rather than a cache miss into each
// cached object (in a server's scattered heap at 100,000 volumes they were most of a question's
// time); claimRefs are compared by their hash first for the same reason (seed: refKeyOf's).
func factsOf(volumes []*corev1.PersistentVolume, seed maphash.Seed) []volumeFacts {
	out := make([]volumeFacts, len(volumes))
	shared := map[string]string{}
	share := func(s string) string {
		if c, ok := shared[s]; ok {
			return c
		}
		shared[s] = s
		return s
	}
	for i, v := range volumes {
		f := &out[i]
		f.class, f.attributesClass = share(storage.VolumeClass(v)), share(storage.VolumeAttributesClass(v))
		f.mode = corev1.PersistentVolumeMode(share(string(storage.VolumeMode(v.Spec.VolumeMode))))
		f.capacity, f.capacityExact = bytesOf(storage.VolumeCapacity(v))
		f.modes, f.odd = accessBits(v.Spec.AccessModes)
		f.avail = [2]binder.VolumeAvailability{binder.VolumeAvailabilityFor(nobody, v, false), binder.VolumeAvailabilityFor(nobody, v, true)}
		f.usedPhase = v.Status.Phase == corev1.VolumeAvailable || v.Status.Phase == corev1.VolumePending || v.Status.Phase == ""
		if ref := v.Spec.ClaimRef; ref != nil {
			f.hasRef, f.refKey = true, refKeyOf(seed, ref.Namespace, ref.Name)
		}
	}
	return out
}

// bytesOf is q in bytes, when it is a whole number of them that an int64 holds (exact).
func bytesOf(q resource.Quantity) (n int64, exact bool) {
	return q.AsInt64()
}

// refKeyOf is the hash of a claim's namespace and name.
func refKeyOf(seed maphash.Seed, namespace, name string) uint64 {
	var h maphash.Hash
	h.SetSeed(seed)
	h.WriteString(namespace)
	h.WriteByte(0)
	h.WriteString(name)
	return h.Sum64()
}

// refsOf are the positions of the volumes of facts with a claimRef, ordered by refKey (and by
// position within one): 4 bytes a volume, where a map of every claimRef would take several
// times that for each plan.
func refsOf(facts []volumeFacts) []int32 {
	var refs []int32
	for i := range facts {
		if facts[i].hasRef {
			refs = append(refs, int32(i))
		}
	}
	slices.SortFunc(refs, func(a, b int32) int {
		return cmp.Or(cmp.Compare(facts[a].refKey, facts[b].refKey), cmp.Compare(a, b))
	})
	return refs
}

// volumesClaiming is State.VolumesClaiming (the volumes whose claimRef names the claim, in the
// state's order) read from the volumes' facts, by a binary search of their claimRefs' hashes.
func (x *index) volumesClaiming(namespace, name string) []*corev1.PersistentVolume {
	facts, volumes, refs := x.volumeFacts(), x.in.State.Volumes(), x.facts.refs
	key := refKeyOf(x.facts.seed, namespace, name)
	var out []*corev1.PersistentVolume
	first, _ := slices.BinarySearchFunc(refs, key, func(i int32, key uint64) int { return cmp.Compare(facts[i].refKey, key) })
	for _, i := range refs[first:] {
		if facts[i].refKey != key {
			break
		}
		if ref := volumes[i].Spec.ClaimRef; ref.Name == name && ref.Namespace == namespace {
			out = append(out, volumes[i])
		}
	}
	return out
}

// claimFacts is what the checks read of the claim, read once per question.
type claimFacts struct {
	c                      *corev1.PersistentVolumeClaim
	class, attributesClass string
	mode                   corev1.PersistentVolumeMode
	request                int64 // in bytes, when requestExact (volumeFacts.capacity)
	requestExact           bool
	modes                  uint8
	odd                    bool
	sel                    storage.ClaimSelector
	selErr                 error
	// named are the volumes whose claimRef names the claim (volumesClaiming).
	named map[*corev1.PersistentVolume]bool
}

func claimFactsOf(x *index, c *corev1.PersistentVolumeClaim) *claimFacts {
	f := &claimFacts{c: c, class: storage.ClaimClass(c), attributesClass: storage.ClaimAttributesClass(c),
		mode: storage.VolumeMode(c.Spec.VolumeMode), named: map[*corev1.PersistentVolume]bool{}}
	f.request, f.requestExact = bytesOf(storage.ClaimRequest(c))
	for _, v := range x.volumesClaiming(c.Namespace, c.Name) {
		f.named[v] = true
	}
	f.modes, f.odd = accessBits(c.Spec.AccessModes)
	f.sel, f.selErr = storage.ParseClaimSelector(c)
	return f
}

// failedChecks is the set of the checks candidate fails on volume v (whose facts are vf) for the
// claim, without their texts: the same tests, on facts read once, in the same order, so that a
// bit is set exactly when candidate's row fails that check (the differential test holds the two
// to it).
func failedChecks(x *index, cf *claimFacts, v *corev1.PersistentVolume, vf *volumeFacts, targets []nodeTarget) uint16 {
	c := cf.c
	var m uint16
	i := 0
	check := func(pass bool) {
		if !pass {
			m |= checkBit(i)
		}
		i++
	}
	check(vf.class == cf.class)                     // storage.ClassesMatch
	check(vf.attributesClass == cf.attributesClass) // storage.AttributesClassesMatch
	if vf.odd || cf.odd {
		check(storage.AccessModesFit(v, c))
	} else {
		check(cf.modes&^vf.modes == 0)
	}
	check(vf.mode == cf.mode) // storage.ModesMatch
	if vf.capacityExact && cf.requestExact {
		check(vf.capacity >= cf.request)
	} else {
		check(storage.CapacityFits(v, c))
	}
	check(cf.selErr == nil && cf.sel.Admits(v)) // storage.SelectorAdmits
	if len(targets) == 0 {
		check(true)
	} else {
		_, pass, _ := nodeAffinity(v, targets)
		check(pass)
	}
	// binder.VolumeAvailabilityFor, read from the facts but for a volume whose claimRef names the
	// claim: the volume itself is not read, as most of a large cluster's are bound elsewhere.
	var avail binder.VolumeAvailability
	if cf.named[v] {
		avail = binder.VolumeAvailabilityFor(c, v, x.in.PendingFree)
	} else if x.in.PendingFree {
		avail = vf.avail[1]
	} else {
		avail = vf.avail[0]
	}
	phaseOK := avail != binder.VolumeBeingDeleted && avail != binder.VolumeNotFree
	if avail == binder.VolumeClaimedElsewhere {
		phaseOK = vf.usedPhase
	}
	check(phaseOK)
	check(avail != binder.VolumeClaimedElsewhere)
	if len(x.in.InFlight.Reserved) > 0 {
		owner, reserved := x.in.InFlight.Reserved[v.Name]
		check(!reserved || owner == c.UID)
	} else {
		check(true)
	}
	if len(x.in.InFlight.Denied) > 0 {
		_, denied := x.in.InFlight.DeniedAt(c.UID, v.Name)
		check(!denied)
	} else {
		check(true)
	}
	return m
}
