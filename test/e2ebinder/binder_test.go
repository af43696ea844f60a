package e2ebinder

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/internal/cli"
	"github.com/pvguard/pvguard/internal/devcluster"
	"github.com/pvguard/pvguard/test/controlplane"
	"github.com/pvguard/pvguard/test/harness"
	"github.com/pvguard/pvguard/test/testobj"
)

// fresh readies a builder's volume for creation. The tests share one cluster, so a classless
// volume gets the test's own class (named after its namespace): a volume left Available by one
// test is never in another test's pool.
func fresh(ns string, pv *corev1.PersistentVolume) *corev1.PersistentVolume {
	harness.FreshPV(pv)
	if pv.Spec.StorageClassName == "" {
		pv.Spec.StorageClassName = ns
	}
	return pv
}

// freshClaim readies a builder's claim; a claim with the explicit empty class gets the test's class.
func freshClaim(pvc *corev1.PersistentVolumeClaim) *corev1.PersistentVolumeClaim {
	harness.FreshPVC(pvc)
	if pvc.Spec.StorageClassName != nil && *pvc.Spec.StorageClassName == "" {
		ns := pvc.Namespace
		pvc.Spec.StorageClassName = &ns
	}
	return pvc
}

// TestStaticPairsAllBound: 200 exactly-sized pairs (upstream's greedy matcher has been seen to
// leave one Pending here) are all bound, each claim to its own size.
func TestStaticPairsAllBound(t *testing.T) {
	startBinder(t, "active", nil)
	ctx := context.Background()
	ns := harness.Namespace(t, admin(t), "")
	c := admin(t)
	const n = 200
	for i := 1; i <= n; i++ {
		size := fmt.Sprintf("%dMi", i)
		harness.Must(t, c.Create(ctx, fresh(ns, testobj.PV(fmt.Sprintf("%s-pv-%d", ns, i), testobj.Capacity(size)))), "creating volume")
		harness.Must(t, c.Create(ctx, freshClaim(testobj.PVC(ns, fmt.Sprintf("c-%d", i), testobj.Request(size)))), "creating claim")
	}
	for i := 1; i <= n; i++ {
		harness.WaitFor(t, 2*time.Minute, fmt.Sprintf("claim c-%d bound", i), harness.BoundTo(admin(t), ns, fmt.Sprintf("c-%d", i), fmt.Sprintf("%s-pv-%d", ns, i)))
	}
	pv := harness.GetPV(t, admin(t), fmt.Sprintf("%s-pv-%d", ns, 7))
	pvc := harness.GetPVC(t, admin(t), ns, "c-7")
	if pv.Annotations["pv.kubernetes.io/bound-by-controller"] != "yes" || pvc.Annotations["pv.kubernetes.io/bound-by-controller"] != "yes" {
		t.Errorf("bound-by-controller missing: pv %v, pvc %v", pv.Annotations, pvc.Annotations)
	}
	if got := pvc.Status.Capacity[corev1.ResourceStorage]; got.String() != "7Mi" {
		t.Errorf("claim status capacity %s, want 7Mi", got.String())
	}
}

// TestNoStrandedClaim: a small claim must not take the only volume a selective claim can use.
func TestNoStrandedClaim(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t, admin(t), "")
	c := admin(t)
	fast, big := ns+"-fast", ns+"-big"
	harness.Must(t, c.Create(ctx, fresh(ns, testobj.PV(fast, testobj.Capacity("5Gi"), testobj.PVMeta(testobj.Label("tier", "fast"))))), "creating fast volume")
	harness.Must(t, c.Create(ctx, fresh(ns, testobj.PV(big, testobj.Capacity("10Gi")))), "creating big volume")
	harness.Must(t, c.Create(ctx, freshClaim(testobj.PVC(ns, "small", testobj.Request("1Gi")))), "creating small claim")
	harness.Must(t, c.Create(ctx, freshClaim(testobj.PVC(ns, "picky", testobj.Request("5Gi"), testobj.Selector(map[string]string{"tier": "fast"})))), "creating picky claim")
	startBinder(t, "active", nil)
	harness.WaitFor(t, time.Minute, "picky claim on the fast volume", harness.BoundTo(admin(t), ns, "picky", fast))
	harness.WaitFor(t, time.Minute, "small claim on the big volume", harness.BoundTo(admin(t), ns, "small", big))
}

func TestPreboundClaimAndVolume(t *testing.T) {
	startBinder(t, "active", nil)
	ctx := context.Background()
	ns := harness.Namespace(t, admin(t), "")
	c := admin(t)
	named, reserved, decoy := ns+"-named", ns+"-reserved", ns+"-decoy"
	// A claim that names its volume gets it, though a smaller one fits too.
	harness.Must(t, c.Create(ctx, fresh(ns, testobj.PV(decoy, testobj.Capacity("1Gi")))), "creating decoy")
	harness.Must(t, c.Create(ctx, fresh(ns, testobj.PV(named, testobj.Capacity("2Gi"), testobj.PVMeta(testobj.Annotation("pvguard.io/allowed-namespaces", ns))))), "creating named volume")
	harness.Must(t, c.Create(ctx, freshClaim(testobj.PVC(ns, "wants-named", testobj.VolumeName(named)))), "creating claim naming a volume")
	// A volume pre-bound to a claim goes to that claim only.
	harness.Must(t, c.Create(ctx, fresh(ns, testobj.PV(reserved, testobj.Capacity("3Gi"), testobj.ClaimRef(ns, "owner", "")))), "creating pre-bound volume")
	harness.Must(t, c.Create(ctx, freshClaim(testobj.PVC(ns, "owner"))), "creating owner claim")
	harness.WaitFor(t, time.Minute, "named volume bound", harness.BoundTo(admin(t), ns, "wants-named", named))
	harness.WaitFor(t, time.Minute, "reserved volume bound to its owner", harness.BoundTo(admin(t), ns, "owner", reserved))
	if pv := harness.GetPV(t, admin(t), reserved); pv.Annotations["pv.kubernetes.io/bound-by-controller"] != "" {
		t.Errorf("a volume the user pre-bound must not be marked bound-by-controller")
	}
	if pv := harness.GetPV(t, admin(t), decoy); pv.Spec.ClaimRef != nil {
		t.Errorf("decoy got claimed by %v", pv.Spec.ClaimRef)
	}
}

// TestWaitForFirstConsumer follows what kube-scheduler's VolumeBinding plugin really writes for
// a claim of a WaitForFirstConsumer class. It binds a static volume itself: a full Update of the
// volume giving it a claimRef with the claim's uid and pv.kubernetes.io/bound-by-controller, then
// it waits for the binder to complete the binding (volume status, claim volumeName with
// bind-completed, claim status). It sets volume.kubernetes.io/selected-node on the claim only
// when no static volume fits on the node it picked, and that asks for provisioning there. It
// never sets selected-node and expects a free static volume bound: the real scheduler never
// produces that state, and upstream's binder does not bind it.
func TestWaitForFirstConsumer(t *testing.T) {
	startBinder(t, "active", nil)
	ctx := context.Background()
	c := admin(t)
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	scheduler, err := devcluster.NewClient(h.Config, nil, "system:kube-scheduler")
	harness.Must(t, err, "scheduler client")

	t.Run("the scheduler binds a static volume, pvguard completes", func(t *testing.T) {
		ns := harness.Namespace(t, admin(t), "")
		class := ns + "-local"
		harness.Must(t, c.Create(ctx, testobj.StorageClass(class, "kubernetes.io/no-provisioner", func(sc *storagev1.StorageClass) { sc.VolumeBindingMode = &wffc })), "creating class")
		t.Cleanup(func() { _ = c.Delete(ctx, testobj.StorageClass(class, "")) })
		n1, n2 := ns+"-n1", ns+"-n2"
		for _, n := range []string{n1, n2} {
			harness.Must(t, c.Create(ctx, testobj.Node(n, nil)), "creating node")
			harness.Must(t, c.Create(ctx, fresh(ns, testobj.PV(n+"-disk", testobj.Class(class), testobj.NodeAffinity("kubernetes.io/hostname", n)))), "creating local volume")
		}
		harness.Must(t, c.Create(ctx, freshClaim(testobj.PVC(ns, "data", testobj.ClaimClass(class)))), "creating claim")
		harness.WaitFor(t, time.Minute, "WaitForFirstConsumer event", hasEvent(t, ns, "data", "WaitForFirstConsumer"))
		// The scheduler sees Available volumes only: new volumes must be marked at once.
		for _, n := range []string{n1, n2} {
			harness.WaitFor(t, time.Minute, n+"-disk Available", func(context.Context) (bool, error) {
				return harness.GetPV(t, admin(t), n+"-disk").Status.Phase == corev1.VolumeAvailable, nil
			})
		}
		time.Sleep(2 * time.Second) // a few resyncs: pvguard must not pick a volume itself
		if pvc := harness.GetPVC(t, admin(t), ns, "data"); pvc.Spec.VolumeName != "" {
			t.Fatalf("pvguard bound the claim to %s before the scheduler chose a node", pvc.Spec.VolumeName)
		}
		for _, n := range []string{n1, n2} {
			if ref := harness.GetPV(t, admin(t), n+"-disk").Spec.ClaimRef; ref != nil {
				t.Fatalf("pvguard gave %s-disk to %s/%s; only the scheduler binds free volumes to a WaitForFirstConsumer claim", n, ref.Namespace, ref.Name)
			}
		}
		// The scheduler picks n2 and binds its disk (AssumePodVolumes + bindAPIUpdate).
		claim := harness.GetPVC(t, admin(t), ns, "data")
		pv := &corev1.PersistentVolume{}
		harness.Must(t, scheduler.Get(ctx, client.ObjectKey{Name: n2 + "-disk"}, pv), "scheduler reading the volume")
		pv.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: ns, Name: "data",
			UID: claim.UID, ResourceVersion: claim.ResourceVersion}
		if pv.Annotations == nil {
			pv.Annotations = map[string]string{}
		}
		pv.Annotations["pv.kubernetes.io/bound-by-controller"] = "yes"
		harness.Must(t, scheduler.Update(ctx, pv), "scheduler binding the volume")
		harness.WaitFor(t, time.Minute, "pvguard completing the binding", harness.BoundTo(admin(t), ns, "data", n2+"-disk"))
		if a := harness.GetPVC(t, admin(t), ns, "data").Annotations; a["pv.kubernetes.io/bound-by-controller"] != "yes" {
			t.Errorf("claim annotations %v: bound-by-controller missing", a)
		}
		if ref := harness.GetPV(t, admin(t), n1+"-disk").Spec.ClaimRef; ref != nil {
			t.Errorf("the other node's disk was claimed by %s/%s", ref.Namespace, ref.Name)
		}
	})

	t.Run("selected-node asks for provisioning: a fitting static volume is left alone", func(t *testing.T) {
		ns := harness.Namespace(t, admin(t), "")
		class := ns + "-hybrid"
		harness.Must(t, c.Create(ctx, testobj.StorageClass(class, "csi.example.com", func(sc *storagev1.StorageClass) { sc.VolumeBindingMode = &wffc })), "creating class")
		t.Cleanup(func() { _ = c.Delete(ctx, testobj.StorageClass(class, "")) })
		node := ns + "-n1"
		harness.Must(t, c.Create(ctx, testobj.Node(node, nil)), "creating node")
		harness.Must(t, c.Create(ctx, freshClaim(testobj.PVC(ns, "data", testobj.ClaimClass(class)))), "creating claim")
		harness.WaitFor(t, time.Minute, "WaitForFirstConsumer event", hasEvent(t, ns, "data", "WaitForFirstConsumer"))
		// No static volume fits on the node the scheduler picked: it asks for one there.
		harness.Must(t, devcluster.PatchPVC(ctx, scheduler, ns, "data", func(pvc *corev1.PersistentVolumeClaim) {
			if pvc.Annotations == nil {
				pvc.Annotations = map[string]string{}
			}
			pvc.Annotations["volume.kubernetes.io/selected-node"] = node
		}), "scheduler selecting a node for provisioning")
		harness.WaitFor(t, time.Minute, "storage-provisioner annotations", func(context.Context) (bool, error) {
			a := harness.GetPVC(t, admin(t), ns, "data").Annotations
			return a["volume.kubernetes.io/storage-provisioner"] == "csi.example.com" && a["volume.beta.kubernetes.io/storage-provisioner"] == "csi.example.com", nil
		})
		harness.WaitFor(t, 30*time.Second, "ExternalProvisioning event", hasEvent(t, ns, "data", "ExternalProvisioning"))
		// Meanwhile a static volume that fits appears on that node.
		static := ns + "-static"
		harness.Must(t, c.Create(ctx, fresh(ns, testobj.PV(static, testobj.Class(class), testobj.NodeAffinity("kubernetes.io/hostname", node)))), "creating a static volume")
		harness.WaitFor(t, time.Minute, "static volume Available", func(context.Context) (bool, error) {
			return harness.GetPV(t, admin(t), static).Status.Phase == corev1.VolumeAvailable, nil
		})
		time.Sleep(2 * time.Second) // a few resyncs
		if ref := harness.GetPV(t, admin(t), static).Spec.ClaimRef; ref != nil {
			t.Fatalf("pvguard bound the static volume to %s/%s while its provisioner was creating one", ref.Namespace, ref.Name)
		}
		// The provisioner's volume, as the CSI external-provisioner creates it: claimRef with
		// the claim's uid, provisioned-by, its finalizer, the class's reclaim policy (Delete).
		claim := harness.GetPVC(t, admin(t), ns, "data")
		provisioned := ns + "-provisioned"
		harness.Must(t, c.Create(ctx, fresh(ns, testobj.PV(provisioned, testobj.Class(class), testobj.NodeAffinity("kubernetes.io/hostname", node),
			testobj.ClaimRef(ns, "data", string(claim.UID)), testobj.Reclaim(corev1.PersistentVolumeReclaimDelete),
			testobj.PVMeta(testobj.Annotation("pv.kubernetes.io/provisioned-by", "csi.example.com"),
				testobj.Finalizers("external-provisioner.volume.kubernetes.io/finalizer"))))), "provisioning")
		harness.WaitFor(t, time.Minute, "provisioned volume bound", harness.BoundTo(admin(t), ns, "data", provisioned))
		if ref := harness.GetPV(t, admin(t), static).Spec.ClaimRef; ref != nil {
			t.Errorf("static volume claimed by %s/%s", ref.Namespace, ref.Name)
		}
	})
}

func TestLostClaimRecovers(t *testing.T) {
	startBinder(t, "active", nil)
	ctx := context.Background()
	ns := harness.Namespace(t, admin(t), "")
	gone := ns + "-gone"
	// A claim bound (before pvguard) to a volume that does not exist.
	claim := freshClaim(testobj.PVC(ns, "orphan", testobj.VolumeName(gone), testobj.ClaimMeta(testobj.Annotation("pv.kubernetes.io/bind-completed", "yes"))))
	harness.Must(t, seed(t).Create(ctx, claim), "seeding a bound claim")
	harness.WaitFor(t, time.Minute, "claim Lost", func(context.Context) (bool, error) {
		return harness.GetPVC(t, admin(t), ns, "orphan").Status.Phase == corev1.ClaimLost, nil
	})
	harness.WaitFor(t, 30*time.Second, "ClaimLost event", hasEvent(t, ns, "orphan", "ClaimLost"))
	// The volume comes back (restored from backup) pointing at the claim: it recovers.
	harness.Must(t, admin(t).Create(ctx, fresh(ns, testobj.PV(gone, testobj.ClaimRef(ns, "orphan", string(claim.UID))))), "restoring the volume")
	harness.WaitFor(t, time.Minute, "claim Bound again", harness.BoundTo(admin(t), ns, "orphan", gone))
}

func TestMisboundClaimIsLost(t *testing.T) {
	startBinder(t, "active", nil)
	ctx := context.Background()
	ns := harness.Namespace(t, admin(t), "")
	pv := ns + "-pv"
	createBoundPair(t, ns, "first", pv)
	// A second claim that says it is bound to the same volume (seeded past admission).
	harness.Must(t, seed(t).Create(ctx, freshClaim(testobj.PVC(ns, "second", testobj.VolumeName(pv), testobj.ClaimMeta(testobj.Annotation("pv.kubernetes.io/bind-completed", "yes"))))), "seeding a misbound claim")
	harness.WaitFor(t, time.Minute, "second claim Lost as misbound", hasEvent(t, ns, "second", "ClaimMisbound"))
	if got := harness.GetPVC(t, admin(t), ns, "second").Status.Phase; got != corev1.ClaimLost {
		t.Fatalf("misbound claim phase %s, want Lost", got)
	}
	harness.WaitFor(t, 10*time.Second, "first claim still bound", harness.BoundTo(admin(t), ns, "first", pv))
}

// createBoundPair creates a claim and a volume and waits for the running binder to bind them.
func createBoundPair(t *testing.T, ns, claim, pv string, pvMods ...testobj.PVMod) {
	t.Helper()
	ctx := context.Background()
	c := admin(t)
	harness.Must(t, c.Create(ctx, fresh(ns, testobj.PV(pv, append([]testobj.PVMod{testobj.ClaimRef(ns, claim, "")}, pvMods...)...))), "creating volume")
	harness.Must(t, c.Create(ctx, freshClaim(testobj.PVC(ns, claim))), "creating claim")
	harness.WaitFor(t, time.Minute, claim+" bound", harness.BoundTo(admin(t), ns, claim, pv))
}

func TestReleaseAndReclaim(t *testing.T) {
	startBinder(t, "active", nil)
	ctx := context.Background()
	ns := harness.Namespace(t, admin(t), "")
	for _, tc := range []struct {
		name       string
		mods       []testobj.PVMod
		wantPhase  corev1.PersistentVolumePhase
		wantReason string
		available  bool
	}{
		{name: "retain", wantPhase: corev1.VolumeReleased},
		{name: "reuse", mods: []testobj.PVMod{testobj.PVMeta(testobj.Annotation("pvguard.io/reuse-when-released", "true"))}, wantPhase: corev1.VolumeAvailable, wantReason: "VolumeReused", available: true},
		{name: "delete", mods: []testobj.PVMod{testobj.Reclaim(corev1.PersistentVolumeReclaimDelete)}, wantPhase: corev1.VolumeFailed, wantReason: "VolumeFailedDelete"},
		{name: "recycle", mods: []testobj.PVMod{testobj.Reclaim(corev1.PersistentVolumeReclaimRecycle)}, wantPhase: corev1.VolumeFailed, wantReason: "VolumeFailedRecycle"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pv := ns + "-" + tc.name
			createBoundPair(t, ns, tc.name, pv, tc.mods...)
			harness.DeleteClaim(t, admin(t), h.PVCProtector(t), ns, tc.name)
			harness.WaitFor(t, time.Minute, "volume "+string(tc.wantPhase), func(context.Context) (bool, error) {
				return harness.GetPV(t, admin(t), pv).Status.Phase == tc.wantPhase, nil
			})
			if tc.wantReason != "" {
				harness.WaitFor(t, 30*time.Second, tc.wantReason+" event", hasEvent(t, "default", pv, tc.wantReason))
			}
			if got := harness.GetPV(t, admin(t), pv).Spec.ClaimRef; tc.available != (got == nil) {
				t.Fatalf("claimRef %v; want cleared=%v", got, tc.available)
			}
		})
	}
	_ = ctx
}

func TestExternalProvisionerAndDefaultClass(t *testing.T) {
	startBinder(t, "active", nil)
	ctx := context.Background()
	ns := harness.Namespace(t, admin(t), "")
	c := admin(t)
	// A claim with no class waits until a default class appears, then gets it retroactively.
	noClass := freshClaim(testobj.PVC(ns, "later", testobj.ClaimNoClass))
	harness.Must(t, c.Create(ctx, noClass), "creating claim without class")
	class := ns + "-csi"
	harness.Must(t, c.Create(ctx, testobj.StorageClass(class, "csi.example.com", testobj.DefaultClass)), "creating default class")
	t.Cleanup(func() { _ = c.Delete(ctx, testobj.StorageClass(class, "")) })
	harness.WaitFor(t, time.Minute, "default class assigned", func(context.Context) (bool, error) {
		sc := harness.GetPVC(t, admin(t), ns, "later").Spec.StorageClassName
		return sc != nil && *sc == class, nil
	})
	// With no volume to bind, the external provisioner is asked through the annotations.
	harness.WaitFor(t, time.Minute, "storage-provisioner annotation", func(context.Context) (bool, error) {
		a := harness.GetPVC(t, admin(t), ns, "later").Annotations
		return a["volume.kubernetes.io/storage-provisioner"] == "csi.example.com" && a["volume.beta.kubernetes.io/storage-provisioner"] == "csi.example.com", nil
	})
	harness.WaitFor(t, 30*time.Second, "ExternalProvisioning event", hasEvent(t, ns, "later", "ExternalProvisioning"))
	// The provisioner creates a volume pre-bound to the claim, as the CSI external-provisioner
	// does (claimRef with uid, provisioned-by, its finalizer, the class's reclaim policy: Delete
	// by default); the binder completes the binding.
	claim := harness.GetPVC(t, admin(t), ns, "later")
	pv := ns + "-provisioned"
	harness.Must(t, c.Create(ctx, fresh(ns, testobj.PV(pv, testobj.Class(class), testobj.ClaimRef(ns, "later", string(claim.UID)),
		testobj.Reclaim(corev1.PersistentVolumeReclaimDelete),
		testobj.PVMeta(testobj.Annotation("pv.kubernetes.io/provisioned-by", "csi.example.com"),
			testobj.Finalizers("external-provisioner.volume.kubernetes.io/finalizer"))))), "provisioning")
	harness.WaitFor(t, time.Minute, "provisioned volume bound", harness.BoundTo(admin(t), ns, "later", pv))
}

// TestPVControllerFinalizer: pvguard manages the kubernetes.io/pv-controller finalizer where
// upstream's PV controller does, on volumes an in-tree plugin provisioned (in Kubernetes 1.37
// only kubernetes.io/host-path is left that is not migrated to CSI): present while the reclaim
// policy is Delete, gone under Retain, gone from volumes of plugins migrated to CSI. Having no
// in-tree deleter, pvguard fails the reclaim of such a volume and keeps the finalizer, so the
// PersistentVolume outlives a deletion until someone has deleted its storage.
func TestPVControllerFinalizer(t *testing.T) {
	startBinder(t, "active", nil)
	ctx := context.Background()
	ns := harness.Namespace(t, admin(t), "")
	c := admin(t)
	const finalizer = "kubernetes.io/pv-controller"
	has := func(name string) func(context.Context) (bool, error) {
		return func(context.Context) (bool, error) {
			return slices.Contains(harness.GetPV(t, admin(t), name).Finalizers, finalizer), nil
		}
	}
	hasNot := func(name string) func(context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) { ok, err := has(name)(ctx); return !ok, err }
	}
	inTree := testobj.PVMeta(testobj.Annotation("pv.kubernetes.io/provisioned-by", "kubernetes.io/host-path"))
	deletePolicy := testobj.Reclaim(corev1.PersistentVolumeReclaimDelete)

	free := ns + "-free"
	harness.Must(t, c.Create(ctx, fresh(ns, testobj.PV(free, inTree, deletePolicy))), "creating an in-tree provisioned volume")
	harness.WaitFor(t, time.Minute, "finalizer added", has(free))
	harness.Must(t, devcluster.PatchPV(ctx, c, free, func(pv *corev1.PersistentVolume) {
		pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
	}), "switching to Retain")
	harness.WaitFor(t, time.Minute, "finalizer removed under Retain", hasNot(free))

	migrated := ns + "-migrated"
	harness.Must(t, c.Create(ctx, fresh(ns, testobj.PV(migrated, deletePolicy, testobj.PVMeta(
		testobj.Annotation("pv.kubernetes.io/provisioned-by", "kubernetes.io/gce-pd"), testobj.Finalizers(finalizer))))), "creating a volume of a migrated plugin")
	harness.WaitFor(t, time.Minute, "finalizer removed from a migrated plugin's volume", hasNot(migrated))

	used := ns + "-used"
	createBoundPair(t, ns, "data", used, inTree, deletePolicy)
	harness.WaitFor(t, time.Minute, "finalizer on the bound volume", has(used))
	harness.DeleteClaim(t, admin(t), h.PVCProtector(t), ns, "data")
	harness.WaitFor(t, time.Minute, "reclaim failed", func(context.Context) (bool, error) {
		return harness.GetPV(t, admin(t), used).Status.Phase == corev1.VolumeFailed, nil
	})
	harness.WaitFor(t, 30*time.Second, "VolumeFailedDelete event", hasEvent(t, "default", used, "VolumeFailedDelete"))
	if ok, _ := has(used)(ctx); !ok {
		t.Fatalf("finalizer gone although nothing deleted the storage")
	}
}

func TestUnbindsVolumeWhoseClaimWentElsewhere(t *testing.T) {
	startBinder(t, "active", nil)
	ctx := context.Background()
	ns := harness.Namespace(t, admin(t), "")
	home, stray := ns+"-home", ns+"-stray"
	createBoundPair(t, ns, "data", home)
	claim := harness.GetPVC(t, admin(t), ns, "data")
	// A volume the controller half-bound to the same claim (seeded: admission refuses it).
	harness.Must(t, seed(t).Create(ctx, fresh(ns, testobj.PV(stray, testobj.ClaimRef(ns, "data", string(claim.UID)),
		testobj.PVMeta(testobj.Annotation("pv.kubernetes.io/bound-by-controller", "yes"))))), "seeding the stray volume")
	harness.WaitFor(t, time.Minute, "stray volume unbound and Available", func(context.Context) (bool, error) {
		pv := harness.GetPV(t, admin(t), stray)
		return pv.Spec.ClaimRef == nil && pv.Status.Phase == corev1.VolumeAvailable, nil
	})
	harness.WaitFor(t, 10*time.Second, "home binding intact", harness.BoundTo(admin(t), ns, "data", home))
}

// TestNeverBindsWhatPolicyDenies: a claim seeded past admission names a volume that policy
// (volume-grab set to deny) says it may not take; the binder must not bind it.
func TestNeverBindsWhatPolicyDenies(t *testing.T) {
	harness.Must(t, h.SetPolicy(policyConfig+"rules:\n  volume-grab: {action: deny}\n"), "tightening policy")
	t.Cleanup(func() { _ = h.SetPolicy(policyConfig) })
	startBinder(t, "active", nil)
	ctx := context.Background()
	ns := harness.Namespace(t, admin(t), "")
	pv := ns + "-theirs"
	harness.Must(t, admin(t).Create(ctx, fresh(ns, testobj.PV(pv))), "creating volume")
	harness.Must(t, seed(t).Create(ctx, freshClaim(testobj.PVC(ns, "grab", testobj.VolumeName(pv)))), "seeding a grabbing claim")
	harness.WaitFor(t, time.Minute, "PolicyForbidsBinding event", hasEvent(t, ns, "grab", "PolicyForbidsBinding"))
	time.Sleep(2 * time.Second) // a few resyncs
	if got := harness.GetPV(t, admin(t), pv).Spec.ClaimRef; got != nil {
		t.Fatalf("binder bound a pair policy denies: %v", got)
	}
}

// TestKilledBetweenWritesCompletes kills the binder before each of the four bind writes in turn;
// a fresh binder then completes the binding.
func TestKilledBetweenWritesCompletes(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t, admin(t), "")
	for step, op := range []string{"bind-2-volume-status", "bind-3-claim-spec", "bind-4-claim-status"} {
		t.Run(op, func(t *testing.T) {
			claim, pv := fmt.Sprintf("c-%d", step), fmt.Sprintf("%s-pv-%d", ns, step)
			c := admin(t)
			harness.Must(t, c.Create(ctx, fresh(ns, testobj.PV(pv))), "creating volume")
			harness.Must(t, c.Create(ctx, freshClaim(testobj.PVC(ns, claim))), "creating claim")
			var killed atomic.Bool
			kill := make(chan struct{})
			inst := startBinderWith(t, "active", cli.BinderHooks{
				BeforeWrite: func(w string, obj client.Object) error {
					if w == op && (obj.GetName() == pv || obj.GetName() == claim) {
						if killed.CompareAndSwap(false, true) {
							close(kill)
						}
						return errors.New("killed")
					}
					return nil
				},
			}, nil)
			select {
			case <-kill:
			case <-time.After(time.Minute):
				t.Fatalf("binder never reached %s", op)
			}
			_ = inst.Stop()
			if ok, _ := harness.BoundTo(admin(t), ns, claim, pv)(context.Background()); ok {
				t.Fatalf("binding completed although the binder was killed before %s", op)
			}
			startBinder(t, "active", nil)
			harness.WaitFor(t, time.Minute, "binding completed after restart", harness.BoundTo(admin(t), ns, claim, pv))
		})
	}
}

// TestTwoReplicasBindNothingTwice runs two binders electing a leader on one Lease.
func TestTwoReplicasBindNothingTwice(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t, admin(t), "")
	log := &writeLog{}
	var insts []interface{ Stop() error }
	for _, name := range []string{"a", "b"} {
		insts = append(insts, startBinderWith(t, "active", cli.BinderHooks{BeforeWrite: log.hook(name)}, func(o *cli.ServeFlags) {
			o.LeaderElection.Elect = true
			o.LeaderElection.ID = ns + "-binder"
		}))
	}
	c := admin(t)
	const n = 30
	for i := range n {
		harness.Must(t, c.Create(ctx, fresh(ns, testobj.PV(fmt.Sprintf("%s-pv-%d", ns, i), testobj.Capacity(fmt.Sprintf("%dMi", i+1))))), "creating volume")
		harness.Must(t, c.Create(ctx, freshClaim(testobj.PVC(ns, fmt.Sprintf("c-%d", i), testobj.Request(fmt.Sprintf("%dMi", i+1))))), "creating claim")
	}
	for i := range n {
		harness.WaitFor(t, 2*time.Minute, "claim bound", harness.BoundTo(admin(t), ns, fmt.Sprintf("c-%d", i), fmt.Sprintf("%s-pv-%d", ns, i)))
	}
	a, b := log.count("instance a"), log.count("instance b")
	if a > 0 && b > 0 {
		t.Errorf("both replicas wrote: a=%d b=%d", a, b)
	}
	for i := range n {
		if got := log.count(fmt.Sprintf("bind-1-volume-spec /%s-pv-%d", ns, i)); got != 1 {
			t.Errorf("volume %d: claimRef written %d times, want once", i, got)
		}
	}
	// The leader stops; the other replica takes over and binds new pairs.
	leader := 0
	if b > 0 {
		leader = 1
	}
	_ = insts[leader].Stop()
	harness.Must(t, c.Create(ctx, fresh(ns, testobj.PV(ns+"-after"))), "creating volume")
	harness.Must(t, c.Create(ctx, freshClaim(testobj.PVC(ns, "after"))), "creating claim")
	harness.WaitFor(t, 2*time.Minute, "the other replica binds after failover", harness.BoundTo(admin(t), ns, "after", ns+"-after"))
}

// lagging hides some claims from the binder's cache, as an informer that has not caught up.
type lagging struct {
	client.Reader
	hidden *atomic.Bool
	name   string
}

func (l lagging) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*corev1.PersistentVolumeClaim); ok && key.Name == l.name && l.hidden.Load() {
		return apierrors.NewNotFound(corev1.Resource("persistentvolumeclaims"), key.Name)
	}
	return l.Reader.Get(ctx, key, obj, opts...)
}

// TestStaleCacheNeverReleases: a volume provisioned for a claim the binder's cache has not seen
// yet must not be Released; once the cache catches up it is bound.
func TestStaleCacheNeverReleases(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t, admin(t), "")
	var hidden atomic.Bool
	hidden.Store(true)
	var releases atomic.Int32
	startBinderWith(t, "active", cli.BinderHooks{
		WrapCache: func(r client.Reader) client.Reader { return lagging{Reader: r, hidden: &hidden, name: "late"} },
		BeforeWrite: func(op string, obj client.Object) error {
			if pv, ok := obj.(*corev1.PersistentVolume); ok && pv.Status.Phase == corev1.VolumeReleased {
				releases.Add(1)
			}
			return nil
		},
	}, nil)
	claim := freshClaim(testobj.PVC(ns, "late"))
	harness.Must(t, admin(t).Create(ctx, claim), "creating claim")
	pv := ns + "-early"
	harness.Must(t, admin(t).Create(ctx, fresh(ns, testobj.PV(pv, testobj.ClaimRef(ns, "late", string(claim.UID))))), "provisioning a volume for it")
	time.Sleep(4 * time.Second) // several resyncs with the claim invisible to the cache
	if got := harness.GetPV(t, admin(t), pv).Status.Phase; got == corev1.VolumeReleased || releases.Load() > 0 {
		t.Fatalf("volume released on cache evidence alone (phase %s, %d release writes)", got, releases.Load())
	}
	hidden.Store(false)
	harness.WaitFor(t, time.Minute, "bound once the cache catches up", harness.BoundTo(admin(t), ns, "late", pv))
}

// TestShadowModeWritesNothingAndReportsDisagreement runs the binder in shadow mode while the
// "cluster's binder" (upstream's writes, as its service account) binds differently.
func TestShadowModeWritesNothingAndReportsDisagreement(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t, admin(t), "")
	var writes atomic.Int32
	inst := startBinderWith(t, "shadow", cli.BinderHooks{
		BeforeWrite: func(string, client.Object) error { writes.Add(1); return nil },
	}, nil)
	c := admin(t)
	small, large := ns+"-small", ns+"-large"
	harness.Must(t, c.Create(ctx, fresh(ns, testobj.PV(small, testobj.Capacity("1Gi")))), "creating small volume")
	harness.Must(t, c.Create(ctx, fresh(ns, testobj.PV(large, testobj.Capacity("5Gi")))), "creating large volume")
	// The cluster's binder marks new volumes Available, as kube-controller-manager does.
	binder, err := devcluster.NewClient(h.Config, nil, controlplane.BinderUser, controlplane.BinderGroups...)
	harness.Must(t, err, "binder client")
	for _, name := range []string{small, large} {
		pv := harness.GetPV(t, admin(t), name)
		pv.Status.Phase = corev1.VolumeAvailable
		harness.Must(t, binder.Status().Update(ctx, pv), "marking "+name+" Available")
	}
	harness.Must(t, c.Create(ctx, freshClaim(testobj.PVC(ns, "data"))), "creating claim")
	// The cluster's binder must bind only after pvguard has made its choice, or there is nothing
	// to disagree with.
	harness.WaitFor(t, time.Minute, "pvguard's shadow choice", func(context.Context) (bool, error) {
		return metricValue(t, inst, "pvguard_binder_shadow_decided_claims") >= 1, nil
	})
	if pvc := harness.GetPVC(t, admin(t), ns, "data"); pvc.Spec.VolumeName != "" || writes.Load() > 0 {
		t.Fatalf("shadow mode wrote (%d writes, volumeName %q)", writes.Load(), pvc.Spec.VolumeName)
	}
	harness.Must(t, controlplane.UpstreamBind(ctx, binder, large, ns, "data"), "cluster's binder binding the large volume")
	harness.WaitFor(t, time.Minute, "BinderDisagreement event", hasEvent(t, ns, "data", "BinderDisagreement"))
}
