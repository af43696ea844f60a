package explain

import (
	"math/bits"
	"sync"
)

// The order of a table's entries: a heap per bucket of checks failed, read only as far as an
// answer lists, and the pooled memory a table and its order reuse from one question to the next.

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

// newOrder orders the table's entries that keep says to keep (by index; nil: all), each bucket a part of
// one array (counted first, so that no bucket grows by copies).
func newOrder(t *table, keep func(int) bool) *order {
	o := &order{t: t}
	var sizes [len(o.buckets)]int
	kept := takeInts(len(t.entries))
	for i := range t.entries {
		e := &t.entries[i]
		if keep != nil && !keep(i) {
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
	t.entries, t.arrays, t.order, t.denials = nil, nil, nil, nil
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
