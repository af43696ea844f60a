package storage_test

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pvguard/pvguard/storage"
)

func TestPods(t *testing.T) {
	deleting := metav1.Now()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-0", UID: "u", ResourceVersion: "7", DeletionTimestamp: &deleting,
			Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"a": "b"}},
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Env: []corev1.EnvVar{{Name: "PASSWORD", Value: "x"}}}},
			Volumes: []corev1.Volume{
				{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-web-0"}}},
				{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{}}}},
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}},
			}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1"},
	}
	if got, want := storage.PodClaims(p), []string{"data-web-0", "web-0-scratch"}; !slices.Equal(got, want) {
		t.Errorf("PodClaims = %v, want %v", got, want)
	}
	if !storage.PodUsesClaim(p, "web-0-scratch") || storage.PodUsesClaim(p, "config") {
		t.Error("PodUsesClaim: want the ephemeral volume's claim, not a ConfigMap volume")
	}
	s := storage.StripPod(p)
	if !slices.Equal(storage.PodClaims(s), storage.PodClaims(p)) || storage.PodNode(s) != "n1" || s.Name != "web-0" || s.Namespace != "ns" ||
		s.UID != "u" || s.ResourceVersion != "7" || s.DeletionTimestamp == nil || s.Status.Phase != corev1.PodRunning {
		t.Errorf("StripPod lost what the rules read: %+v", s)
	}
	if s.Labels != nil || s.Annotations != nil || s.Spec.Containers != nil || s.Status.PodIP != "" || s.Spec.Volumes[1].Ephemeral.VolumeClaimTemplate != nil || len(s.Spec.Volumes) != 2 {
		t.Errorf("StripPod kept more than the rules read: %+v", s)
	}
	for phase, want := range map[corev1.PodPhase]string{corev1.PodPending: "n1", corev1.PodRunning: "n1", corev1.PodSucceeded: "", corev1.PodFailed: ""} {
		p := p.DeepCopy()
		p.Status.Phase = phase
		if got := storage.PodNode(p); got != want {
			t.Errorf("PodNode of a %s pod = %q, want %q", phase, got, want)
		}
	}
}
