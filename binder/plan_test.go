package binder

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/test/testobj"
)

// planner is an active binder over a fake cluster holding objs, with an empty policy view.
func planner(tb testing.TB, objs ...client.Object) *Binder {
	tb.Helper()
	c := fake.NewClientBuilder().WithObjects(objs...).Build()
	b, err := New(Options{
		Mode: ModeActive, Engine: func() *policy.Engine { return policy.NewEngine(nil) },
		Views:    func(context.Context) policy.View { return testobj.NewView() },
		Recorder: record.NewFakeRecorder(10), Cache: c, Live: c, Writer: c,
	})
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// TestPlanPrefersTheVolumeThatHasTheClaimsUID: a claim pre-bound from two volumes, one by name
// only and one already carrying its uid (a bind begun before a crash), gets the latter whatever
// the list order, so the binder does not bind one and then unbind the other.
func TestPlanPrefersTheVolumeThatHasTheClaimsUID(t *testing.T) {
	claim := testobj.PVC("ns", "c")
	byName := testobj.PV("a-by-name", testobj.Phase(corev1.VolumeAvailable), testobj.ClaimRef("ns", "c", ""))
	byUID := testobj.PV("b-by-uid", testobj.Phase(corev1.VolumeAvailable), testobj.ClaimRef("ns", "c", string(claim.UID)))
	for _, order := range [][]client.Object{{byName, byUID}, {byUID, byName}} {
		b := planner(t, append([]client.Object{claim.DeepCopy()}, order...)...)
		if err := b.runPlan(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := b.plan[claim.UID]; got != byUID.Name {
			t.Errorf("order %s, %s: planned %q, want %q", order[0].GetName(), order[1].GetName(), got, byUID.Name)
		}
	}
}

// TestPlanChoosesByVolumeAttributesClass: a claim is planned only on a volume of the
// VolumeAttributesClass it asks for (unset and "" both meaning none), never on one of another
// class or of none, even when that one is smaller and so preferred, or pre-bound to the claim.
func TestPlanChoosesByVolumeAttributesClass(t *testing.T) {
	avail := testobj.Phase(corev1.VolumeAvailable)
	small, big := testobj.Capacity("1Gi"), testobj.Capacity("2Gi")
	for _, tc := range []struct {
		name    string
		claim   *corev1.PersistentVolumeClaim
		volumes []*corev1.PersistentVolume
		want    string
	}{
		{name: "gold claim skips a smaller silver volume and a smaller one of none",
			claim: testobj.PVC("ns", "c", testobj.ClaimVolumeAttributesClass("gold")),
			volumes: []*corev1.PersistentVolume{
				testobj.PV("a-silver", small, avail, testobj.VolumeAttributesClass("silver")),
				testobj.PV("b-none", small, avail),
				testobj.PV("c-gold", big, avail, testobj.VolumeAttributesClass("gold")),
			},
			want: "c-gold"},
		{name: "claim of none skips a smaller gold volume",
			claim: testobj.PVC("ns", "c"),
			volumes: []*corev1.PersistentVolume{
				testobj.PV("a-gold", small, avail, testobj.VolumeAttributesClass("gold")),
				testobj.PV("b-empty", big, avail, testobj.VolumeAttributesClass("")),
			},
			want: "b-empty"},
		{name: `claim of "" takes a volume of none`,
			claim:   testobj.PVC("ns", "c", testobj.ClaimVolumeAttributesClass("")),
			volumes: []*corev1.PersistentVolume{testobj.PV("a-none", small, avail)},
			want:    "a-none"},
		{name: "gold claim gets no volume when only silver ones are free",
			claim:   testobj.PVC("ns", "c", testobj.ClaimVolumeAttributesClass("gold")),
			volumes: []*corev1.PersistentVolume{testobj.PV("a-silver", small, avail, testobj.VolumeAttributesClass("silver"))},
			want:    ""},
		{name: "gold claim is not planned on a silver volume pre-bound to it",
			claim:   testobj.PVC("ns", "c", testobj.ClaimVolumeAttributesClass("gold")),
			volumes: []*corev1.PersistentVolume{testobj.PV("a-silver", small, avail, testobj.VolumeAttributesClass("silver"), testobj.ClaimRef("ns", "c", ""))},
			want:    ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := []client.Object{tc.claim.DeepCopy()}
			for _, v := range tc.volumes {
				objs = append(objs, v.DeepCopy())
			}
			b := planner(t, objs...)
			if err := b.runPlan(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := b.plan[tc.claim.UID]; got != tc.want {
				t.Errorf("planned %q, want %q", got, tc.want)
			}
		})
	}
}

// TestBindRecordsTheVolumeAttributesClass: the binder's fourth write records on the claim the
// VolumeAttributesClass of the volume it was given, as upstream does; without it the
// external-resizer would take the claim's spec for a modification still to make.
func TestBindRecordsTheVolumeAttributesClass(t *testing.T) {
	for _, tc := range []struct {
		name string
		pv   *corev1.PersistentVolume
		want *string
	}{
		{name: "gold", pv: testobj.PV("pv-1", testobj.Phase(corev1.VolumeAvailable), testobj.VolumeAttributesClass("gold")), want: ptrTo("gold")},
		{name: "none", pv: testobj.PV("pv-1", testobj.Phase(corev1.VolumeAvailable))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			claim := testobj.PVC("ns", "c")
			if tc.want != nil {
				claim = testobj.PVCWith(claim, testobj.ClaimVolumeAttributesClass(*tc.want))
			}
			c := fake.NewClientBuilder().WithObjects(claim.DeepCopy(), tc.pv.DeepCopy()).Build()
			b, err := New(Options{
				Mode: ModeActive, Engine: func() *policy.Engine { return policy.NewEngine(nil) },
				Views:    func(context.Context) policy.View { return testobj.NewView(claim.DeepCopy(), tc.pv.DeepCopy()) },
				Recorder: record.NewFakeRecorder(10), Cache: c, Live: c, Writer: c,
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := b.bind(context.Background(), tc.pv.DeepCopy(), claim.DeepCopy()); err != nil {
				t.Fatal(err)
			}
			got := &corev1.PersistentVolumeClaim{}
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(claim), got); err != nil {
				t.Fatal(err)
			}
			if got.Status.Phase != corev1.ClaimBound {
				t.Fatalf("claim phase %q, want Bound", got.Status.Phase)
			}
			cur := got.Status.CurrentVolumeAttributesClassName
			if (cur == nil) != (tc.want == nil) || cur != nil && *cur != *tc.want {
				t.Errorf("status.currentVolumeAttributesClassName %v, want %v", deref(cur), deref(tc.want))
			}
		})
	}
}

func ptrTo(s string) *string { return &s }

func deref(s *string) string {
	if s == nil {
		return "<unset>"
	}
	return fmt.Sprintf("%q", *s)
}

// TestPlanCountsVolumesBeingMarkedAvailable: a volume whose Available write is in flight is
// still the best fit for the claim it fits: the plan gives it to that claim (whose bind waits
// for the write). Left out of plans, the claim got either no volume or, when the larger claim
// did not exist yet (volumes and claims created one pair at a time), the larger volume for
// good, which stranded the larger claim once it came (TestStaticPairsAllBound, rarely).
func TestPlanCountsVolumesBeingMarkedAvailable(t *testing.T) {
	small, large := testobj.PVC("ns", "small", testobj.Request("1Gi")), testobj.PVC("ns", "large", testobj.Request("2Gi"))
	pv1 := testobj.PV("pv-1gi", testobj.Capacity("1Gi"), testobj.Phase(corev1.VolumePending))
	pv2 := testobj.PV("pv-2gi", testobj.Capacity("2Gi"), testobj.Phase(corev1.VolumeAvailable))
	for _, tc := range []struct {
		name    string
		claims  []*corev1.PersistentVolumeClaim
		marking bool
	}{
		{name: "no write in flight", claims: []*corev1.PersistentVolumeClaim{small, large}},
		{name: "the small volume's Available write in flight", claims: []*corev1.PersistentVolumeClaim{small, large}, marking: true},
		{name: "in flight, before the large claim exists", claims: []*corev1.PersistentVolumeClaim{small}, marking: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := []client.Object{pv1.DeepCopy(), pv2.DeepCopy()}
			for _, c := range tc.claims {
				objs = append(objs, c.DeepCopy())
			}
			c := fake.NewClientBuilder().WithObjects(objs...).Build()
			b, err := New(Options{
				Mode: ModeActive, Engine: func() *policy.Engine { return policy.NewEngine(nil) },
				Views: func(context.Context) policy.View {
					return testobj.NewView(small.DeepCopy(), large.DeepCopy(), pv1.DeepCopy(), pv2.DeepCopy())
				},
				Recorder: record.NewFakeRecorder(10), Cache: c, Live: c, Writer: c,
			})
			if err != nil {
				t.Fatal(err)
			}
			b.marking[pv1.Name] = tc.marking
			if err := b.runPlan(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got, want := b.plan[small.UID], pv1.Name; got != want {
				t.Errorf("claim small planned on %q, want %q", got, want)
			}
			if got, planned := b.plan[large.UID]; planned && got != pv2.Name {
				t.Errorf("claim large planned on %q, want %q", got, pv2.Name)
			}
			// The bind itself still waits for the write.
			if err := b.bind(context.Background(), pv1.DeepCopy(), small.DeepCopy()); err != nil {
				t.Fatal(err)
			}
			got := &corev1.PersistentVolume{}
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(pv1), got); err != nil {
				t.Fatal(err)
			}
			if bound := got.Spec.ClaimRef != nil; bound == tc.marking {
				t.Errorf("volume pv-1gi claimRef %v with its Available write in flight %v: a bind must wait for that write, and only for it", got.Spec.ClaimRef, tc.marking)
			}
		})
	}
}

// BenchmarkPlanSelectingPool times one plan of a static pool where every claim selects volumes
// by label: 1,000 claims and 1,000 Available volumes of one class, every volume fitting every
// claim by size (the planner asks about all 1M pairs). Results are in docs/benchmarks.md.
func BenchmarkPlanSelectingPool(b *testing.B) {
	const n = 1000
	var objs []client.Object
	for i := range n {
		objs = append(objs,
			testobj.PVC("ns", fmt.Sprintf("c-%04d", i), testobj.Request("1Gi"), testobj.Selector(map[string]string{"pool": "fast"})),
			testobj.PV(fmt.Sprintf("pv-%04d", i), testobj.Capacity("2Gi"), testobj.Phase(corev1.VolumeAvailable),
				testobj.PVMeta(testobj.Label("pool", "fast"))))
	}
	bd := planner(b, objs...)
	b.ReportAllocs()
	for b.Loop() {
		if err := bd.runPlan(context.Background()); err != nil {
			b.Fatal(err)
		}
		planned := 0
		for _, v := range bd.plan {
			if v != "" {
				planned++
			}
		}
		if planned != n {
			b.Fatalf("planned %d of %d claims", planned, n)
		}
	}
}
