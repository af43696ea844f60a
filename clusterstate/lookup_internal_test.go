package clusterstate

import (
	"hash/maphash"
	"slices"
	"strconv"
	"testing"
)

// TestLookupWhenEveryKeyCollides: with one hash for every key, each key's slot is found by
// comparing keys along one probe run (which wraps around the table), and the lookups still
// answer as a scan does: the last object of a key, or all of them in order.
func TestLookupWhenEveryKeyCollides(t *testing.T) {
	type obj struct{ key, id int }
	var all []obj
	for i := range 13 { // keys 0..4 repeated; key -1 is not looked up by
		all = append(all, obj{key: i % 5, id: i})
	}
	all = append(all, obj{key: -1, id: 13})
	key := func(o obj) (string, bool) { return strconv.Itoa(o.key), o.key >= 0 }
	for _, h := range []uint64{0, 1<<64 - 1, 0xdeadbeef00000007} {
		same := func(maphash.Seed, string) uint64 { return h }
		unique, each := newLookup(all, key, same, false), newLookup(all, key, same, true)
		for k := -1; k <= 6; k++ {
			var want []obj
			for _, o := range all {
				if o.key == k && k >= 0 {
					want = append(want, o)
				}
			}
			got, ok := unique.one(strconv.Itoa(k))
			if ok != (len(want) > 0) || ok && got != want[len(want)-1] {
				t.Errorf("hash %#x: one(%d) = %v, %v; want the last of %v", h, k, got, ok, want)
			}
			if got := each.each(strconv.Itoa(k)); !slices.Equal(got, want) {
				t.Errorf("hash %#x: each(%d) = %v, want %v", h, k, got, want)
			}
		}
	}
}

// TestLookupsOneObjectIsAViewWithNoRoom: a key's one object is the slice's own, and appending
// to it copies rather than writing over the next object.
func TestLookupsOneObjectIsAViewWithNoRoom(t *testing.T) {
	all := []string{"a", "b", "c"}
	l := newLookup(all, func(s string) (string, bool) { return s, true }, hashString, true)
	got := l.each("a")
	if len(got) != 1 || cap(got) != 1 || &got[0] != &all[0] {
		t.Fatalf("each(a) = %v (cap %d), want a view of the slice's first with no room", got, cap(got))
	}
	_ = append(got, "x")
	if all[1] != "b" {
		t.Fatalf("an append to a lookup's answer wrote over the slice: %v", all)
	}
}
