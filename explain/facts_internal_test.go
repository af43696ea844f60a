package explain

import (
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/pvguard/pvguard/clusterstate"
	"github.com/pvguard/pvguard/test/testobj"
)

// TestVolumesClaimingIsTheStates: the facts' search of claimRefs finds, for every claim a
// volume names and for claims none names, the volumes the state's own lookup finds, in the
// state's order: several volumes naming one claim, a claimRef without a namespace, and names
// that differ only across the namespace/name boundary included.
func TestVolumesClaimingIsTheStates(t *testing.T) {
	in := Input{State: synthetic(3, 300, 60), NodesListed: true}
	volumes := in.state().Volumes()
	extra := []*corev1.PersistentVolume{
		testobj.PV("twice-a", testobj.ClaimRef("ns-00", "shared", "")),
		testobj.PV("twice-b", testobj.ClaimRef("ns-00", "shared", "")),
		testobj.PV("no-namespace", testobj.ClaimRef("", "shared", "")),
		testobj.PV("boundary-a", testobj.ClaimRef("ns-0", "0shared", "")),
		testobj.PV("boundary-b", testobj.ClaimRef("ns-00", "shared-2", "")),
	}
	volumes = slices.Insert(slices.Clone(volumes), len(volumes)/2, extra...)
	state := clusterstate.New(in.state().Claims(), volumes, in.state().Classes(), in.state().Nodes())
	x := indexInput(Input{State: state, NodesListed: true})
	names := map[[2]string]bool{{"ns-00", "nobody"}: true, {"", ""}: true}
	for _, v := range volumes {
		if ref := v.Spec.ClaimRef; ref != nil {
			names[[2]string{ref.Namespace, ref.Name}] = true
		}
	}
	for _, c := range state.Claims() {
		names[[2]string{c.Namespace, c.Name}] = true
	}
	for n := range names {
		want, _ := state.VolumesClaiming(n[0], n[1])
		got := x.volumesClaiming(n[0], n[1])
		if !slices.Equal(got, want) {
			t.Errorf("volumes claiming %s/%s: %s, want %s", n[0], n[1], volumeNames(got), volumeNames(want))
		}
	}
	if got := x.volumesClaiming("ns-00", "shared"); len(got) != 2 {
		t.Errorf("volumes claiming ns-00/shared: %s, want twice-a and twice-b", volumeNames(got))
	}
}

func volumeNames(vs []*corev1.PersistentVolume) string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.Name
	}
	return fmt.Sprint(out)
}
