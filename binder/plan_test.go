package binder

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/pvguard/pvguard/clusterstate"
	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/storage"
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

// planned is the volume the binder's installed plan gives the claim ("" for none, or unplanned).
func planned(b *Binder, claim types.UID) string {
	v, _ := b.ledger.planned(claim)
	return v
}

// installedPlan is the binder's installed plan, for the claims among objs.
func installedPlan(b *Binder, objs []client.Object) map[types.UID]string {
	plan := map[types.UID]string{}
	for _, o := range objs {
		if c, ok := o.(*corev1.PersistentVolumeClaim); ok {
			if v, ok := b.ledger.planned(c.UID); ok {
				plan[c.UID] = v
			}
		}
	}
	return plan
}

// countPlanned counts the claims among objs that the installed plan gives a volume.
func countPlanned(b *Binder, objs []client.Object) int {
	n := 0
	for _, v := range installedPlan(b, objs) {
		if v != "" {
			n++
		}
	}
	return n
}

// reserve makes a bind of the volume for the claim in flight, between two of its writes.
func reserve(b *Binder, volume string, claim types.UID) {
	if _, ok := b.ledger.beginBind(volume, claim, time.Now()); ok {
		b.ledger.endBind(volume)
	}
}

// TestPlan calls the planner as a pure function, with the cluster and the in-flight state built
// by hand.
func TestPlan(t *testing.T) {
	fast := class("fast", "csi.example.com", storagev1.VolumeBindingImmediate)
	local := class("local", storage.NoProvisioner, storagev1.VolumeBindingWaitForFirstConsumer)
	classes := []*storagev1.StorageClass{fast, local}
	avail := testobj.Phase(corev1.VolumeAvailable)
	claim := func(name string, mods ...testobj.PVCMod) *corev1.PersistentVolumeClaim {
		return testobj.PVC("ns", name, append([]testobj.PVCMod{testobj.ClaimClass("fast"), testobj.Request("1Gi")}, mods...)...)
	}
	volume := func(name, size string, mods ...testobj.PVMod) *corev1.PersistentVolume {
		return testobj.PV(name, append([]testobj.PVMod{testobj.Class("fast"), testobj.Capacity(size), avail}, mods...)...)
	}
	a, b := claim("a"), claim("b")
	onNode := func(node string) testobj.PVCMod {
		return testobj.ClaimMeta(testobj.Annotation(storage.AnnSelectedNode, node))
	}
	deniedAt := t0.Add(-time.Second)
	for _, tc := range []struct {
		name        string
		claims      []*corev1.PersistentVolumeClaim
		volumes     []*corev1.PersistentVolume
		nodes       []*corev1.Node
		pendingFree bool
		inFlight    InFlight
		want        map[string]string // claim name -> volume, for the claims the plan considers
	}{
		{name: "the smallest volume that fits",
			claims:  []*corev1.PersistentVolumeClaim{a},
			volumes: []*corev1.PersistentVolume{volume("pv-2g", "2Gi"), volume("pv-1g", "1Gi"), volume("pv-500m", "500Mi")},
			want:    map[string]string{"a": "pv-1g"}},
		{name: "a volume pre-bound with the claim's uid before one pre-bound by name",
			claims: []*corev1.PersistentVolumeClaim{a},
			volumes: []*corev1.PersistentVolume{volume("pv-free", "1Gi"), volume("pv-by-name", "1Gi", testobj.ClaimRef("ns", "a", "")),
				volume("pv-by-uid", "2Gi", testobj.ClaimRef("ns", "a", string(a.UID)))},
			want: map[string]string{"a": "pv-by-uid"}},
		{name: "claims of WaitForFirstConsumer classes, bound, naming a volume or being deleted are left out",
			claims: []*corev1.PersistentVolumeClaim{a, claim("wffc", testobj.ClaimClass("local")), claim("bound", testobj.ClaimBoundTo("pv-x")),
				claim("named", testobj.VolumeName("pv-1g")), claim("deleted", testobj.ClaimMeta(testobj.Deleting()))},
			volumes: []*corev1.PersistentVolume{volume("pv-1g", "1Gi"), testobj.PV("pv-local", testobj.Class("local"), testobj.Capacity("1Gi"), avail)},
			want:    map[string]string{"a": "pv-1g"}},
		{name: "a claim on a node takes a volume reachable from it",
			claims:  []*corev1.PersistentVolumeClaim{claim("s", onNode("n1"))},
			volumes: []*corev1.PersistentVolume{volume("pv-n2", "1Gi", testobj.NodeAffinity("kubernetes.io/hostname", "n2")), volume("pv-n1", "2Gi", testobj.NodeAffinity("kubernetes.io/hostname", "n1"))},
			nodes:   []*corev1.Node{testobj.Node("n1", nil)},
			want:    map[string]string{"s": "pv-n1"}},
		{name: "a claim on a node that does not exist takes no volume with a node affinity",
			claims:  []*corev1.PersistentVolumeClaim{claim("s", onNode("gone"))},
			volumes: []*corev1.PersistentVolume{volume("pv-n1", "1Gi", testobj.NodeAffinity("kubernetes.io/hostname", "n1")), volume("pv-anywhere", "2Gi")},
			want:    map[string]string{"s": "pv-anywhere"}},
		{name: "a volume with a bind in flight goes only to the claim being bound",
			claims:   []*corev1.PersistentVolumeClaim{a, b},
			volumes:  []*corev1.PersistentVolume{volume("pv-1g", "1Gi")},
			inFlight: InFlight{Reserved: map[string]types.UID{"pv-1g": b.UID}, At: t0},
			want:     map[string]string{"a": "", "b": "pv-1g"}},
		{name: "a pair policy denied a moment ago is left out",
			claims:   []*corev1.PersistentVolumeClaim{a},
			volumes:  []*corev1.PersistentVolume{volume("pv-1g", "1Gi"), volume("pv-2g", "2Gi")},
			inFlight: InFlight{Denied: map[types.UID]map[string]time.Time{a.UID: {"pv-1g": deniedAt}}, At: t0},
			want:     map[string]string{"a": "pv-2g"}},
		{name: "a pair policy denied a minute ago is tried again",
			claims:   []*corev1.PersistentVolumeClaim{a},
			volumes:  []*corev1.PersistentVolume{volume("pv-1g", "1Gi"), volume("pv-2g", "2Gi")},
			inFlight: InFlight{Denied: map[types.UID]map[string]time.Time{a.UID: {"pv-1g": deniedAt}}, At: deniedAt.Add(forbidTTL)},
			want:     map[string]string{"a": "pv-1g"}},
		{name: "a Pending volume is free only when Pending volumes count",
			claims:  []*corev1.PersistentVolumeClaim{a},
			volumes: []*corev1.PersistentVolume{volume("pv-new", "1Gi", testobj.Phase(corev1.VolumePending))},
			want:    map[string]string{"a": ""}},
		{name: "a Pending volume counts in active mode",
			claims:      []*corev1.PersistentVolumeClaim{a},
			volumes:     []*corev1.PersistentVolume{volume("pv-new", "1Gi", testobj.Phase(corev1.VolumePending))},
			pendingFree: true,
			want:        map[string]string{"a": "pv-new"}},
		{name: "a volume being deleted is not given out",
			claims:  []*corev1.PersistentVolumeClaim{a},
			volumes: []*corev1.PersistentVolume{volume("pv-1g", "1Gi", testobj.PVMeta(testobj.Deleting()))},
			want:    map[string]string{"a": ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Plan(PlanInput{State: clusterstate.New(tc.claims, tc.volumes, classes, tc.nodes),
				PendingFree: tc.pendingFree, InFlight: tc.inFlight})
			byName := map[string]string{}
			for _, c := range got.Claims {
				v, ok := got.Volumes[c.UID]
				if !ok {
					t.Errorf("claim %s listed but not planned", c.Name)
				}
				byName[c.Name] = v
			}
			if len(got.Volumes) != len(got.Claims) {
				t.Errorf("%d claims planned, %d listed", len(got.Volumes), len(got.Claims))
			}
			if !maps.Equal(byName, tc.want) {
				t.Errorf("plan %v, want %v", byName, tc.want)
			}
		})
	}
}

// TestPlanListsClaimsByClassThenName: the order in which the binder syncs the claims it planned.
func TestPlanListsClaimsByClassThenName(t *testing.T) {
	var claims []*corev1.PersistentVolumeClaim
	for _, c := range []struct{ namespace, name, class string }{{"ns2", "a", "x"}, {"ns1", "b", "y"}, {"ns1", "c", "x"}, {"ns1", "a", "y"}} {
		claims = append(claims, testobj.PVC(c.namespace, c.name, testobj.ClaimClass(c.class)))
	}
	var got []string
	for _, c := range Plan(PlanInput{State: clusterstate.New(claims, nil, nil, nil)}).Claims {
		got = append(got, c.Namespace+"/"+c.Name)
	}
	if want := []string{"ns1/c", "ns2/a", "ns1/a", "ns1/b"}; !slices.Equal(got, want) {
		t.Errorf("claims listed %v, want %v", got, want)
	}
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
		if got, _ := b.ledger.planned(claim.UID); got != byUID.Name {
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
			if got, _ := b.ledger.planned(tc.claim.UID); got != tc.want {
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
		{name: "gold", pv: testobj.PV("pv-1", testobj.Phase(corev1.VolumeAvailable), testobj.VolumeAttributesClass("gold")), want: ptr.To("gold")},
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
			if tc.marking && !b.ledger.startMarking(pv1.Name) {
				t.Fatal("the Available write could not start")
			}
			if err := b.runPlan(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got, want := planned(b, small.UID), pv1.Name; got != want {
				t.Errorf("claim small planned on %q, want %q", got, want)
			}
			if got, planned := b.ledger.planned(large.UID); planned && got != pv2.Name {
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
	}
	if planned := countPlanned(bd, objs); planned != n {
		b.Fatalf("planned %d of %d claims", planned, n)
	}
}

// liveBinder is an active binder over a fake cluster holding objs whose policy view reads the
// fake cluster's current volumes and claims, as the webhook's view reads the informer cache.
func liveBinder(tb testing.TB, objs ...client.Object) (*Binder, client.Client) {
	tb.Helper()
	c := fake.NewClientBuilder().WithObjects(objs...).
		WithStatusSubresource(&corev1.PersistentVolume{}, &corev1.PersistentVolumeClaim{}).Build()
	b, err := New(Options{
		Mode: ModeActive, Engine: func() *policy.Engine { return policy.NewEngine(nil) },
		Views: func(ctx context.Context) policy.View {
			var pvs corev1.PersistentVolumeList
			var pvcs corev1.PersistentVolumeClaimList
			if err := c.List(ctx, &pvs); err != nil {
				tb.Fatal(err)
			}
			if err := c.List(ctx, &pvcs); err != nil {
				tb.Fatal(err)
			}
			var all []runtime.Object
			for i := range pvs.Items {
				all = append(all, &pvs.Items[i])
			}
			for i := range pvcs.Items {
				all = append(all, &pvcs.Items[i])
			}
			return testobj.NewView(all...)
		},
		Recorder: record.NewFakeRecorder(100), Cache: c, Live: c, Writer: c,
	})
	if err != nil {
		tb.Fatal(err)
	}
	return b, c
}

func getVolume(t *testing.T, c client.Client, name string) *corev1.PersistentVolume {
	t.Helper()
	pv := &corev1.PersistentVolume{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: name}, pv); err != nil {
		t.Fatal(err)
	}
	return pv
}

func getClaim(t *testing.T, c client.Client, namespace, name string) *corev1.PersistentVolumeClaim {
	t.Helper()
	pvc := &corev1.PersistentVolumeClaim{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, pvc); err != nil {
		t.Fatal(err)
	}
	return pvc
}

// TestPlanLeavesWaitForFirstConsumerClaimsOut: the planner assigns volumes to Immediate claims
// only. A WaitForFirstConsumer claim, scheduled to a node or not, gets no plan entry, so no free
// volume: the scheduler binds those.
func TestPlanLeavesWaitForFirstConsumerClaimsOut(t *testing.T) {
	local := class("local", storage.NoProvisioner, storagev1.VolumeBindingWaitForFirstConsumer)
	fast := class("fast", "csi.example.com", storagev1.VolumeBindingImmediate)
	waiting := testobj.PVC("ns", "waiting", testobj.ClaimClass("local"))
	scheduled := testobj.PVC("ns", "scheduled", testobj.ClaimClass("local"), testobj.ClaimMeta(testobj.Annotation(storage.AnnSelectedNode, "n1")))
	immediate := testobj.PVC("ns", "immediate", testobj.ClaimClass("fast"))
	b := planner(t, local, fast, waiting, scheduled, immediate, testobj.Node("n1", nil),
		testobj.PV("pv-local-1", testobj.Class("local"), testobj.Phase(corev1.VolumeAvailable), testobj.NodeAffinity("kubernetes.io/hostname", "n1")),
		testobj.PV("pv-local-2", testobj.Class("local"), testobj.Phase(corev1.VolumeAvailable)),
		testobj.PV("pv-fast", testobj.Class("fast"), testobj.Phase(corev1.VolumeAvailable)))
	if err := b.runPlan(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*corev1.PersistentVolumeClaim{waiting, scheduled} {
		if v, planned := b.ledger.planned(c.UID); planned {
			t.Errorf("WaitForFirstConsumer claim %s planned (on %q)", c.Name, v)
		}
	}
	if got := planned(b, immediate.UID); got != "pv-fast" {
		t.Errorf("Immediate claim planned on %q, want pv-fast", got)
	}
}

// TestWaitForFirstConsumerClaimSync drives syncClaim for a WaitForFirstConsumer claim through the
// states the real scheduler and provisioners produce.
func TestWaitForFirstConsumerClaimSync(t *testing.T) {
	ctx := context.Background()
	local := class("local", storage.NoProvisioner, storagev1.VolumeBindingWaitForFirstConsumer)
	hybrid := class("hybrid", "csi.example.com", storagev1.VolumeBindingWaitForFirstConsumer)
	free := func(class string) *corev1.PersistentVolume {
		return testobj.PV("pv-static", testobj.Class(class), testobj.Phase(corev1.VolumeAvailable), testobj.NodeAffinity("kubernetes.io/hostname", "n1"))
	}

	t.Run("the scheduler's claimRef is completed", func(t *testing.T) {
		claim := testobj.PVC("ns", "c", testobj.ClaimClass("local"))
		// kube-scheduler's AssumePodVolumes/bindAPIUpdate: claimRef with uid and
		// bound-by-controller in one full Update; status stays Available.
		pv := free("local")
		testobj.ClaimRef("ns", "c", string(claim.UID))(pv)
		testobj.PVMeta(testobj.Annotation(storage.AnnBoundByController, "yes"))(pv)
		b, c := liveBinder(t, local, claim, pv)
		if err := b.syncClaim(ctx, "ns", "c"); err != nil {
			t.Fatal(err)
		}
		gotPVC, gotPV := getClaim(t, c, "ns", "c"), getVolume(t, c, "pv-static")
		if gotPVC.Spec.VolumeName != "pv-static" || gotPVC.Status.Phase != corev1.ClaimBound || gotPVC.Annotations[storage.AnnBindCompleted] != "yes" {
			t.Errorf("claim not completed: volumeName %q phase %q annotations %v", gotPVC.Spec.VolumeName, gotPVC.Status.Phase, gotPVC.Annotations)
		}
		if gotPV.Status.Phase != corev1.VolumeBound {
			t.Errorf("volume phase %q, want Bound", gotPV.Status.Phase)
		}
	})

	t.Run("selected-node with a provisioner: annotate, leave the static volume", func(t *testing.T) {
		claim := testobj.PVC("ns", "c", testobj.ClaimClass("hybrid"), testobj.ClaimMeta(testobj.Annotation(storage.AnnSelectedNode, "n1")))
		b, c := liveBinder(t, hybrid, claim, free("hybrid"), testobj.Node("n1", nil))
		if err := b.runPlan(ctx); err != nil {
			t.Fatal(err)
		}
		if err := b.syncClaim(ctx, "ns", "c"); err != nil {
			t.Fatal(err)
		}
		if ref := getVolume(t, c, "pv-static").Spec.ClaimRef; ref != nil {
			t.Errorf("static volume taken by %s/%s: selected-node asks for provisioning", ref.Namespace, ref.Name)
		}
		got := getClaim(t, c, "ns", "c")
		if got.Spec.VolumeName != "" {
			t.Errorf("claim bound to %q", got.Spec.VolumeName)
		}
		if got.Annotations[storage.AnnStorageProvisioner] != "csi.example.com" || got.Annotations[storage.AnnBetaStorageProvisioner] != "csi.example.com" {
			t.Errorf("claim not annotated for its provisioner: %v", got.Annotations)
		}
	})

	t.Run("no node selected: nothing is bound", func(t *testing.T) {
		claim := testobj.PVC("ns", "c", testobj.ClaimClass("local"))
		b, c := liveBinder(t, local, claim, free("local"))
		if err := b.runPlan(ctx); err != nil {
			t.Fatal(err)
		}
		if err := b.syncClaim(ctx, "ns", "c"); err != nil {
			t.Fatal(err)
		}
		if ref := getVolume(t, c, "pv-static").Spec.ClaimRef; ref != nil {
			t.Errorf("static volume taken by %s/%s before the scheduler chose it", ref.Namespace, ref.Name)
		}
	})
}

// TestNewVolumesMarkedAvailableAtOnce: a free Pending volume is marked Available on its first
// sync, before any plan and whether or not a plan gives it to a claim, as upstream's syncVolume
// does: the scheduler considers Available volumes only. Only a bind in flight, which writes
// Bound itself, defers the write.
func TestNewVolumesMarkedAvailableAtOnce(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		plan      bool
		reserved  bool
		wantPhase corev1.PersistentVolumePhase
	}{
		{name: "before any plan", wantPhase: corev1.VolumeAvailable},
		{name: "given to a claim by the plan", plan: true, wantPhase: corev1.VolumeAvailable},
		{name: "a bind of it in flight", reserved: true, wantPhase: corev1.VolumePending},
	} {
		t.Run(tc.name, func(t *testing.T) {
			claim := testobj.PVC("ns", "c")
			b, c := liveBinder(t, claim, testobj.PV("pv-new", testobj.Phase(corev1.VolumePending)))
			if tc.plan {
				if err := b.runPlan(ctx); err != nil {
					t.Fatal(err)
				}
				if got := planned(b, claim.UID); got != "pv-new" {
					t.Fatalf("plan gave the claim %q", got)
				}
			}
			if tc.reserved {
				reserve(b, "pv-new", claim.UID)
			}
			if err := b.syncVolume(ctx, "pv-new"); err != nil {
				t.Fatal(err)
			}
			if got := getVolume(t, c, "pv-new").Status.Phase; got != tc.wantPhase {
				t.Errorf("phase %q, want %q", got, tc.wantPhase)
			}
		})
	}
}

// TestFinalizerWrittenBeforeTheRest: syncVolume writes the pv-controller finalizer of an in-tree
// provisioned Delete volume, and then its phase, in one sync.
func TestFinalizerWrittenBeforeTheRest(t *testing.T) {
	b, c := liveBinder(t, testobj.PV("pv-1", testobj.Reclaim(corev1.PersistentVolumeReclaimDelete),
		testobj.PVMeta(testobj.Annotation(storage.AnnProvisionedBy, "kubernetes.io/host-path"))))
	if err := b.syncVolume(context.Background(), "pv-1"); err != nil {
		t.Fatal(err)
	}
	got := getVolume(t, c, "pv-1")
	if !slices.Equal(got.Finalizers, []string{storage.FinalizerPVController}) || got.Status.Phase != corev1.VolumeAvailable {
		t.Errorf("finalizers %v phase %q; want [%s] and Available", got.Finalizers, got.Status.Phase, storage.FinalizerPVController)
	}
}
