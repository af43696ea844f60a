package cli

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/pvguard/pvguard/explain"
	. "github.com/pvguard/pvguard/test/testobj"
)

// TestReadInputLive reads a cluster as the live command does and explains from it.
func TestReadInputLive(t *testing.T) {
	wait := storagev1.VolumeBindingWaitForFirstConsumer
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web-0"},
		Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}}}
	other := pod.DeepCopy()
	other.Namespace = "team-b"
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(
		PVC("team-a", "data", ClaimClass("local")),
		PV("pv-1", Class("local"), Phase(corev1.VolumeAvailable)),
		StorageClass("local", "kubernetes.io/no-provisioner", func(sc *storagev1.StorageClass) { sc.VolumeBindingMode = &wait }),
		Node("n1", nil), pod, other,
		&corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web-0.1"}, Reason: "FailedScheduling",
			Message: "0/1 nodes are available.", InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "team-a", Name: "web-0"}},
	).Build()
	in, err := readInput(context.Background(), c, "team-a", "")
	if err != nil {
		t.Fatal(err)
	}
	s := in.State
	if len(s.Claims()) != 1 || len(s.Volumes()) != 1 || len(s.Classes()) != 1 || len(s.Nodes()) != 1 || len(in.Pods) != 1 || len(in.Events) != 1 {
		t.Fatalf("read %d claims, %d volumes, %d classes, %d nodes, %d pods, %d events", len(s.Claims()), len(s.Volumes()),
			len(s.Classes()), len(s.Nodes()), len(in.Pods), len(in.Events))
	}
	if s.Nodes()[0].Labels["kubernetes.io/hostname"] != "n1" {
		t.Errorf("node labels %v", s.Nodes()[0].Labels)
	}
	e, err := explain.Claim(in, "team-a", "data")
	if err != nil {
		t.Fatal(err)
	}
	if e.WaitingFor != explain.WaitingForScheduler {
		t.Errorf("waiting for %q (%s), want the scheduler", e.WaitingFor, e.State.String())
	}
}
