package explain

import (
	"math/bits"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/pvguard/pvguard/binder"
	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/storage"
)

// This file is the candidate table as the server keeps it: one pass over the volumes that says,
// for each, only which checks it fails (failedChecks, a bit per check, no text), and the rows
// with their texts made only for the volumes an answer shows or the verdict reads. A row of every
// volume (candidates) costs a kilobyte or so a volume and a sort that allocates; at 100,000
// volumes that was most of an explanation's time and memory, and of its answer's size.

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

// failedChecks is the set of the checks candidate fails on volume v for claim c, without their
// texts: the same tests in the same order, so that a bit is set exactly when candidate's row
// fails that check (the differential test holds the two to it).
func failedChecks(x *index, c *corev1.PersistentVolumeClaim, v *corev1.PersistentVolume, targets []nodeTarget) uint16 {
	var m uint16
	i := 0
	check := func(pass bool) {
		if !pass {
			m |= checkBit(i)
		}
		i++
	}
	check(storage.ClassesMatch(v, c))
	check(storage.AttributesClassesMatch(v, c))
	check(storage.AccessModesFit(v, c))
	check(storage.ModesMatch(v, c))
	check(storage.CapacityFits(v, c))
	ok, err := storage.SelectorAdmits(c, v)
	check(err == nil && ok)
	_, pass, _ := nodeAffinity(v, targets)
	check(pass)
	avail := binder.VolumeAvailabilityFor(c, v, x.in.PendingFree)
	phaseOK := avail != binder.VolumeBeingDeleted && avail != binder.VolumeNotFree
	if avail == binder.VolumeClaimedElsewhere {
		phaseOK = v.Status.Phase == corev1.VolumeAvailable || v.Status.Phase == corev1.VolumePending || v.Status.Phase == ""
	}
	check(phaseOK)
	check(avail != binder.VolumeClaimedElsewhere)
	owner, reserved := x.in.InFlight.Reserved[v.Name]
	check(!reserved || owner == c.UID)
	_, denied := x.in.InFlight.DeniedAt(c.UID, v.Name)
	check(!denied)
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
}

// newTable makes the table of claim c: the failed set of every volume, and the rows of those
// policy judges (every pair check before RESERVED passes: pairJudge), whose POLICY column is
// policy's word; it names the volumes whose pair policy denies, as candidates does.
func newTable(x *index, c *corev1.PersistentVolumeClaim, targets []nodeTarget, class string) (*table, []string) {
	t := &table{x: x, c: c, targets: targets, entries: make([]entry, 0, len(x.in.State.Volumes()))}
	judge := newPairJudge(x.in)
	var denied []string
	for _, v := range x.in.State.Volumes() {
		e := entry{v: v, failed: failedChecks(x, c, v, targets), ofClass: storage.VolumeClass(v) == class}
		if judge != nil && e.failed&judgedMask == 0 {
			row, deny := judge.judge(candidate(x, c, v, targets), v, c)
			if deny {
				denied = append(denied, v.Name)
			}
			e.row, e.failed = &row, rowMask(row)
		}
		t.entries = append(t.entries, e)
	}
	// The order of sortCandidates: checks failed, then the claim's class first, then name; stable.
	slices.SortStableFunc(t.entries, func(a, b entry) int {
		if fa, fb := bits.OnesCount16(a.failed), bits.OnesCount16(b.failed); fa != fb {
			return fa - fb
		}
		if a.ofClass != b.ofClass {
			if a.ofClass {
				return -1
			}
			return 1
		}
		switch {
		case a.v.Name < b.v.Name:
			return -1
		case a.v.Name > b.v.Name:
			return 1
		}
		return 0
	})
	return t, denied
}

// row is the i-th row, made on first use, with its taker from the table's pool (withTakers).
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
	free := false
	i := 0
	for ; i < len(t.entries); i++ {
		if i >= n && free && t.entries[i].failed != 0 {
			break
		}
		r := t.row(i)
		free = free || r.TakenBy.IsZero()
		rows = append(rows, r)
	}
	for _, name := range named {
		if name == "" {
			continue
		}
		for j := i; j < len(t.entries); j++ {
			if t.entries[j].v.Name == name {
				rows = append(rows, t.row(j))
				break
			}
		}
	}
	return rows
}

// shownClosest is how many of the closest candidates an answer of the API lists by default.
const shownClosest = 10

// explainTable explains claim c of the indexed input x, which p plans, as explainClaim does,
// but with the candidate table kept as a table: the explanation's Candidates are the rows the
// verdict read (at least the shownClosest closest), and the table gives the others on request.
func explainTable(x *index, p pool, c *corev1.PersistentVolumeClaim) (*Explanation, *table) {
	s := subjectOf(c, x.classes)
	targets := nodeTargets(c, x.in.Pods, x.in.State, s.selectedNode, s.scheduled)
	st := decide(x, s, p.plan.Volumes[c.UID])
	t, denied := newTable(x, c, targets, s.className)
	if len(denied) > 0 {
		// As explainClaim: plan again without the pairs the engine denies.
		p = planPool(x, withDenials(x.in.InFlight, c.UID, denied))
		st = decide(x, s, p.plan.Volumes[c.UID])
	}
	t.p = p
	st = provisionerAsked(st, c, x.in.Events)
	st, cons := consumersOf(st, s, x.in, targets)
	st = nodeGone(st, x, c)
	st = outOfReach(st, x, c)
	running, st := provisionerRunning(st, x.in)
	rows := t.verdictRows(shownClosest, st.volume, c.Spec.VolumeName)
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
	others := map[string]int{}
	from, to := 0, shownClosest
	if page.all {
		from, to = page.offset, page.offset+page.limit
	}
	e.Candidates, e.CandidatesTotal, next = []Candidate{}, 0, -1
	for i := range t.entries {
		en := &t.entries[i]
		if aud != nil && !aud.Reads(policy.ObjectRef{Kind: policy.KindPersistentVolume, Name: en.v.Name}) {
			class := storage.VolumeClass(en.v)
			g := groups[class]
			if g == nil {
				g = &HiddenVolumes{Class: class, Failing: map[string]int{}}
				groups[class] = g
			}
			g.Count++
			g.Failing[en.firstFailing()]++
			continue
		}
		k := e.CandidatesTotal
		e.CandidatesTotal++
		switch {
		case k >= from && k < to:
			e.Candidates = append(e.Candidates, t.row(i))
		case page.all && k >= to && next < 0:
			next = k
		case !page.all:
			others[en.firstFailing()]++
		}
	}
	e.Others = nil
	for _, c := range append(slices.Clone(Checks), "fits") {
		if n := others[string(c)]; n > 0 {
			e.Others = append(e.Others, CandidateGroup{Failing: string(c), Count: n})
		}
	}
	e.Hidden = nil
	for _, g := range groups {
		g.Text = hiddenText(g)
		e.Hidden = append(e.Hidden, *g)
	}
	slices.SortFunc(e.Hidden, func(a, b HiddenVolumes) int {
		switch {
		case a.Class < b.Class:
			return -1
		case a.Class > b.Class:
			return 1
		}
		return 0
	})
	return next
}
