package storage

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestStripKeepsOnlyTheShapesStatus: Strip and the cache's transform keep the status fields the
// shape names and drop every other, with managed fields and the last-applied annotation.
func TestStripKeepsOnlyTheShapesStatus(t *testing.T) {
	at := metav1.Now()
	meta := metav1.ObjectMeta{Name: "data", Namespace: "team-a",
		Annotations:   map[string]string{AnnLastApplied: "{}", "team": "a"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}
	volume := &corev1.PersistentVolume{ObjectMeta: meta, Status: corev1.PersistentVolumeStatus{
		Phase: corev1.VolumeReleased, Message: "m", Reason: "r", LastPhaseTransitionTime: &at}}
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: meta, Status: corev1.PersistentVolumeClaimStatus{
		Phase: corev1.ClaimBound, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Capacity:                  corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
		AllocatedResourceStatuses: map[corev1.ResourceName]corev1.ClaimResourceStatus{corev1.ResourceStorage: corev1.PersistentVolumeClaimControllerResizeInProgress}}}
	shape := CacheShape{VolumeStatus: []string{"phase"}, ClaimStatus: []string{"phase", "capacity"}}
	wantMeta := metav1.ObjectMeta{Name: "data", Namespace: "team-a", Annotations: map[string]string{"team": "a"}}
	wantVolume := &corev1.PersistentVolume{ObjectMeta: wantMeta, Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeReleased}}
	wantClaim := &corev1.PersistentVolumeClaim{ObjectMeta: wantMeta, Status: corev1.PersistentVolumeClaimStatus{
		Phase: corev1.ClaimBound, Capacity: claim.Status.Capacity}}
	for name, strip := range map[string]func(any) (any, error){
		"Strip":     shape.Strip,
		"Transform": shape.Transform(NewInterner(16)),
	} {
		for _, c := range []struct{ in, want any }{{volume.DeepCopy(), wantVolume}, {claim.DeepCopy(), wantClaim}} {
			got, err := strip(c.in)
			if err != nil {
				t.Fatal(err)
			}
			if !equality.Semantic.DeepEqual(got, c.want) {
				t.Errorf("%s: got\n%#v\nwant\n%#v", name, got, c.want)
			}
		}
	}
}
