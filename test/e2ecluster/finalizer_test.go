package e2ecluster

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/internal/devcluster"
	"github.com/pvguard/pvguard/test/cluster"
	"github.com/pvguard/pvguard/test/harness"
)

const pvControllerFinalizer = "kubernetes.io/pv-controller"

// TestInTreeProvisionedFinalizer is flow f: a volume the in-tree host-path plugin provisioned
// (provisioned-by kubernetes.io/host-path, reclaim Delete, a directory under /tmp), the one
// in-tree plugin of v1.37 that still provisions and is not migrated to CSI. Both binders put the
// kubernetes.io/pv-controller finalizer on it. Released, the modes differ by design
// (docs/binder.md): kube-controller-manager's in-tree deleter removes the directory, then the
// finalizer, then the volume; pvguard has no in-tree plugins, so the volume becomes Failed
// (VolumeFailedDelete) and keeps its finalizer and its directory, and the documented way out
// (delete the storage, set the reclaim policy to Retain: pvguard removes the finalizer) lets it
// be deleted. The host-path deleter needs no --enable-hostpath-provisioner: only provisioning is
// behind that flag.
func TestInTreeProvisionedFinalizer(t *testing.T) {
	forEachMode(t, func(t *testing.T, m cluster.Mode) *endState {
		ctx := context.Background()
		before := readCounters(t)
		f := newFlow(t, "intree", m)
		ns := f.ns
		class := "hostpath-" + string(m)
		del, imm := corev1.PersistentVolumeReclaimDelete, storagev1.VolumeBindingImmediate
		sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: class}, Provisioner: "kubernetes.io/host-path", ReclaimPolicy: &del, VolumeBindingMode: &imm}
		create(t, sc)
		t.Cleanup(func() { _ = cl.Client.Delete(context.Background(), sc) })

		// The host-path deleter removes only directories under /tmp.
		dir, err := os.MkdirTemp("/tmp", "pvguard-intree-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.RemoveAll(dir) })
		data := filepath.Join(dir, "data")
		if err := os.WriteFile(data, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: "intree-" + string(m) + "-" + filepath.Base(dir)[len("pvguard-intree-"):],
				Annotations: map[string]string{annProvisionedBy: "kubernetes.io/host-path"}},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeReclaimPolicy: del,
				StorageClassName:              class,
				PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir}},
			},
		}
		f.createPVs(pv)
		harness.WaitFor(t, time.Minute, "the pv-controller finalizer on "+pv.Name, func(ctx context.Context) (bool, error) {
			got := &corev1.PersistentVolume{}
			err := cl.Client.Get(ctx, client.ObjectKeyFromObject(pv), got)
			return err == nil && slices.Contains(got.Finalizers, pvControllerFinalizer), err
		})
		pvc := claim(ns, "data", class, "1Gi")
		pvc.Spec.VolumeName = pv.Name
		create(t, pvc)
		harness.WaitFor(t, time.Minute, "claim data Bound", func(ctx context.Context) (bool, error) {
			got := &corev1.PersistentVolumeClaim{}
			err := cl.Client.Get(ctx, client.ObjectKeyFromObject(pvc), got)
			return err == nil && got.Status.Phase == corev1.ClaimBound, err
		})
		if err := cl.Client.Delete(ctx, pvc); err != nil {
			t.Fatal(err)
		}

		switch m {
		case cluster.ModeUpstream:
			harness.WaitFor(t, time.Minute, "volume "+pv.Name+" deleted by kube-controller-manager's host-path deleter", func(ctx context.Context) (bool, error) {
				err := cl.Client.Get(ctx, client.ObjectKeyFromObject(pv), &corev1.PersistentVolume{})
				return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
			})
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("the volume is gone but its directory %s is not (%v)", dir, err)
			}
		case cluster.ModePVGuard:
			waitPhase(t, pv.Name, corev1.VolumeFailed)
			got := harness.GetPV(t, cl.Client, pv.Name)
			if !slices.Contains(got.Finalizers, pvControllerFinalizer) {
				t.Errorf("a Failed in-tree volume whose storage nobody deleted lost its finalizer: %v", got.Finalizers)
			}
			if reasons := kindReasons(t, ns, []string{pv.Name}); !reasons["PersistentVolume/VolumeFailedDelete"] {
				t.Errorf("no VolumeFailedDelete event: %v", reasons)
			}
			if _, err := os.Stat(data); err != nil {
				t.Errorf("pvguard has no in-tree deleter, yet the data is gone: %v", err)
			}
			// The way out docs/binder.md gives: delete the storage, then Retain.
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
			if err := devcluster.PatchPV(ctx, cl.Client, pv.Name, func(v *corev1.PersistentVolume) {
				v.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
			}); err != nil {
				t.Fatalf("setting the reclaim policy to Retain: %v", err)
			}
			harness.WaitFor(t, time.Minute, "pvguard to remove the pv-controller finalizer of a Retain volume", func(ctx context.Context) (bool, error) {
				got := &corev1.PersistentVolume{}
				err := cl.Client.Get(ctx, client.ObjectKeyFromObject(pv), got)
				return err == nil && !slices.Contains(got.Finalizers, pvControllerFinalizer), err
			})
			// The flow's cleanup deletes it and checks it goes.
		}
		checkAdmission(t, before, readCounters(t))
		return nil // the modes differ here by design: each is checked above
	})
}
