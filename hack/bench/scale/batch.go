package main

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// planBatch is the binder's workload: pending Block claims in the Immediate CSI class and free
// Block volumes for about half of them. Block keeps them apart from the fill's Filesystem
// claims, so a binder binds only among them and deleting them leaves the fill as it was.
type planBatch struct {
	claims  []types.NamespacedName
	volumes []string
}

const planLabel = "scale.pvguard.io/plan"

func planClaim(i int) *corev1.PersistentVolumeClaim {
	class := classRBD
	block := corev1.PersistentVolumeBlock
	return &corev1.PersistentVolumeClaim{
		TypeMeta: metav1.TypeMeta{Kind: "PersistentVolumeClaim", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespaceOf(i), Name: fmt.Sprintf("vm-disk-%05d", i),
			Labels: map[string]string{planLabel: "true", "kubevirt.io/vm": fmt.Sprintf("vm-%05d", i)}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &class,
			VolumeMode:       &block,
			Resources:        corev1.VolumeResourceRequirements{Requests: storage([]string{"10Gi", "20Gi", "40Gi", "80Gi"}[i%4])},
		},
	}
}

func planVolume(i int) *corev1.PersistentVolume {
	p := pairSpec{i: i, namespace: namespaceOf(i), capacity: []string{"10Gi", "20Gi", "40Gi", "80Gi", "100Gi"}[i%5]}
	pv := csiVolume(p, fmt.Sprintf("vm-disk-import-%05d", i))
	block := corev1.PersistentVolumeBlock
	pv.Spec.VolumeMode = &block
	pv.Spec.CSI.FSType = ""
	pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
	pv.Labels[planLabel] = "true"
	delete(pv.Annotations, annProvisionedBy)
	pv.Finalizers = nil
	return pv
}

// createPlanBatch creates the free volumes (made Available) and then the pending claims.
func (f *filler) createPlanBatch(ctx context.Context, claims int) (planBatch, error) {
	var b planBatch
	volumes := claims / 2
	for i := range volumes {
		b.volumes = append(b.volumes, planVolume(i).Name)
	}
	for i := range claims {
		c := planClaim(i)
		b.claims = append(b.claims, types.NamespacedName{Namespace: c.Namespace, Name: c.Name})
	}
	if err := f.parallel(ctx, volumes, func(ctx context.Context, i int) error {
		pv, err := f.createVolume(ctx, planVolume(i), managerKubectl)
		if err != nil {
			return err
		}
		// An active binder marks a new volume Available itself: a patch does not conflict with it.
		f.writes.Add(1)
		if _, err := f.cs.CoreV1().PersistentVolumes().Patch(ctx, pv.Name, types.MergePatchType, []byte(`{"status":{"phase":"Available"}}`),
			metav1.PatchOptions{FieldManager: managerController}, "status"); err != nil {
			return fmt.Errorf("volume %s status Available: %w", pv.Name, err)
		}
		return nil
	}); err != nil {
		return b, err
	}
	err := f.parallel(ctx, claims, func(ctx context.Context, i int) error {
		_, err := f.createClaim(ctx, planClaim(i))
		return err
	})
	return b, err
}

// deletePlanBatch removes the batch, finalizers first: no controller is there to remove them.
func (f *filler) deletePlanBatch(ctx context.Context, b planBatch) error {
	noFinalizers := []byte(`{"metadata":{"finalizers":null}}`)
	if err := f.parallel(ctx, len(b.claims), func(ctx context.Context, i int) error {
		c := f.cs.CoreV1().PersistentVolumeClaims(b.claims[i].Namespace)
		if _, err := c.Patch(ctx, b.claims[i].Name, types.MergePatchType, noFinalizers, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("clearing finalizers of claim %s: %w", b.claims[i], err)
		}
		if err := c.Delete(ctx, b.claims[i].Name, metav1.DeleteOptions{}); err != nil {
			return fmt.Errorf("deleting claim %s: %w", b.claims[i], err)
		}
		return nil
	}); err != nil {
		return err
	}
	return f.parallel(ctx, len(b.volumes), func(ctx context.Context, i int) error {
		c := f.cs.CoreV1().PersistentVolumes()
		if _, err := c.Patch(ctx, b.volumes[i], types.MergePatchType, noFinalizers, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("clearing finalizers of volume %s: %w", b.volumes[i], err)
		}
		if err := c.Delete(ctx, b.volumes[i], metav1.DeleteOptions{}); err != nil {
			return fmt.Errorf("deleting volume %s: %w", b.volumes[i], err)
		}
		return nil
	})
}
