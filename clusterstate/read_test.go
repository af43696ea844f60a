package clusterstate_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/pvguard/pvguard/clusterstate"
)

// TestRead: a state read from a client holds its claims, volumes and classes, and of its nodes
// the metadata (names and labels); a list that fails is an error naming what was listed.
func TestRead(t *testing.T) {
	objs := []client.Object{
		&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}},
		&corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-1"}, Spec: corev1.PersistentVolumeSpec{ClaimRef: &corev1.ObjectReference{Namespace: "ns", Name: "c"}}},
		&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "fast"}, Provisioner: "csi.example.com"},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"kubernetes.io/hostname": "n1"}},
			Spec: corev1.NodeSpec{PodCIDR: "10.0.0.0/24"}},
	}
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(objs...).Build()
	s, err := clusterstate.Read(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Claims()) != 1 || len(s.Volumes()) != 1 || len(s.Classes()) != 1 || len(s.Nodes()) != 1 {
		t.Fatalf("read %d claims, %d volumes, %d classes, %d nodes; want one each", len(s.Claims()), len(s.Volumes()), len(s.Classes()), len(s.Nodes()))
	}
	if n, _ := s.Node("n1"); n == nil || n.Labels["kubernetes.io/hostname"] != "n1" || n.Spec.PodCIDR != "" {
		t.Errorf("node n1 read as %+v, want its metadata only", n)
	}
	if pvs, _ := s.VolumesClaiming("ns", "c"); len(pvs) != 1 || pvs[0].Name != "pv-1" {
		t.Errorf("VolumesClaiming(ns, c) = %v", pvs)
	}

	failing := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithInterceptorFuncs(interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*storagev1.StorageClassList); ok {
				return errors.New("forbidden")
			}
			return c.List(ctx, list, opts...)
		},
	}).Build()
	if _, err := clusterstate.Read(context.Background(), failing); err == nil || !strings.Contains(err.Error(), "listing storage classes: forbidden") {
		t.Errorf("Read with classes forbidden: %v", err)
	}
}

// TestReadPods: pods are read page by page and stripped to what the rules read; a reader that may
// not list pods reads none, and any other failure is an error.
func TestReadPods(t *testing.T) {
	pod := func(name, node, claim string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{"app": "web"}},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "busybox"}},
				Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	}
	pages := 0
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(pod("web-0", "n1", "data-0"), pod("web-1", "n2", "data-1")).
		WithInterceptorFuncs(interceptor.Funcs{
			List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
				pages++
				return c.List(ctx, list, opts...)
			},
		}).Build()
	pods, err := clusterstate.ReadPods(context.Background(), c)
	if err != nil || len(pods) != 2 || pages == 0 {
		t.Fatalf("ReadPods = %d pods, %v after %d lists; want 2", len(pods), err, pages)
	}
	s := clusterstate.New(nil, nil, nil, nil).WithPods(pods)
	using, _ := s.PodsUsingClaim("ns", "data-1")
	if len(using) != 1 || using[0].Name != "web-1" || using[0].Spec.NodeName != "n2" || using[0].Status.Phase != corev1.PodRunning {
		t.Fatalf("PodsUsingClaim(ns, data-1) = %v, want web-1 on n2, Running", using)
	}
	if p := using[0]; len(p.Spec.Containers) != 0 || p.Labels != nil {
		t.Errorf("pod kept as %+v, want it stripped to its node, phase and claims", p)
	}

	forbidden := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithInterceptorFuncs(interceptor.Funcs{
		List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
			return apierrors.NewForbidden(corev1.Resource("pods"), "", errors.New("no"))
		},
	}).Build()
	if pods, err := clusterstate.ReadPods(context.Background(), forbidden); err != nil || pods != nil {
		t.Errorf("ReadPods forbidden = %v, %v; want none and no error", pods, err)
	}
	failing := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithInterceptorFuncs(interceptor.Funcs{
		List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
			return errors.New("timeout")
		},
	}).Build()
	if _, err := clusterstate.ReadPods(context.Background(), failing); err == nil || !strings.Contains(err.Error(), "listing pods: timeout") {
		t.Errorf("ReadPods failing: %v", err)
	}
}

// TestReadListsTheReadableKindsAsked: Read lists a kind of Readables only when asked for it (a
// rule set reads it), and a State answers ListKind only for the kinds it holds, which WithPods
// keeps; for any other kind it fails rather than answer that there are none.
func TestReadListsTheReadableKindsAsked(t *testing.T) {
	const vac = "VolumeAttributesClass"
	gold := &storagev1.VolumeAttributesClass{ObjectMeta: metav1.ObjectMeta{Name: "gold"}, DriverName: "csi.example.com"}
	c := fake.NewClientBuilder().WithObjects(gold).Build()
	asked, err := clusterstate.Read(context.Background(), c, clusterstate.KindPersistentVolume, vac)
	if err != nil {
		t.Fatal(err)
	}
	got, err := asked.WithPods(nil).ListKind(vac)
	if err != nil || len(got) != 1 || got[0].(*storagev1.VolumeAttributesClass).Name != "gold" {
		t.Errorf("ListKind(%s) of a state read with it: %v (%v), want gold", vac, got, err)
	}
	notAsked, err := clusterstate.Read(context.Background(), c, clusterstate.KindPersistentVolume)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := notAsked.ListKind(vac); err == nil || !strings.Contains(err.Error(), "the state was not read with it") {
		t.Errorf("ListKind(%s) of a state read without it: %v (%v), want an error", vac, got, err)
	}
	if got, err := asked.ListKind(clusterstate.KindStorageClass); err == nil || !strings.Contains(err.Error(), "not a kind rules may list") {
		t.Errorf("ListKind(StorageClass): %v (%v), want an error: the View's typed read serves it", got, err)
	}
}
