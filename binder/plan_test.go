package binder

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/test/testobj"
)

// TestPlanPrefersTheVolumeThatHasTheClaimsUID: a claim pre-bound from two volumes, one by name
// only and one already carrying its uid (a bind begun before a crash), gets the latter whatever
// the list order, so the binder does not bind one and then unbind the other.
func TestPlanPrefersTheVolumeThatHasTheClaimsUID(t *testing.T) {
	claim := testobj.PVC("ns", "c")
	byName := testobj.PV("a-by-name", testobj.Phase(corev1.VolumeAvailable), testobj.ClaimRef("ns", "c", ""))
	byUID := testobj.PV("b-by-uid", testobj.Phase(corev1.VolumeAvailable), testobj.ClaimRef("ns", "c", string(claim.UID)))
	for _, order := range [][]client.Object{{byName, byUID}, {byUID, byName}} {
		c := fake.NewClientBuilder().WithObjects(append([]client.Object{claim.DeepCopy()}, order...)...).Build()
		b, err := New(Options{
			Mode: ModeActive, Engine: func() *policy.Engine { return policy.NewEngine(nil) },
			Views:    func(context.Context) policy.View { return testobj.NewView() },
			Recorder: record.NewFakeRecorder(10), Cache: c, Live: c, Writer: c,
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.runPlan(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := b.plan[claim.UID]; got != byUID.Name {
			t.Errorf("order %s, %s: planned %q, want %q", order[0].GetName(), order[1].GetName(), got, byUID.Name)
		}
	}
}
