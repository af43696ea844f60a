package binder

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/storage"
	"github.com/pvguard/pvguard/test/testobj"
)

// oracleCluster generates a small cluster in which every input of the planner varies: classes
// (Immediate, WaitForFirstConsumer, missing, none), capacities and requests (missing, and equal
// values written differently), access modes, volume modes, VolumeAttributesClasses, labels and
// selectors (invalid and empty ones too), node affinity (invalid too), selected nodes (missing
// ones too), phases, claimRefs (pre-bound by name, by uid, to another incarnation, to other
// claims), deletion, and fields no check reads (limits, data sources, labels), so that grouping
// by what the fit predicate reads is tested against reading everything.
func oracleCluster(rng *rand.Rand) []client.Object {
	pick := func(n int) int { return rng.IntN(n) }
	sizes := []string{"", "1Gi", "2Gi", "3Gi", "1536Mi", "1073741824", "5Gi", "500M"}
	classNames := []string{"a", "a", "a", "a", "a", "b", "w", "missing", ""}
	modes := []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce, corev1.ReadOnlyMany, corev1.ReadWriteMany, corev1.ReadWriteOncePod}
	someModes := func() []corev1.PersistentVolumeAccessMode {
		if pick(3) > 0 {
			return []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
		}
		var out []corev1.PersistentVolumeAccessMode
		for range pick(3) + pick(2) {
			out = append(out, modes[pick(len(modes))])
		}
		if len(out) == 0 && pick(4) > 0 {
			out = append(out, corev1.ReadWriteOnce)
		}
		return out
	}
	volumeMode := func() *corev1.PersistentVolumeMode {
		m := []corev1.PersistentVolumeMode{"", corev1.PersistentVolumeFilesystem, corev1.PersistentVolumeBlock}[pick(3)]
		if pick(4) > 0 {
			return nil
		}
		return &m
	}
	attrs := func() *string {
		a := []string{"", "gold"}[pick(2)]
		if pick(6) > 0 {
			return nil
		}
		return &a
	}
	tiers := []string{"gold", "silver"}
	deleting := func(m *metav1.ObjectMeta) {
		if pick(20) == 0 {
			testobj.Deleting()(m)
			m.Finalizers = []string{"kubernetes.io/pv-protection"}
		}
	}

	objs := []client.Object{
		class("a", "csi.example.com", storagev1.VolumeBindingImmediate),
		class("b", storage.NoProvisioner, storagev1.VolumeBindingImmediate),
		class("w", storage.NoProvisioner, storagev1.VolumeBindingWaitForFirstConsumer),
	}
	for i := range 3 {
		objs = append(objs, testobj.Node(fmt.Sprintf("n%d", i), map[string]string{"zone": fmt.Sprintf("z%d", i%2)}))
	}
	type claimName struct{ ns, name string }
	var claims []claimName
	for i := range pick(30) {
		claims = append(claims, claimName{[]string{"ns", "ns-a", "ns1"}[pick(3)], fmt.Sprintf("c%d", i)})
	}
	someClaim := func() claimName {
		if len(claims) == 0 || pick(8) == 0 {
			return claimName{"ns", "nobody"}
		}
		return claims[pick(len(claims))]
	}

	for i := range pick(40) {
		pv := testobj.PV(fmt.Sprintf("pv-%02d", i), testobj.Class(classNames[pick(len(classNames))]))
		if s := sizes[pick(len(sizes))]; s == "" {
			pv.Spec.Capacity = nil
		} else {
			pv.Spec.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(s)}
		}
		pv.Spec.AccessModes = someModes()
		if pick(3) == 0 {
			pv.Spec.AccessModes = append(pv.Spec.AccessModes, corev1.ReadWriteOnce, corev1.ReadWriteMany)
		}
		pv.Spec.VolumeMode = volumeMode()
		pv.Spec.VolumeAttributesClassName = attrs()
		if pick(2) == 0 {
			testobj.PVMeta(testobj.Label("tier", tiers[pick(2)]))(pv)
		}
		if pick(3) == 0 {
			testobj.PVMeta(testobj.Label("zone", fmt.Sprintf("z%d", pick(2))))(pv)
		}
		switch pick(6) {
		case 0:
			testobj.NodeAffinity("kubernetes.io/hostname", fmt.Sprintf("n%d", pick(4)))(pv)
		case 1:
			testobj.NodeAffinity("zone", "z1")(pv)
		case 2:
			if pick(4) == 0 {
				testobj.NodeAffinity("kubernetes.io/hostname", "n0")(pv)
				pv.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions[0].Operator = corev1.NodeSelectorOpGt
			}
		}
		pv.Status.Phase = []corev1.PersistentVolumePhase{corev1.VolumeAvailable, corev1.VolumeAvailable, corev1.VolumeAvailable,
			corev1.VolumeAvailable, corev1.VolumeAvailable, corev1.VolumeAvailable, corev1.VolumePending, "", corev1.VolumeReleased, corev1.VolumeBound, corev1.VolumeFailed}[pick(11)]
		switch pick(8) {
		case 0:
			c := someClaim()
			testobj.ClaimRef(c.ns, c.name, "")(pv)
		case 1:
			c := someClaim()
			testobj.ClaimRef(c.ns, c.name, string(testobj.PVC(c.ns, c.name).UID))(pv)
		case 2:
			c := someClaim()
			testobj.ClaimRef(c.ns, c.name, "uid-an-older-one")(pv)
		}
		deleting(&pv.ObjectMeta)
		objs = append(objs, pv)
	}

	for _, cn := range claims {
		pvc := testobj.PVC(cn.ns, cn.name)
		switch c := classNames[pick(len(classNames))]; {
		case pick(8) == 0:
			pvc.Spec.StorageClassName = nil
		case pick(10) == 0:
			testobj.ClaimMeta(testobj.Annotation(storage.AnnBetaStorageClass, c))(pvc)
		default:
			pvc.Spec.StorageClassName = &c
		}
		if s := sizes[pick(len(sizes)-2)]; s == "" {
			pvc.Spec.Resources.Requests = nil
		} else {
			pvc.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(s)}
		}
		if pick(4) == 0 {
			pvc.Spec.Resources.Limits = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(sizes[1+pick(len(sizes)-1)])}
		}
		pvc.Spec.AccessModes = someModes()
		pvc.Spec.VolumeMode = volumeMode()
		pvc.Spec.VolumeAttributesClassName = attrs()
		switch pick(8) {
		case 0:
			testobj.Selector(map[string]string{"tier": tiers[pick(2)]})(pvc)
		case 1:
			testobj.SelectorExpression("tier", metav1.LabelSelectorOpIn, "gold", "silver")(pvc)
			if pick(2) == 0 {
				testobj.SelectorExpression("zone", metav1.LabelSelectorOpDoesNotExist)(pvc)
			}
		case 2:
			testobj.SelectorExpression("tier", "Near", "gold")(pvc)
		case 3:
			pvc.Spec.Selector = &metav1.LabelSelector{}
		case 4:
			testobj.SelectorExpression("zone", metav1.LabelSelectorOpExists)(pvc)
		}
		if pick(4) == 0 {
			testobj.ClaimMeta(testobj.Annotation(storage.AnnSelectedNode, fmt.Sprintf("n%d", pick(4))))(pvc)
		}
		switch pick(20) {
		case 0:
			testobj.ClaimBoundTo("pv-00")(pvc)
		case 1:
			pvc.Spec.VolumeName = "pv-01"
		}
		if pick(3) == 0 {
			testobj.ClaimMeta(testobj.Label("app", cn.name))(pvc)
		}
		if pick(5) == 0 {
			pvc.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "source"}
		}
		deleting(&pvc.ObjectMeta)
		objs = append(objs, pvc)
	}
	return objs
}

// oracleState gives the binder binds in flight and pairs policy denied, recently and long ago,
// for claims and volumes of objs and for ones that do not exist. As in the binder, a volume
// reserved for one claim is not reserved for another, and a denial drops the claim's
// reservation of the volume denied.
func oracleState(rng *rand.Rand, b *Binder, objs []client.Object) {
	var volumes []string
	var uids []types.UID
	for _, o := range objs {
		switch o := o.(type) {
		case *corev1.PersistentVolume:
			volumes = append(volumes, o.Name)
		case *corev1.PersistentVolumeClaim:
			uids = append(uids, o.UID)
		}
	}
	uids = append(uids, "uid-of-no-claim")
	for range rng.IntN(4) {
		if len(volumes) > 0 {
			reserve(b, volumes[rng.IntN(len(volumes))], uids[rng.IntN(len(uids))])
		}
	}
	for range rng.IntN(6) {
		if len(volumes) == 0 {
			break
		}
		uid, at := uids[rng.IntN(len(uids))], time.Now()
		if rng.IntN(3) == 0 {
			at = at.Add(-2 * forbidTTL)
		}
		b.ledger.deny(uid, volumes[rng.IntN(len(volumes))], at)
	}
}

// TestPlanAgreesWithTheOraclePlanner: runPlan makes exactly the plan of the straightforward
// planner (oraclePlan) on generated clusters, in active and shadow mode (which differ in whether
// Pending volumes are free).
func TestPlanAgreesWithTheOraclePlanner(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(16, 16))
	var planned, pending int
	for i := range 1000 {
		objs := oracleCluster(rng)
		b := scalePlanner(t, objs...)
		if i%2 == 1 {
			b.o.Mode = ModeShadow
		}
		oracleState(rng, b, objs)
		want, err := oraclePlan(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.runPlan(ctx); err != nil {
			t.Fatal(err)
		}
		if got := installedPlan(b, objs); !maps.Equal(got, want) {
			t.Fatalf("cluster %d: plan %v, the oracle's %v", i, got, want)
		}
		for _, v := range want {
			pending++
			if v != "" {
				planned++
			}
		}
	}
	// The generated clusters must give the planner something to do, and not everything.
	if planned == 0 || planned == pending {
		t.Fatalf("%d of %d pending claims planned", planned, pending)
	}
	t.Logf("%d of %d pending claims planned", planned, pending)
}

// TestPlanAgreesWithTheOraclePlannerAtScale compares the two on the benchmark's cluster at its
// smallest size (1,000 pending claims, 2,000 volumes).
func TestPlanAgreesWithTheOraclePlannerAtScale(t *testing.T) {
	if testing.Short() {
		t.Skip("a few seconds")
	}
	ctx := context.Background()
	objs := scaleCluster(2000, 1000)
	b := scalePlanner(t, objs...)
	reserve(b, "pv-free-000004", "uid-ns-004-pending-00004")
	reserve(b, "pv-free-000005", "uid-of-no-claim")
	b.ledger.deny("uid-ns-007-pending-00007", "pv-free-000001", time.Now())
	b.ledger.deny("uid-ns-007-pending-00007", "pv-free-000002", time.Now())
	want, err := oraclePlan(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.runPlan(ctx); err != nil {
		t.Fatal(err)
	}
	if got := installedPlan(b, objs); !maps.Equal(got, want) {
		for uid, v := range want {
			if got[uid] != v {
				t.Errorf("claim %s: planned %q, the oracle %q", uid, got[uid], v)
			}
		}
		t.Fatalf("plans differ (%d and %d claims)", len(got), len(want))
	}
}
