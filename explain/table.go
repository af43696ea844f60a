package explain

import (
	"math/bits"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/pvguard/pvguard/clusterstate"
	"github.com/pvguard/pvguard/policy"
)

// This file is the candidate table as the server keeps it: one pass over the volumes that says,
// for each, only which checks it fails (failedChecks, a bit per check, no text), and the rows
// with their texts made only for the volumes an answer shows or the verdict reads. A row of every
// volume (candidates) costs a kilobyte or so a volume and a sort that allocates; at 100,000
// volumes that was most of an explanation's time and memory, and of its answer's size.

// entry is one volume of a table: the checks it fails, whether it is of the claim's class, and
// its row once made.
type entry struct {
	v       *corev1.PersistentVolume
	failed  uint16
	ofClass bool
	facts   *volumeFacts
	row     *Candidate
}

// firstFailing is what keeps the volume from the claim, as hidden volumes are counted
// (forAudience): the index in Checks of the first check it fails, claimRef before the others,
// checkCount for none ("fits").
func (e *entry) firstFailing() int {
	switch {
	case e.failed == 0:
		return checkCount
	case e.failed&claimRefBit != 0:
		return bits.TrailingZeros16(claimRefBit)
	default:
		return bits.TrailingZeros16(e.failed)
	}
}

// failingWord is the word of a firstFailing index: the check's name, "fits" for none.
func failingWord(i int) string {
	if i == checkCount {
		return "fits"
	}
	return string(Checks[i])
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
	// denials are policy's words on the pairs it denies (pairJudge.denial), by entry.
	denials map[int]policy.Text
}

// newTable makes the table of claim c: the failed set of every volume, with POLICY failed for
// the pairs policy denies of those it judges (every pair check before RESERVED passes:
// pairJudge), whose word it keeps for their rows; it names those volumes, as candidates does.
// A judged pair's row is made only when read, as any other's: policy's word is all that judging
// adds to it.
func newTable(x *index, c *corev1.PersistentVolumeClaim, targets []nodeTarget, class string) (*table, []string) {
	t := &table{x: x, c: c, targets: targets, entries: takeEntries(len(x.in.State.Volumes()))}
	judge := newPairJudge(x.in)
	var denied []string
	cf, facts := claimFactsOf(x, c), x.volumeFacts()
	for k, v := range x.in.State.Volumes() {
		x.pace.Step()
		e := entry{v: v, failed: failedChecks(x, cf, v, &facts[k], targets), ofClass: facts[k].class == class, facts: &facts[k]}
		if judge != nil && e.failed&judgedMask == 0 {
			if value, deny := judge.denial(v, c); deny {
				denied = append(denied, v.Name)
				if t.denials == nil {
					t.denials = map[int]policy.Text{}
				}
				t.denials[k], e.failed = value, e.failed|policyBit
			}
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
		if value, denied := t.denials[i]; denied {
			r = withPolicy(r, value)
		}
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
	var included []int // the entries of rows, in order: a few, or every fitting volume
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
		rows, included = append(rows, r), append(included, i)
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
		if best >= 0 && !slices.Contains(included, best) {
			rows, included = append(rows, t.row(best)), append(included, best)
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

// listed fills e's candidates from t for a reader of audience aud (none: everything), as page
// says: the rows listed, how many the reader may read (CandidatesTotal), the others counted by
// their first failing check, the volumes the reader may not read counted in Hidden, and the
// offset of the next page (-1 for none). It passes over every volume of the table once or
// twice: what it does per volume is counted in arrays, not maps, and a volume's readability is
// judged on the volume the table holds (volumeReader).
func listed(e *Explanation, t *table, aud audience, page CandidatePage) (next int) {
	var hidden []hiddenCount
	o := t.order
	if aud.Audience != nil {
		reads, at, last := t.volumeReader(aud), map[string]int{}, -1
		o = newOrder(t, func(i int) bool {
			if reads(i) {
				return true
			}
			en := &t.entries[i]
			// The class of the volume before, most often: the facts share equal strings, so
			// that compare is of one pointer.
			class := en.facts.class
			if last < 0 || hidden[last].class != class {
				k, ok := at[class]
				if !ok {
					k = len(hidden)
					at[class] = k
					hidden = append(hidden, hiddenCount{class: class})
				}
				last = k
			}
			h := &hidden[last]
			h.count++
			h.failing[en.firstFailing()]++
			return false
		})
	}
	from, to := 0, shownClosest
	if page.All {
		from, to = page.Offset, page.Offset+page.Limit
	}
	e.Candidates, e.CandidatesTotal, next = []Candidate{}, o.len(), -1
	var listedAt []int
	for k := from; k < min(to, o.len()); k++ {
		i := o.at(k)
		e.Candidates, listedAt = append(e.Candidates, t.row(i)), append(listedAt, i)
	}
	if page.All && to < o.len() {
		next = to
	}
	e.Others = nil
	if !page.All {
		// Every entry ordered, less those listed.
		var others [checkCount + 1]int
		for b := range o.buckets {
			bk := &o.buckets[b]
			for _, list := range [][]int32{bk.sorted, bk.heap} {
				for _, i := range list {
					others[t.entries[i].firstFailing()]++
				}
			}
		}
		for _, i := range listedAt {
			others[t.entries[i].firstFailing()]--
		}
		for f, n := range others {
			if n > 0 {
				e.Others = append(e.Others, CandidateGroup{Failing: failingWord(f), Count: n})
			}
		}
	}
	e.Hidden = nil
	for _, h := range hidden {
		g := HiddenVolumes{Class: h.class, Count: h.count, Failing: map[string]int{}}
		for f, n := range h.failing {
			if n > 0 {
				g.Failing[failingWord(f)] = n
			}
		}
		g.Text = hiddenText(&g)
		e.Hidden = append(e.Hidden, g)
	}
	slices.SortFunc(e.Hidden, func(a, b HiddenVolumes) int { return strings.Compare(a.Class, b.Class) })
	return next
}

// hiddenCount counts the volumes of one class a reader may not read (HiddenVolumes), by their
// first failing check (entry.firstFailing).
type hiddenCount struct {
	class   string
	count   int
	failing [checkCount + 1]int
}

// audience is who an answer is for (nil: everyone) and, when known, the rights that make it:
// two audiences of one rights key read the same objects of a state (audienceOf).
type audience struct {
	policy.Audience
	rights string
}

// volumeReader reports whether aud may read entry i's volume (aud.Reads). For a reader known by
// its RBAC rights (policy.Readers) over the table's own state, whose volumes have a name each, it
// is judged on the entry's volume, which is the one a lookup by its name finds
// (policy.Readers.ReadsVolume): no lookup per volume; and with its rights' key, once per plan
// (index.readable) for every question that reader asks of it.
func (t *table) volumeReader(aud audience) func(int) bool {
	if r, ok := aud.Audience.(policy.Readers); ok {
		if s, ok := r.View.(*clusterstate.State); ok && s == t.x.in.State && t.x.namesUnique() {
			if aud.rights == "" {
				return func(i int) bool { return r.ReadsVolume(t.entries[i].v) }
			}
			bits := t.x.readable(aud.rights, func(k int) bool { return r.ReadsVolume(s.Volumes()[k]) })
			return func(i int) bool { return bits[i/64]&(1<<(i%64)) != 0 }
		}
	}
	return func(i int) bool {
		return aud.Reads(policy.ObjectRef{Kind: policy.KindPersistentVolume, Name: t.entries[i].v.Name})
	}
}
