package audit

import (
	"fmt"
	"slices"
	"testing"

	"github.com/pvguard/pvguard/clusterstate"
)

// TestUpdateDropsAndMergesInReportOrder: an incremental audit's results, with objects that came
// and objects gone of every kind in one update (and objects gone that were never kept), leave
// the kept results those of the objects left, in report order.
func TestUpdateDropsAndMergesInReportOrder(t *testing.T) {
	var all []clusterstate.Key
	for i := range 40 {
		all = append(all, clusterstate.ClassKey(fmt.Sprintf("class-%02d", i)),
			clusterstate.ClaimKey(fmt.Sprintf("ns-%d", i%4), fmt.Sprintf("claim-%02d", i)), clusterstate.VolumeKey(fmt.Sprintf("pv-%02d", i)))
	}
	r := &Runner{}
	for i, k := range all {
		if i%5 != 4 { // every fifth object comes later
			r.results = append(r.results, result{key: k})
		}
	}
	var came []result
	var gone, want []clusterstate.Key
	for i, k := range all {
		switch {
		case i%5 == 4:
			came, want = append(came, result{key: k}), append(want, k)
		case i%3 == 0 || i%7 == 1:
			gone = append(gone, k)
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
	slices.SortFunc(want, compareKeys)
	if !slices.Equal(got, want) {
		t.Errorf("kept %d results %v\nwant %d %v", len(got), got, len(want), want)
	}
}
