package audit

import (
	"fmt"
	"slices"
	"testing"

	"github.com/pvguard/pvguard/clusterstate"
	"github.com/pvguard/pvguard/test/gen"
)

// TestUpdateDropsAndMerges: an incremental audit's results, with objects that came and objects
// gone of every kind in one update (and objects gone that were never kept), leave the kept
// results those of the objects left: in report order when they were, in any order when a full
// audit had left them in its own.
func TestUpdateDropsAndMerges(t *testing.T) {
	var all []clusterstate.Key
	for i := range 40 {
		all = append(all, clusterstate.ClassKey(fmt.Sprintf("class-%02d", i)),
			clusterstate.ClaimKey(fmt.Sprintf("ns-%d", i%4), fmt.Sprintf("claim-%02d", i)), clusterstate.VolumeKey(fmt.Sprintf("pv-%02d", i)))
	}
	for _, sorted := range []bool{true, false} {
		r := &Runner{}
		for i, k := range all {
			if i%5 != 4 { // every fifth object comes later
				r.results = append(r.results, result{key: k, row: &row{phase: "before"}})
			}
		}
		if sorted {
			r.sortResults()
		}
		var came []result
		var gone, want []clusterstate.Key
		for i, k := range all {
			switch {
			case i%5 == 4:
				came, want = append(came, result{key: k, row: &row{phase: "after"}}), append(want, k)
			case i%3 == 0 || i%7 == 1:
				gone = append(gone, k)
			case i%2 == 0:
				came, want = append(came, result{key: k, row: &row{phase: "after"}}), append(want, k)
			default:
				want = append(want, k)
			}
		}
		// An object that came and went between two audits was never kept.
		gone = append(gone, clusterstate.VolumeKey("pv-never"), clusterstate.ClaimKey("ns-0", "never"))
		slices.Reverse(gone) // in no particular order, as a map gives them
		r.update(came, gone)
		var got []clusterstate.Key
		for _, res := range r.results {
			got = append(got, res.key)
		}
		if !sorted {
			slices.SortFunc(got, compareKeys)
		}
		slices.SortFunc(want, compareKeys)
		if !slices.Equal(got, want) || r.sorted != sorted {
			t.Errorf("sorted %v: kept %d results %v (sorted %v)\nwant %d %v", sorted, len(got), got, r.sorted, len(got), want)
		}
		updated := 0
		for _, res := range r.results {
			if res.row.phase == "after" {
				updated++
			}
		}
		if updated != len(came) {
			t.Errorf("sorted %v: %d results updated, want %d", sorted, updated, len(came))
		}
	}
}

// BenchmarkUpdate times what an incremental audit of one object does to the kept results of a
// full audit of 50,000 objects: left in the full audit's order (a scan), sorted first (the first
// incremental audit after a full audit, were they sorted then), and already sorted (a binary
// search).
func BenchmarkUpdate(b *testing.B) {
	st := gen.Inventory(50000)
	var keys []clusterstate.Key
	for _, o := range st.Objects() {
		res, err := record(o, nil, st)
		if err != nil {
			b.Fatal(err)
		}
		keys = append(keys, res.key)
	}
	one := []result{{key: keys[len(keys)/2]}}
	fill := func(r *Runner) {
		r.results = r.results[:0]
		for _, k := range keys {
			r.results = append(r.results, result{key: k})
		}
		r.sorted = false
	}
	b.Run("unsorted", func(b *testing.B) {
		r := &Runner{}
		fill(r)
		for b.Loop() {
			r.update(one, nil)
		}
	})
	b.Run("sort-then-search", func(b *testing.B) {
		r := &Runner{}
		for b.Loop() {
			b.StopTimer()
			fill(r)
			b.StartTimer()
			r.sortResults()
			r.update(one, nil)
		}
	})
	b.Run("sorted", func(b *testing.B) {
		r := &Runner{}
		fill(r)
		r.sortResults()
		for b.Loop() {
			r.update(one, nil)
		}
	})
}
