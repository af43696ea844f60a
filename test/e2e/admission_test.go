package e2e

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/test/harness"
	"github.com/pvguard/pvguard/test/testobj"
)

var block = corev1.PersistentVolumeBlock

func TestUpstreamBindSequenceIsAdmitted(t *testing.T) {
	ctx := context.Background()
	ns := harness.PrefixedNamespace(t, admin(t), "bind")
	pv := uniq(t, "pv")
	createPair(t, admin(t), pv, ns, "data", nil, nil)
	harness.Must(t, bindAsUpstream(ctx, binder(t), pv, ns, "data"), "upstream bind")
}

func TestPVG001VolumeModeMismatchRefused(t *testing.T) {
	ctx := context.Background()
	a := admin(t)
	ns := harness.PrefixedNamespace(t, admin(t), "mode")
	fsPV := uniq(t, "pv-fs")
	harness.Must(t, a.Create(ctx, harness.FreshPV(testobj.PV(fsPV))), "creating Filesystem volume")

	err := a.Create(ctx, harness.FreshPVC(testobj.PVC(ns, "data", testobj.ClaimVolumeMode(block), testobj.VolumeName(fsPV))))
	msg := expectDenied(t, err, "PVG001")
	want := "[PVG001 volume-mode-match] PersistentVolumeClaim " + ns + "/data requests volumeMode Block, but PersistentVolume " + fsPV + " is Filesystem; use a Block volume or drop spec.volumeName"
	if !strings.Contains(msg, want) {
		t.Errorf("message %q\nwant it to contain %q", msg, want)
	}

	// The same claim against a Block volume is created and binds through all four upstream writes.
	blockPV := uniq(t, "pv-block")
	createPair(t, a, blockPV, ns, "blockdata",
		[]testobj.PVMod{testobj.VolumeMode(block)},
		[]testobj.PVCMod{testobj.ClaimVolumeMode(block), testobj.VolumeName(blockPV)})
	harness.Must(t, bindAsUpstream(ctx, binder(t), blockPV, ns, "blockdata"), "binding matching modes")

	// A volume pre-bound by claimRef to a claim of another mode is refused too.
	err = a.Create(ctx, harness.FreshPV(testobj.PV(uniq(t, "pv-pre"), testobj.ClaimRef(ns, "blockdata", ""))))
	expectDenied(t, err, "PVG001")
}

func TestPVG002ClaimRefUID(t *testing.T) {
	ctx := context.Background()
	a := admin(t)
	ns := harness.PrefixedNamespace(t, admin(t), "uid")
	pvc := harness.FreshPVC(testobj.PVC(ns, "data"))
	harness.Must(t, a.Create(ctx, pvc), "creating claim")

	// A claimRef uid that is not the live claim's: the upstream controller would release (and
	// with Delete, delete) the volume at once.
	err := a.Create(ctx, harness.FreshPV(testobj.PV(uniq(t, "pv-wrong"), testobj.ClaimRef(ns, "data", "0b5a0c1e-0000-0000-0000-000000000000"))))
	expectDenied(t, err, "PVG002")

	// An external provisioner's pre-bound volume carries the live uid and is admitted.
	good := uniq(t, "pv-good")
	harness.Must(t, a.Create(ctx, harness.FreshPV(testobj.PV(good, testobj.ClaimRef(ns, "data", string(pvc.UID))))), "creating provisioned volume")

	// Re-pointing a bound volume's claimRef at another claim is refused.
	other := harness.FreshPVC(testobj.PVC(ns, "other"))
	harness.Must(t, a.Create(ctx, other), "creating second claim")
	err = patchPV(ctx, a, good, func(pv *corev1.PersistentVolume) {
		pv.Spec.ClaimRef.Name, pv.Spec.ClaimRef.UID = "other", other.UID
	})
	expectDenied(t, err, "PVG002")
}

func TestPVG003VolumeNameImmutable(t *testing.T) {
	ctx := context.Background()
	a := admin(t)
	ns := harness.PrefixedNamespace(t, admin(t), "immut")
	pv := uniq(t, "pv")
	createPair(t, a, pv, ns, "data", nil, nil)
	harness.Must(t, bindAsUpstream(ctx, binder(t), pv, ns, "data"), "binding")

	// Removing bind-completed while volumeName is set would let the claim be re-bound.
	err := patchPVC(ctx, a, ns, "data", func(pvc *corev1.PersistentVolumeClaim) {
		delete(pvc.Annotations, "pv.kubernetes.io/bind-completed")
	})
	expectDenied(t, err, "PVG003")

	// Changing or clearing volumeName after bind-completed is refused. The apiserver's own
	// validation already forbids it for claims, so either layer may answer; pvguard's rule is
	// the backstop for API servers or paths that allow it.
	other := uniq(t, "pv-other")
	harness.Must(t, a.Create(ctx, harness.FreshPV(testobj.PV(other))), "creating another volume")
	for name, to := range map[string]string{"change": other, "clear": ""} {
		err := patchPVC(ctx, a, ns, "data", func(pvc *corev1.PersistentVolumeClaim) { pvc.Spec.VolumeName = to })
		if err == nil {
			t.Fatalf("%s volumeName was admitted", name)
		}
		if !strings.Contains(err.Error(), "[PVG003 ") && !strings.Contains(err.Error(), "immutable") {
			t.Fatalf("%s volumeName: unexpected error %v", name, err)
		}
	}

	// Unrelated edits of the bound claim still pass.
	harness.Must(t, patchPVC(ctx, a, ns, "data", func(pvc *corev1.PersistentVolumeClaim) {
		setAnnotation(&pvc.Annotations, "example.com/owner", "team-a")
	}), "annotating a bound claim")
}

func TestPVG004SecondClaimOnClaimedVolumeRefused(t *testing.T) {
	ctx := context.Background()
	a := admin(t)
	ns := harness.PrefixedNamespace(t, admin(t), "double")
	pv := uniq(t, "pv")
	createPair(t, a, pv, ns, "first", nil, nil)
	harness.Must(t, bindAsUpstream(ctx, binder(t), pv, ns, "first"), "binding the first claim")

	err := a.Create(ctx, harness.FreshPVC(testobj.PVC(ns, "second", testobj.VolumeName(pv))))
	expectDenied(t, err, "PVG004")

	// A volume may not be pointed at a claim that is already bound to another volume either.
	err = a.Create(ctx, harness.FreshPV(testobj.PV(uniq(t, "pv-2"), testobj.ClaimRef(ns, "first", ""))))
	expectDenied(t, err, "PVG004")
}

func TestPVG005CapacityFits(t *testing.T) {
	ctx := context.Background()
	a := admin(t)
	ns := harness.PrefixedNamespace(t, admin(t), "capacity")
	small := uniq(t, "pv-small")
	harness.Must(t, a.Create(ctx, harness.FreshPV(testobj.PV(small, testobj.Capacity("1Gi")))), "creating volume")
	err := a.Create(ctx, harness.FreshPVC(testobj.PVC(ns, "big", testobj.Request("5Gi"), testobj.VolumeName(small))))
	expectDenied(t, err, "PVG005")

	pv := uniq(t, "pv-fits")
	createPair(t, a, pv, ns, "data", []testobj.PVMod{testobj.Capacity("2Gi")}, []testobj.PVCMod{testobj.Request("2Gi")})
	harness.Must(t, bindAsUpstream(ctx, binder(t), pv, ns, "data"), "binding a fitting claim")
	err = patchPV(ctx, a, pv, func(pv *corev1.PersistentVolume) {
		pv.Spec.Capacity[corev1.ResourceStorage] = resource.MustParse("1Gi")
	})
	expectDenied(t, err, "PVG005")
}

func TestPVG006AccessModes(t *testing.T) {
	ctx := context.Background()
	a := admin(t)
	ns := harness.PrefixedNamespace(t, admin(t), "modes")
	rwo := uniq(t, "pv-rwo")
	harness.Must(t, a.Create(ctx, harness.FreshPV(testobj.PV(rwo))), "creating RWO volume")
	err := a.Create(ctx, harness.FreshPVC(testobj.PVC(ns, "shared", testobj.ClaimAccessModes(corev1.ReadWriteMany), testobj.VolumeName(rwo))))
	expectDenied(t, err, "PVG006")

	both := uniq(t, "pv-both")
	createPair(t, a, both, ns, "data",
		[]testobj.PVMod{testobj.AccessModes(corev1.ReadWriteOnce, corev1.ReadOnlyMany)},
		[]testobj.PVCMod{testobj.ClaimAccessModes(corev1.ReadOnlyMany)})
	harness.Must(t, bindAsUpstream(ctx, binder(t), both, ns, "data"), "binding")
	err = patchPV(ctx, a, both, func(pv *corev1.PersistentVolume) {
		pv.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	})
	expectDenied(t, err, "PVG006")
}

// TestPVG009NodeAffinity follows the only sequence in which the real components bind a claim
// that carries volume.kubernetes.io/selected-node: kube-scheduler sets it on a claim of a
// WaitForFirstConsumer class to ask for provisioning on that node (it binds static volumes
// itself, through the volume's claimRef, and never sets selected-node for them), a provisioner
// creates a volume pre-bound to the claim, and the PV controller completes the binding. A
// provisioner that made the volume for another node is refused. It does not set selected-node
// and have the PV controller bind a free static volume: no real component does.
func TestPVG009NodeAffinity(t *testing.T) {
	ctx := context.Background()
	a := admin(t)
	ns := harness.PrefixedNamespace(t, admin(t), "affinity")
	node := uniq(t, "node")
	harness.Must(t, a.Create(ctx, testobj.Node(node, nil)), "creating node")
	class := uniq(t, "wffc")
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	harness.Must(t, a.Create(ctx, testobj.StorageClass(class, "csi.example.com", func(sc *storagev1.StorageClass) { sc.VolumeBindingMode = &wffc })), "creating class")
	t.Cleanup(func() { _ = a.Delete(context.Background(), testobj.StorageClass(class, "")) })
	scheduler := newActor(t, schedulerUser)

	for _, tc := range []struct {
		name, host string
		wantRule   string
	}{
		{name: "elsewhere", host: "some-other-node", wantRule: "PVG009"},
		{name: "here", host: node},
	} {
		t.Run(tc.name, func(t *testing.T) {
			claim := "data-" + tc.name
			pvc := harness.FreshPVC(testobj.PVC(ns, claim, testobj.ClaimClass(class)))
			harness.Must(t, a.Create(ctx, pvc), "creating claim")
			// The scheduler found no static volume on the node and asks for one there.
			harness.Must(t, patchPVC(ctx, scheduler, ns, claim, func(pvc *corev1.PersistentVolumeClaim) {
				setAnnotation(&pvc.Annotations, "volume.kubernetes.io/selected-node", node)
			}), "scheduler selecting a node")
			// The provisioner's volume, pre-bound to the claim as it read it: its uid and the
			// resourceVersion with selected-node (a provisioner's claimRef is client-go's
			// reference to the claim). pvguard's cache may not hold that version yet.
			seen := harness.GetPVC(t, a, ns, claim)
			pv := uniq(t, "pv")
			vol := testobj.PV(pv, testobj.Class(class), testobj.NodeAffinity("kubernetes.io/hostname", tc.host),
				testobj.ClaimRef(ns, claim, string(seen.UID)), testobj.Reclaim(corev1.PersistentVolumeReclaimDelete),
				testobj.PVMeta(testobj.Annotation("pv.kubernetes.io/provisioned-by", "csi.example.com")))
			vol.Spec.ClaimRef.ResourceVersion = seen.ResourceVersion
			err := a.Create(ctx, harness.FreshPV(vol))
			if tc.wantRule != "" {
				expectDenied(t, err, tc.wantRule)
				return
			}
			harness.Must(t, err, "provisioning a volume on the selected node")
			harness.Must(t, bindAsUpstream(ctx, binder(t), pv, ns, claim), "completing the binding")
		})
	}
}

func TestPVG011ReclaimDowngrade(t *testing.T) {
	ctx := context.Background()
	a := admin(t)
	ns := harness.PrefixedNamespace(t, admin(t), "reclaim")
	pv := uniq(t, "pv")
	createPair(t, a, pv, ns, "data", []testobj.PVMod{testobj.Reclaim(corev1.PersistentVolumeReclaimRetain)}, nil)
	harness.Must(t, bindAsUpstream(ctx, binder(t), pv, ns, "data"), "binding")

	toDelete := func(pv *corev1.PersistentVolume) {
		pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimDelete
	}
	msg := expectDenied(t, patchPV(ctx, a, pv, toDelete), "PVG011")
	if !strings.Contains(msg, "pvguard.io/confirm-reclaim-policy") {
		t.Errorf("denial does not say how to confirm: %s", msg)
	}
	harness.Must(t, patchPV(ctx, a, pv, func(pv *corev1.PersistentVolume) {
		toDelete(pv)
		setAnnotation(&pv.Annotations, "pvguard.io/confirm-reclaim-policy", "Delete")
	}), "confirmed reclaim policy change")
}

func TestPVG012ProtectionFinalizer(t *testing.T) {
	ctx := context.Background()
	a := admin(t)
	ns := harness.PrefixedNamespace(t, admin(t), "finalizer")
	pv := uniq(t, "pv")
	createPair(t, a, pv, ns, "data", nil, nil)
	harness.Must(t, bindAsUpstream(ctx, binder(t), pv, ns, "data"), "binding")

	pvc := &corev1.PersistentVolumeClaim{}
	harness.Must(t, a.Get(ctx, client.ObjectKey{Namespace: ns, Name: "data"}, pvc), "reading claim")
	if len(pvc.Finalizers) == 0 {
		t.Fatalf("the apiserver added no protection finalizer to %s/data; is StorageObjectInUseProtection on?", ns)
	}
	err := patchPVC(ctx, a, ns, "data", func(pvc *corev1.PersistentVolumeClaim) { pvc.Finalizers = nil })
	expectDenied(t, err, "PVG012")

	// The protection controller itself may remove it (it updates; its role has no patch).
	protector := newActor(t, "system:serviceaccount:kube-system:pvc-protection-controller", "system:serviceaccounts", "system:authenticated")
	harness.Must(t, protector.Get(ctx, client.ObjectKey{Namespace: ns, Name: "data"}, pvc), "reading claim")
	pvc.Finalizers = nil
	harness.Must(t, protector.Update(ctx, pvc), "protection controller removing its finalizer")
}

func TestPVG014ClaimRefShapeAndMutation(t *testing.T) {
	ctx := context.Background()
	a := admin(t)
	ns := harness.PrefixedNamespace(t, admin(t), "shape")
	bad := harness.FreshPV(testobj.PV(uniq(t, "pv-pod")))
	bad.Spec.ClaimRef = &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: ns, Name: "data"}
	expectDenied(t, a.Create(ctx, bad), "PVG014")

	// The mutating webhook fills in a claimRef's kind and apiVersion.
	name := uniq(t, "pv-bare")
	bare := harness.FreshPV(testobj.PV(name))
	bare.Spec.ClaimRef = &corev1.ObjectReference{Namespace: ns, Name: "data"}
	harness.Must(t, a.Create(ctx, bare), "creating a volume with a bare claimRef")
	got := &corev1.PersistentVolume{}
	harness.Must(t, a.Get(ctx, client.ObjectKey{Name: name}, got), "reading it back")
	if got.Spec.ClaimRef.Kind != "PersistentVolumeClaim" || got.Spec.ClaimRef.APIVersion != "v1" {
		t.Fatalf("claimRef not normalised: %+v", got.Spec.ClaimRef)
	}
}

func TestWarnRulesReturnWarnings(t *testing.T) {
	ctx := context.Background()
	a := admin(t)
	ns := harness.PrefixedNamespace(t, admin(t), "warn")

	// PVG007: a pre-bound claim whose class differs from the volume's.
	fast := uniq(t, "pv-fast")
	harness.Must(t, a.Create(ctx, harness.FreshPV(testobj.PV(fast, testobj.Class("fast")))), "creating volume")
	a.warnings.Take()
	harness.Must(t, a.Create(ctx, harness.FreshPVC(testobj.PVC(ns, "slow", testobj.ClaimClass("slow"), testobj.VolumeName(fast)))), "creating claim")
	if ws := a.warnings.Take(); !hasWarning(ws, "PVG007") {
		t.Errorf("no PVG007 warning; got %q", ws)
	}

	// PVG010: naming a volume that is neither pre-bound to the claim nor granted to its namespace.
	free := uniq(t, "pv-free")
	harness.Must(t, a.Create(ctx, harness.FreshPV(testobj.PV(free))), "creating volume")
	harness.Must(t, a.Create(ctx, harness.FreshPVC(testobj.PVC(ns, "grab", testobj.VolumeName(free)))), "creating claim")
	if ws := a.warnings.Take(); !hasWarning(ws, "PVG010") {
		t.Errorf("no PVG010 warning; got %q", ws)
	}

	// PVG016: credentials in CSI attributes are reported by key, never by value.
	const canary = "canary-s3cr3t-value"
	harness.Must(t, a.Create(ctx, harness.FreshPV(testobj.PV(uniq(t, "pv-csi"), testobj.CSI("rbd.csi.ceph.com", "vol-1", map[string]string{"userKeyring": canary})))), "creating CSI volume")
	ws := a.warnings.Take()
	if !hasWarning(ws, "PVG016") {
		t.Errorf("no PVG016 warning; got %q", ws)
	}
	for _, w := range ws {
		if strings.Contains(w, canary) {
			t.Errorf("warning leaks the secret value: %q", w)
		}
	}
}

func TestDryRunIsJudgedAndPersistsNothing(t *testing.T) {
	ctx := context.Background()
	a := admin(t)
	ns := harness.PrefixedNamespace(t, admin(t), "dryrun")
	fsPV := uniq(t, "pv")
	harness.Must(t, a.Create(ctx, harness.FreshPV(testobj.PV(fsPV))), "creating volume")
	bad := harness.FreshPVC(testobj.PVC(ns, "data", testobj.ClaimVolumeMode(block), testobj.VolumeName(fsPV)))
	expectDenied(t, a.Create(ctx, bad, client.DryRunAll), "PVG001")

	good := harness.FreshPVC(testobj.PVC(ns, "fine", testobj.VolumeName(fsPV)))
	harness.Must(t, a.Create(ctx, good, client.DryRunAll), "dry-run create")
	err := a.Get(ctx, client.ObjectKey{Namespace: ns, Name: "fine"}, &corev1.PersistentVolumeClaim{})
	if err == nil {
		t.Fatal("dry-run create persisted the claim")
	}
}

func TestNamespaceExemption(t *testing.T) {
	ctx := context.Background()
	a := admin(t)
	ns := harness.PrefixedNamespace(t, admin(t), "exempt") // matches exemptions.namespaces: [exempt-*]
	fsPV := uniq(t, "pv")
	harness.Must(t, a.Create(ctx, harness.FreshPV(testobj.PV(fsPV))), "creating volume")
	harness.Must(t, a.Create(ctx, harness.FreshPVC(testobj.PVC(ns, "data", testobj.ClaimVolumeMode(block), testobj.VolumeName(fsPV)))),
		"a mismatched claim in an exempt namespace")
}
