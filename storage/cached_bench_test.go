package storage

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BenchmarkCacheTransform is the cache transform's cost for one bound claim as a cluster holds
// it (docs/benchmarks.md, "What the cache keeps"): what it adds to an informer's sync.
func BenchmarkCacheTransform(b *testing.B) {
	tr := CacheShape{ClaimStatus: []string{"phase", "accessModes", "capacity"}}.Transform(NewInterner(4096))
	claims := make([]*corev1.PersistentVolumeClaim, b.N)
	for i := range claims {
		c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("c", i), Namespace: "team-001",
			Labels:        map[string]string{"app": "db", "tier": "data"},
			Annotations:   map[string]string{AnnBindCompleted: "yes", AnnBoundByController: "yes", AnnStorageProvisioner: "rbd.csi.ceph.com", AnnBetaStorageProvisioner: "rbd.csi.ceph.com", AnnLastApplied: `{"apiVersion":"v1","kind":"PersistentVolumeClaim"}`},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}}
		c.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}
		c.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}
		c.Status.Conditions = []corev1.PersistentVolumeClaimCondition{{Type: "Resizing"}}
		claims[i] = c
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		_, _ = tr(claims[i])
	}
}
