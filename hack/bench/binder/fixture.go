package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// runLabel marks the volumes of one run, so cleanup finds exactly them.
const runLabel = "bench.pvguard.io/run"

// fixture is one run's objects: a namespace, a storage class and n exact 1Gi pairs. The class
// (and so every volume and claim) is unique to the run, so no binder can ever match one run's
// claim with another run's leftover volume.
type fixture struct {
	cs        kubernetes.Interface
	name      string // namespace, class and label value
	pairs     int
	creators  int
	namespace string
	// available marks each volume Available after creating it, as a binder that had been running
	// when the volume appeared would have; otherwise volumes start Pending, as created.
	available bool
}

func newFixture(cs kubernetes.Interface, seq, pairs, creators int, available bool) *fixture {
	name := fmt.Sprintf("bench-%d", seq)
	return &fixture{cs: cs, name: name, pairs: pairs, creators: creators, namespace: name, available: available}
}

func (f *fixture) volumeName(i int) string { return fmt.Sprintf("%s-pv-%05d", f.name, i) }
func (f *fixture) claimName(i int) string  { return fmt.Sprintf("claim-%05d", i) }

func gi() corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
}

func (f *fixture) volume(i int) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: f.volumeName(i), Labels: map[string]string{runLabel: f.name}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      gi(),
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              f.name,
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: "/bench/" + f.volumeName(i)},
			},
		},
	}
}

func (f *fixture) claim(i int) *corev1.PersistentVolumeClaim {
	class := f.name
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.namespace, Name: f.claimName(i)},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &class,
			Resources:        corev1.VolumeResourceRequirements{Requests: gi()},
		},
	}
}

// create makes the namespace, the class (no provisioner, Immediate binding) and the pairs: all
// volumes first (made Available with f.available), then all claims, each with f.creators
// parallel requests.
func (f *fixture) create(ctx context.Context) error {
	if _, err := f.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.namespace}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating namespace %s: %w", f.namespace, err)
	}
	immediate := storagev1.VolumeBindingImmediate
	sc := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: f.name},
		Provisioner:       "kubernetes.io/no-provisioner",
		VolumeBindingMode: &immediate,
	}
	if _, err := f.cs.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating storage class %s: %w", f.name, err)
	}
	if err := parallel(ctx, f.pairs, f.creators, func(ctx context.Context, i int) error {
		pv, err := f.cs.CoreV1().PersistentVolumes().Create(ctx, f.volume(i), metav1.CreateOptions{})
		if err != nil || !f.available {
			return err
		}
		pv.Status.Phase = corev1.VolumeAvailable
		_, err = f.cs.CoreV1().PersistentVolumes().UpdateStatus(ctx, pv, metav1.UpdateOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("creating volumes: %w", err)
	}
	if err := parallel(ctx, f.pairs, f.creators, func(ctx context.Context, i int) error {
		_, err := f.cs.CoreV1().PersistentVolumeClaims(f.namespace).Create(ctx, f.claim(i), metav1.CreateOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("creating claims: %w", err)
	}
	return nil
}

// bound counts the namespace's claims whose status.phase is Bound.
func (f *fixture) bound(ctx context.Context) (int, error) {
	list, err := f.cs.CoreV1().PersistentVolumeClaims(f.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	n := 0
	for i := range list.Items {
		if list.Items[i].Status.Phase == corev1.ClaimBound {
			n++
		}
	}
	return n, nil
}

// verify checks every claim is bound to a distinct volume of the run that points back at it, so
// a count of Bound claims is a count of real bindings.
func (f *fixture) verify(ctx context.Context) error {
	claims, err := f.cs.CoreV1().PersistentVolumeClaims(f.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	pvs, err := f.cs.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{LabelSelector: runLabel + "=" + f.name})
	if err != nil {
		return err
	}
	byName := map[string]*corev1.PersistentVolume{}
	for i := range pvs.Items {
		byName[pvs.Items[i].Name] = &pvs.Items[i]
	}
	used := map[string]bool{}
	for _, c := range claims.Items {
		if c.Status.Phase != corev1.ClaimBound {
			continue
		}
		pv := byName[c.Spec.VolumeName]
		switch {
		case pv == nil:
			return fmt.Errorf("claim %s is Bound to %q, not a volume of this run", c.Name, c.Spec.VolumeName)
		case used[pv.Name]:
			return fmt.Errorf("volume %s is bound to two claims", pv.Name)
		case pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != c.UID || pv.Status.Phase != corev1.VolumeBound:
			return fmt.Errorf("claim %s is Bound to %s, which does not point back at it as Bound", c.Name, pv.Name)
		}
		used[pv.Name] = true
	}
	return nil
}

// cleanup removes the run's claims, events, volumes and class. No pvc-protection or
// pv-protection controller runs, so the protection finalizers the apiserver's admission added are
// patched away first; the namespace itself is left (empty: nothing would finalize its deletion).
func (f *fixture) cleanup(ctx context.Context) error {
	dropFinalizers := []byte(`{"metadata":{"finalizers":null}}`)
	var errs []error
	claims, err := f.cs.CoreV1().PersistentVolumeClaims(f.namespace).List(ctx, metav1.ListOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, err)
	}
	if claims != nil {
		errs = append(errs, parallel(ctx, len(claims.Items), f.creators, func(ctx context.Context, i int) error {
			api := f.cs.CoreV1().PersistentVolumeClaims(f.namespace)
			name := claims.Items[i].Name
			if _, err := api.Patch(ctx, name, types.MergePatchType, dropFinalizers, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			if err := api.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			return nil
		}))
	}
	errs = append(errs, f.cs.CoreV1().Events(f.namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}))
	sel := metav1.ListOptions{LabelSelector: runLabel + "=" + f.name}
	pvs, err := f.cs.CoreV1().PersistentVolumes().List(ctx, sel)
	if err != nil {
		errs = append(errs, err)
	}
	if pvs != nil {
		errs = append(errs, parallel(ctx, len(pvs.Items), f.creators, func(ctx context.Context, i int) error {
			api := f.cs.CoreV1().PersistentVolumes()
			name := pvs.Items[i].Name
			if _, err := api.Patch(ctx, name, types.MergePatchType, dropFinalizers, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			if err := api.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			return nil
		}))
	}
	if err := f.cs.StorageV1().StorageClasses().Delete(ctx, f.name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cleaning up %s: %w", f.name, err)
	}
	// Wait until the objects are really gone, so the next run's informers never list them.
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pvs, err := f.cs.CoreV1().PersistentVolumes().List(ctx, sel)
		if err != nil {
			return false, err
		}
		claims, err := f.cs.CoreV1().PersistentVolumeClaims(f.namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		return len(pvs.Items) == 0 && len(claims.Items) == 0, nil
	})
}

// parallel calls do(i) for i in [0, n) on workers goroutines and returns the first error.
func parallel(ctx context.Context, n, workers int, do func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := make(chan int)
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for range workers {
		wg.Go(func() {
			for i := range next {
				if err := do(ctx, i); err != nil {
					once.Do(func() { first = err; cancel() })
				}
			}
		})
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return first
}
