package explain

import (
	"math/bits"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/pvguard/pvguard/policy"
)

// This file is the candidate table as the server keeps it: one pass over the volumes that says,
// for each, only which checks it fails (failedChecks, a bit per check, no text), and the rows
// with their texts made only for the volumes an answer shows or the verdict reads. A row of every
// volume (candidates) costs a kilobyte or so a volume and a sort that allocates; at 100,000
// volumes that was most of an explanation's time and memory, and of its answer's size.

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

// CandidatePage says which candidates a claim's answer lists (Service.Claim): the closest
// shownClosest (All false), or every candidate in the CLI's order, Limit (1 or more) from Offset
// on (0 or more; ContinueOffset reads it from the token of the page before).
type CandidatePage struct {
	All           bool
	Offset, Limit int
}

// listed fills e's candidates from t for a reader of audience aud (nil: everything), as page
// says: the rows listed, how many the reader may read (CandidatesTotal), the others counted by
// their first failing check, the volumes the reader may not read counted in Hidden, and the
// offset of the next page (-1 for none).
func listed(e *Explanation, t *table, aud policy.Audience, page CandidatePage) (next int) {
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
	if page.All {
		from, to = page.Offset, page.Offset+page.Limit
	}
	e.Candidates, e.CandidatesTotal, next = []Candidate{}, o.len(), -1
	listedAt := map[int]bool{}
	for k := from; k < min(to, o.len()); k++ {
		i := o.at(k)
		e.Candidates, listedAt[i] = append(e.Candidates, t.row(i)), true
	}
	if page.All && to < o.len() {
		next = to
	}
	e.Others = nil
	if !page.All {
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
