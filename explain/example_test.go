package explain_test

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/pvguard/pvguard/clusterstate"
	"github.com/pvguard/pvguard/explain"
	. "github.com/pvguard/pvguard/test/testobj"
)

// A claim asks for more than the only volume of its class offers.
func ExampleClaim() {
	claims := []*corev1.PersistentVolumeClaim{PVC("team-a", "data", Request("100Gi"))}
	volumes := []*corev1.PersistentVolume{PV("pv-7", Capacity("50Gi"), Phase(corev1.VolumeAvailable))}
	in := explain.Input{State: clusterstate.New(claims, volumes, nil, nil)}
	e, err := explain.Claim(in, "team-a", "data")
	if err != nil {
		panic(err)
	}
	fmt.Println(e.State.String())
	for _, r := range e.Candidates[0].Failed() {
		fmt.Printf("%s: %s\n", r.Check, r.Value.String())
	}
	fmt.Println(e.Verdict.Text.String())
	// Output:
	// FailedBinding: no persistent volumes available for this claim and no storage class is set
	// capacity: 50Gi < 100Gi
	// no volume fits; pv-7 fits if the claim asks for at most 50Gi
}
