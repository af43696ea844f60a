package binder

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/storage"
	"github.com/pvguard/pvguard/test/testobj"
)

// scaleNodes and scaleNamespaces shape the generated cluster: local volumes are spread over the
// nodes, claims over the namespaces.
const (
	scaleNodes      = 32
	scaleNamespaces = 200
)

// scaleCluster generates a cluster of nVolumes volumes and nPending pending claims of the
// Immediate default class "standard", deterministically. There are nPending/2 free volumes
// (Available, a few still Pending; a few pre-bound by name, some with the claim's uid, to a
// pending claim), one in twenty of all volumes is Released, and the rest are bound to claims
// that exist and are bound (one in twenty of those of the WaitForFirstConsumer class "local").
// So at 100,000 volumes 90% are bound; at 10,000 only 45% are, since the 5,000 free ones take
// half. Free volumes are 1-100Gi, a third of them local (node affinity to one of 32 nodes), with
// tier and zone labels and mixed access modes; claims ask for 1-100Gi with mixed access modes,
// one in ten selects volumes by label and one in twenty carries selected-node.
func scaleCluster(nVolumes, nPending int) []client.Object {
	rng := rand.New(rand.NewPCG(16, uint64(nVolumes)))
	free := nPending / 2
	released := nVolumes / 20
	bound := max(nVolumes-free-released, 0)
	standard := class("standard", "csi.example.com", storagev1.VolumeBindingImmediate)
	testobj.DefaultClass(standard)
	objs := []client.Object{standard, class("local", storage.NoProvisioner, storagev1.VolumeBindingWaitForFirstConsumer)}
	node := func(i int) string { return fmt.Sprintf("node-%02d", i%scaleNodes) }
	for i := range scaleNodes {
		objs = append(objs, testobj.Node(node(i), map[string]string{"topology.kubernetes.io/zone": fmt.Sprintf("zone-%d", i%4)}))
	}
	size := func() string { return fmt.Sprintf("%dGi", 1+rng.IntN(100)) }
	rwo, rox, rwx := corev1.ReadWriteOnce, corev1.ReadOnlyMany, corev1.ReadWriteMany
	volumeModes := func() []corev1.PersistentVolumeAccessMode {
		switch r := rng.IntN(10); {
		case r < 7:
			return []corev1.PersistentVolumeAccessMode{rwo}
		case r < 9:
			return []corev1.PersistentVolumeAccessMode{rwo, rwx}
		default:
			return []corev1.PersistentVolumeAccessMode{rwo, rox, rwx}
		}
	}
	tiers := []string{"gold", "silver", "bronze"}
	csi := func(name string) testobj.PVMod {
		return testobj.CSI("csi.example.com", "vol-"+name, map[string]string{"storage.kubernetes.io/csiProvisionerIdentity": "1700000000000-8081-csi.example.com", "fsType": "ext4"})
	}
	pendingClaim := func(j int) (namespace, name string) {
		return fmt.Sprintf("ns-%03d", j%scaleNamespaces), fmt.Sprintf("pending-%05d", j)
	}

	for i := range bound {
		ns, name := fmt.Sprintf("ns-%03d", i%scaleNamespaces), fmt.Sprintf("data-%06d", i)
		pvName := fmt.Sprintf("pvc-bound-%06d", i)
		cls := "standard"
		if i%20 == 0 {
			cls = "local"
		}
		s, modes := size(), volumeModes()
		claim := testobj.PVC(ns, name, testobj.ClaimClass(cls), testobj.Request(s), testobj.ClaimAccessModes(modes[0]),
			testobj.ClaimBoundTo(pvName), testobj.ClaimStatusCapacity(s),
			testobj.ClaimMeta(testobj.Label("app", name), testobj.Annotation(storage.AnnBoundByController, "yes"),
				testobj.Annotation(storage.AnnStorageProvisioner, "csi.example.com"), testobj.Finalizers("kubernetes.io/pvc-protection")))
		pv := testobj.PV(pvName, testobj.Class(cls), testobj.Capacity(s), testobj.AccessModes(modes...),
			testobj.Reclaim(corev1.PersistentVolumeReclaimDelete), csi(pvName), testobj.BoundTo(claim),
			testobj.PVMeta(testobj.Label("tier", tiers[i%3]), testobj.Annotation(storage.AnnProvisionedBy, "csi.example.com"),
				testobj.Finalizers("kubernetes.io/pv-protection", "external-provisioner.volume.kubernetes.io/finalizer")))
		objs = append(objs, claim, pv)
	}
	for i := range released {
		name := fmt.Sprintf("pvc-released-%06d", i)
		objs = append(objs, testobj.PV(name, testobj.Class("standard"), testobj.Capacity(size()), testobj.AccessModes(volumeModes()...),
			csi(name), testobj.ClaimRef(fmt.Sprintf("ns-%03d", i%scaleNamespaces), fmt.Sprintf("gone-%06d", i), fmt.Sprintf("uid-gone-%d", i)),
			testobj.Phase(corev1.VolumeReleased), testobj.PVMeta(testobj.Label("tier", tiers[i%3]))))
	}
	for i := range free {
		name := fmt.Sprintf("pv-free-%06d", i)
		mods := []testobj.PVMod{testobj.Class("standard"), testobj.Capacity(size()), testobj.AccessModes(volumeModes()...),
			testobj.Phase(corev1.VolumeAvailable),
			testobj.PVMeta(testobj.Label("tier", tiers[rng.IntN(3)]), testobj.Label("topology.kubernetes.io/zone", fmt.Sprintf("zone-%d", i%4)))}
		if i%3 == 0 {
			mods = append(mods, testobj.NodeAffinity("kubernetes.io/hostname", node(i)),
				func(pv *corev1.PersistentVolume) {
					pv.Spec.PersistentVolumeSource = corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/mnt/disks/" + name}}
				})
		} else {
			mods = append(mods, csi(name))
		}
		switch r := rng.IntN(100); {
		case r < 2:
			mods = append(mods, testobj.Phase(corev1.VolumePending))
		case r < 3:
			ns, claim := pendingClaim(rng.IntN(nPending))
			uid := ""
			if r%2 == 0 {
				uid = string(testobj.PVC(ns, claim).UID)
			}
			mods = append(mods, testobj.ClaimRef(ns, claim, uid))
		}
		objs = append(objs, testobj.PV(name, mods...))
	}
	for j := range nPending {
		ns, name := pendingClaim(j)
		mods := []testobj.PVCMod{testobj.ClaimClass("standard"), testobj.Request(size()), testobj.ClaimMeta(testobj.Label("app", name))}
		switch r := rng.IntN(20); {
		case r < 3:
			mods = append(mods, testobj.ClaimAccessModes(rwx))
		case r < 4:
			mods = append(mods, testobj.ClaimAccessModes(rox))
		}
		switch r := rng.IntN(20); {
		case r == 0:
			mods = append(mods, testobj.Selector(map[string]string{"tier": tiers[rng.IntN(3)]}))
		case r == 1:
			mods = append(mods, testobj.SelectorExpression("tier", metav1.LabelSelectorOpIn, "gold", "silver"))
		}
		if rng.IntN(20) == 0 {
			mods = append(mods, testobj.ClaimMeta(testobj.Annotation(storage.AnnSelectedNode, node(rng.IntN(scaleNodes)))))
		}
		objs = append(objs, testobj.PVC(ns, name, mods...))
	}
	return objs
}

// scalePlanner is an active binder reading from a memCache of objs.
func scalePlanner(tb testing.TB, objs ...client.Object) *Binder {
	tb.Helper()
	cache, err := newMemCache(objs...)
	if err != nil {
		tb.Fatal(err)
	}
	b, err := New(Options{
		Mode: ModeActive, Engine: func() *policy.Engine { return policy.NewEngine(nil) },
		Views:    func(context.Context) policy.View { return testobj.NewView() },
		Recorder: record.NewFakeRecorder(10), Cache: cache, Live: cache, Writer: fake.NewClientBuilder().Build(),
	})
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// BenchmarkPlanAtScale times one plan (runPlan: list, pre-bound pass, matching) of 10,000 pending
// claims over 10,000 to 100,000 volumes (see scaleCluster), read from a cache that copies as the
// informer cache does. The 2,000-volume case is for development. Results are in
// docs/benchmarks.md.
func BenchmarkPlanAtScale(b *testing.B) {
	for _, tc := range []struct{ volumes, pending int }{
		{2_000, 1_000}, {10_000, 10_000}, {50_000, 10_000}, {100_000, 10_000},
	} {
		b.Run(fmt.Sprintf("volumes=%d/pending=%d", tc.volumes, tc.pending), func(b *testing.B) {
			objs := scaleCluster(tc.volumes, tc.pending)
			bd := scalePlanner(b, objs...)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if err := bd.runPlan(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(countPlanned(bd, objs)), "planned")
		})
	}
}
