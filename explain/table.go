package explain

import (
	"math/bits"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pvguard/pvguard/binder"
	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/storage"
)

// This file is the candidate table as the server keeps it: one pass over the volumes that says,
// for each, only which checks it fails (failedChecks, a bit per check, no text), and the rows
// with their texts made only for the volumes an answer shows or the verdict reads. A row of every
// volume (candidates) costs a kilobyte or so a volume and a sort that allocates; at 100,000
// volumes that was most of an explanation's time and memory, and of its answer's size.

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

// claimRefBit is CheckClaimRef's bit.
var claimRefBit = checkBit(slices.Index(Checks, CheckClaimRef))

// volumeFacts is what the checks read of a volume that does not depend on the claim, read once
// per input (index.facts) rather than once per question: its class, VolumeAttributesClass,
// volume mode, capacity and access modes (a bit per mode; odd is set for a mode without one).
type volumeFacts struct {
	class, attributesClass string
	mode                   corev1.PersistentVolumeMode
	capacity               resource.Quantity
	modes                  uint8
	odd                    bool
	// avail is the volume's availability to a claim its claimRef does not name (with
	// PendingFree false and true); usedPhase says its phase is Available, Pending or none.
	avail     [2]binder.VolumeAvailability
	usedPhase bool
	// refNamespace and refName are the claim its claimRef names (hasRef: it has one), whatever
	// its uid: volumesClaiming reads them.
	refNamespace, refName string
	hasRef                bool
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

// factsOf reads the facts of each volume, in the state's order.
func factsOf(volumes []*corev1.PersistentVolume) []volumeFacts {
	out := make([]volumeFacts, len(volumes))
	for i, v := range volumes {
		f := &out[i]
		f.class, f.attributesClass = storage.VolumeClass(v), storage.VolumeAttributesClass(v)
		f.mode, f.capacity = storage.VolumeMode(v.Spec.VolumeMode), storage.VolumeCapacity(v)
		f.modes, f.odd = accessBits(v.Spec.AccessModes)
		f.avail = [2]binder.VolumeAvailability{binder.VolumeAvailabilityFor(nobody, v, false), binder.VolumeAvailabilityFor(nobody, v, true)}
		f.usedPhase = v.Status.Phase == corev1.VolumeAvailable || v.Status.Phase == corev1.VolumePending || v.Status.Phase == ""
		if ref := v.Spec.ClaimRef; ref != nil {
			f.refNamespace, f.refName, f.hasRef = ref.Namespace, ref.Name, true
		}
	}
	return out
}

// volumesClaiming is State.VolumesClaiming (the volumes whose claimRef names the claim, in the
// state's order) read from the volumes' facts: a pass over them per question costs less than the
// state's index of every claimRef, a map as large as the volumes, built again for every plan.
func (x *index) volumesClaiming(namespace, name string) []*corev1.PersistentVolume {
	facts, volumes := x.volumeFacts(), x.in.State.Volumes()
	var out []*corev1.PersistentVolume
	for i := range facts {
		if f := &facts[i]; f.hasRef && f.refName == name && f.refNamespace == namespace {
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
	request                resource.Quantity
	modes                  uint8
	odd                    bool
	sel                    storage.ClaimSelector
	selErr                 error
	// named are the volumes whose claimRef names the claim (volumesClaiming).
	named map[*corev1.PersistentVolume]bool
}

func claimFactsOf(x *index, c *corev1.PersistentVolumeClaim) *claimFacts {
	f := &claimFacts{c: c, class: storage.ClaimClass(c), attributesClass: storage.ClaimAttributesClass(c),
		mode: storage.VolumeMode(c.Spec.VolumeMode), request: storage.ClaimRequest(c), named: map[*corev1.PersistentVolume]bool{}}
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
	check(vf.mode == cf.mode)                   // storage.ModesMatch
	check(vf.capacity.Cmp(cf.request) >= 0)     // storage.CapacityFits
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

// rowMask is the failed set of a row made in full.
func rowMask(row Candidate) uint16 {
	var m uint16
	for _, r := range row.Checks {
		if !r.Pass {
			m |= checkBit(slices.Index(Checks, r.Check))
		}
	}
	return m
}

// entry is one volume of a table: the checks it fails, whether it is of the claim's class, and
// its row once made.
type entry struct {
	v       *corev1.PersistentVolume
	failed  uint16
	ofClass bool
	facts   *volumeFacts
	row     *Candidate
}

// firstFailing is what keeps the volume from the claim in one word, as hidden volumes are
// counted (forAudience): the first check it fails, claimRef before the others, "fits" for none.
func (e *entry) firstFailing() string {
	switch {
	case e.failed == 0:
		return "fits"
	case e.failed&claimRefBit != 0:
		return string(CheckClaimRef)
	default:
		return string(Checks[bits.TrailingZeros16(e.failed)])
	}
}

// table is the candidate table of claim c: every volume of the input, closest first (the order
// sortCandidates gives the rows), and the pool whose plan names the takers.
type table struct {
	x       *index
	c       *corev1.PersistentVolumeClaim
	targets []nodeTarget
	p       pool
	entries []entry
	order   *order
	// arrays are the orders' arrays, handed back by release.
	arrays [][]int32
}

// newTable makes the table of claim c: the failed set of every volume, and the rows of those
// policy judges (every pair check before RESERVED passes: pairJudge), whose POLICY column is
// policy's word; it names the volumes whose pair policy denies, as candidates does.
func newTable(x *index, c *corev1.PersistentVolumeClaim, targets []nodeTarget, class string) (*table, []string) {
	t := &table{x: x, c: c, targets: targets, entries: takeEntries(len(x.in.State.Volumes()))}
	judge := newPairJudge(x.in)
	var denied []string
	cf, facts := claimFactsOf(x, c), x.volumeFacts()
	for k, v := range x.in.State.Volumes() {
		e := entry{v: v, failed: failedChecks(x, cf, v, &facts[k], targets), ofClass: facts[k].class == class, facts: &facts[k]}
		if judge != nil && e.failed&judgedMask == 0 {
			row, deny := judge.judge(candidate(x, c, v, targets), v, c)
			if deny {
				denied = append(denied, v.Name)
			}
			e.row, e.failed = &row, rowMask(row)
		}
		t.entries = append(t.entries, e)
	}
	t.order = newOrder(t, nil)
	return t, denied
}

// order is the table's order over some of its entries (all of them, or those a reader may
// read): sortCandidates' order (checks failed, then the claim's class first, then name, then
// the input's order), made lazily. The entries fall into a bucket per number of checks failed
// and class, in one pass; each bucket is a heap that gives its entries in order as far as they
// are asked for. A table is read at its head (the closest rows, the verdict's) or a page at a
// time, so most of a large cluster's entries are never put in order.
type order struct {
	t       *table
	buckets [2 * (checkCount + 1)]bucket
	n       int
}

// bucket is one bucket of an order: sorted, the entries given out in order so far, heap the rest
// (a heap once heaped: a bucket no one reads into is never heaped).
type bucket struct {
	sorted, heap []int32
	heaped       bool
}

// bucketOf is the bucket of an entry: by checks failed, then the claim's class first.
func bucketOf(e *entry) int {
	b := 2 * bits.OnesCount16(e.failed)
	if !e.ofClass {
		b++
	}
	return b
}

// newOrder orders the table's entries that keep says to keep (nil: all), each bucket a part of
// one array (counted first, so that no bucket grows by copies).
func newOrder(t *table, keep func(*entry) bool) *order {
	o := &order{t: t}
	var sizes [len(o.buckets)]int
	kept := takeInts(len(t.entries))
	for i := range t.entries {
		e := &t.entries[i]
		if keep != nil && !keep(e) {
			continue
		}
		kept = append(kept, int32(i))
		sizes[bucketOf(e)]++
	}
	all := takeInts(len(kept))[:len(kept)]
	off := 0
	for b := range o.buckets {
		o.buckets[b].heap = all[off : off : off+sizes[b]]
		off += sizes[b]
	}
	for _, i := range kept {
		b := &o.buckets[bucketOf(&t.entries[i])]
		b.heap = append(b.heap, i)
	}
	o.n = len(kept)
	putInts(kept)
	t.arrays = append(t.arrays, all)
	return o
}

// The memory of a table that a question makes and drops (its entries, its orders' arrays) is
// reused by the next question (table.release): a table holds a few tens of bytes per volume,
// megabytes at 100,000 volumes, that would otherwise be garbage at every question.
var entryPool, intPool sync.Pool

// takeEntries is an empty slice of entries with room for n.
func takeEntries(n int) []entry {
	if p, ok := entryPool.Get().(*[]entry); ok && cap(*p) >= n {
		return (*p)[:0]
	}
	return make([]entry, 0, n)
}

// takeInts is an empty slice of int32 with room for n.
func takeInts(n int) []int32 {
	if p, ok := intPool.Get().(*[]int32); ok && cap(*p) >= n {
		return (*p)[:0]
	}
	return make([]int32, 0, n)
}

func putInts(s []int32) {
	s = s[:0]
	intPool.Put(&s)
}

// release hands the table's memory to the next question's; t must not be read after it.
func (t *table) release() {
	clear(t.entries) // the volumes they point to may go with their snapshot
	e := t.entries[:0]
	entryPool.Put(&e)
	for _, a := range t.arrays {
		putInts(a)
	}
	t.entries, t.arrays, t.order = nil, nil, nil
}

// less orders two entries of a bucket: by name, then the input's order (a stable sort by name).
func (o *order) less(i, j int32) bool {
	a, b := o.t.entries[i].v.Name, o.t.entries[j].v.Name
	if a != b {
		return a < b
	}
	return i < j
}

func (o *order) down(h []int32, i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && o.less(h[r], h[l]) {
			m = r
		}
		if !o.less(h[m], h[i]) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// len is the number of entries ordered.
func (o *order) len() int { return o.n }

// at is the entry at position k of the order (k < len).
func (o *order) at(k int) int {
	for b := range o.buckets {
		bk := &o.buckets[b]
		if size := len(bk.sorted) + len(bk.heap); k >= size {
			k -= size
			continue
		}
		if !bk.heaped {
			for i := len(bk.heap)/2 - 1; i >= 0; i-- {
				o.down(bk.heap, i)
			}
			bk.heaped = true
		}
		for len(bk.sorted) <= k {
			h := bk.heap
			bk.sorted = append(bk.sorted, h[0])
			h[0] = h[len(h)-1]
			bk.heap = h[:len(h)-1]
			o.down(bk.heap, 0)
		}
		return int(bk.sorted[k])
	}
	panic("explain: order position out of range")
}

// row is the row of entry i, made on first use, with its taker from the table's pool (withTakers).
func (t *table) row(i int) Candidate {
	e := &t.entries[i]
	if e.row == nil {
		r := candidate(t.x, t.c, e.v, t.targets)
		e.row = &r
	}
	rows := withTakers([]Candidate{*e.row}, t.p, t.c.UID, t.x.claimName)
	return rows[0]
}

// verdictRows are the rows the verdict reads, in the table's order: every volume that fits, at
// least the first that goes to no other claim (or every row, when none does), and at least n;
// then the rows of the named volumes (the one the claim is bound to or the binder takes, the
// one spec.volumeName names) when they are further down. The verdict over them is the verdict
// over the whole table: it reads the fitting rows, the first row no other claim takes, the first
// row, and the named volumes' rows by name.
func (t *table) verdictRows(n int, named ...string) []Candidate {
	var rows []Candidate
	included := map[int]bool{}
	free := false
	for k := 0; k < t.order.len(); k++ {
		i := t.order.at(k)
		if k >= n && free && t.entries[i].failed != 0 {
			break
		}
		var r Candidate
		if k >= n && t.entries[i].failed == 0 && !slices.Contains(named, t.entries[i].v.Name) {
			// Of a fitting volume the verdict reads only its name and taker: no texts.
			r = withTakers([]Candidate{{Volume: t.entries[i].v.Name, Class: t.entries[i].facts.class, Fits: true}}, t.p, t.c.UID, t.x.claimName)[0]
		} else {
			r = t.row(i)
		}
		free = free || r.TakenBy.IsZero()
		rows, included[i] = append(rows, r), true
	}
	for _, name := range named {
		if name == "" {
			continue
		}
		// The first in the table's order of the volumes of that name (one, but for a dump that
		// holds a name twice).
		best := -1
		for i := range t.entries {
			if t.entries[i].v.Name != name {
				continue
			}
			if best < 0 || bucketOf(&t.entries[i]) < bucketOf(&t.entries[best]) {
				best = i
			}
		}
		if best >= 0 && !included[best] {
			rows, included[best] = append(rows, t.row(best)), true
		}
	}
	return rows
}

// shownClosest is how many of the closest candidates an answer of the API lists by default.
const shownClosest = 10

// explainTable explains claim c of the indexed input x, which p plans, as explainClaim does,
// but with the candidate table kept as a table, which gives the rows on request (listed); the
// head closest rows are made in full, the others the verdict reads only as far as it reads them.
func explainTable(x *index, p pool, c *corev1.PersistentVolumeClaim, head int) (*Explanation, *table) {
	s := subjectOf(c, x.classes)
	targets := nodeTargets(c, x.in.Pods, x.in.State, s.selectedNode, s.scheduled)
	st := decide(x, s, p.plan.Volumes[c.UID])
	t, denied := newTable(x, c, targets, s.className)
	if len(denied) > 0 {
		// As explainClaim: the plan without the pairs the engine denies.
		p = x.withoutDenied(p, c.UID, denied)
		st = decide(x, s, p.plan.Volumes[c.UID])
	}
	t.p = p
	st = provisionerAsked(st, c, x.in.Events)
	st, cons := consumersOf(st, s, x.in, targets)
	st = nodeGone(st, x, c)
	st = outOfReach(st, x, c)
	running, st := provisionerRunning(st, x.in)
	rows := t.verdictRows(head, st.volume, c.Spec.VolumeName)
	e := explanation(s, st)
	e.ProvisionerRunning, e.Pods = running, cons.pods
	e.Verdict = verdict(c, st, rows, p.planned[c.UID], cons.placedWithoutScheduler)
	return e, t
}

// CandidateGroup counts the candidates an answer does not list that fail the same first check
// (Explanation.Others).
type CandidateGroup struct {
	// Failing is the first check they fail (claimRef before the others for a volume bound
	// elsewhere), "fits" for volumes that fit.
	Failing string `json:"failing"`
	Count   int    `json:"count"`
}

// candidatePage says which candidates an answer lists: the closest shownClosest (all false), or
// every candidate, limit from offset on.
type candidatePage struct {
	all           bool
	offset, limit int
}

// listed fills e's candidates from t for a reader of audience aud (nil: everything), as page
// says: the rows listed, how many the reader may read (CandidatesTotal), the others counted by
// their first failing check, the volumes the reader may not read counted in Hidden, and the
// offset of the next page (-1 for none).
func listed(e *Explanation, t *table, aud policy.Audience, page candidatePage) (next int) {
	groups := map[string]*HiddenVolumes{}
	o := t.order
	if aud != nil {
		o = newOrder(t, func(en *entry) bool {
			if aud.Reads(policy.ObjectRef{Kind: policy.KindPersistentVolume, Name: en.v.Name}) {
				return true
			}
			class := en.facts.class
			g := groups[class]
			if g == nil {
				g = &HiddenVolumes{Class: class, Failing: map[string]int{}}
				groups[class] = g
			}
			g.Count++
			g.Failing[en.firstFailing()]++
			return false
		})
	}
	from, to := 0, shownClosest
	if page.all {
		from, to = page.offset, page.offset+page.limit
	}
	e.Candidates, e.CandidatesTotal, next = []Candidate{}, o.len(), -1
	listedAt := map[int]bool{}
	for k := from; k < min(to, o.len()); k++ {
		i := o.at(k)
		e.Candidates, listedAt[i] = append(e.Candidates, t.row(i)), true
	}
	if page.all && to < o.len() {
		next = to
	}
	e.Others = nil
	if !page.all {
		others := map[string]int{}
		for b := range o.buckets {
			bk := &o.buckets[b]
			for _, list := range [][]int32{bk.sorted, bk.heap} {
				for _, i := range list {
					if !listedAt[int(i)] {
						others[t.entries[i].firstFailing()]++
					}
				}
			}
		}
		for _, c := range append(slices.Clone(Checks), "fits") {
			if n := others[string(c)]; n > 0 {
				e.Others = append(e.Others, CandidateGroup{Failing: string(c), Count: n})
			}
		}
	}
	e.Hidden = nil
	for _, g := range groups {
		g.Text = hiddenText(g)
		e.Hidden = append(e.Hidden, *g)
	}
	slices.SortFunc(e.Hidden, func(a, b HiddenVolumes) int { return strings.Compare(a.Class, b.Class) })
	return next
}
