package populators

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
)

// writes are the write actions a fake clientset saw, "verb resource ns/name [patch type]".
func writes(cs *fake.Clientset) []string {
	var out []string
	for _, a := range cs.Actions() {
		switch a := a.(type) {
		case clienttesting.CreateAction:
			o := a.GetObject().(interface{ GetName() string })
			out = append(out, fmt.Sprintf("create %s %s/%s", a.GetResource().Resource, a.GetNamespace(), o.GetName()))
		case clienttesting.PatchAction:
			out = append(out, fmt.Sprintf("patch %s %s/%s %s", a.GetResource().Resource, a.GetNamespace(), a.GetName(), a.GetPatchType()))
		case clienttesting.DeleteAction:
			out = append(out, fmt.Sprintf("delete %s %s/%s", a.GetResource().Resource, a.GetNamespace(), a.GetName()))
		case clienttesting.UpdateAction:
			o := a.GetObject().(interface{ GetName() string })
			out = append(out, fmt.Sprintf("update %s %s/%s", a.GetResource().Resource, a.GetNamespace(), o.GetName()))
		}
	}
	cs.ClearActions()
	return out
}

func patchOf(cs *fake.Clientset, resource string) []byte {
	for _, a := range cs.Actions() {
		if p, ok := a.(clienttesting.PatchAction); ok && p.GetResource().Resource == resource {
			return p.GetPatch()
		}
	}
	return nil
}

// TestVolumePopulatorSteps drives the lib-volume-populator stand-in through a WaitForFirstConsumer
// hand-off against a fake clientset and checks syncPvc's writes, in order, with their patch
// types.
func TestVolumePopulatorSteps(t *testing.T) {
	ctx := context.Background()
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	class := "wffc"
	target := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "data", UID: "11111111-2222-3333-4444-555555555555", ResourceVersion: "7",
			Annotations: map[string]string{annSelectedNode: "node-a"}, Finalizers: []string{"kubernetes.io/pvc-protection"}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: &class,
			Resources:     corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")}},
			DataSourceRef: &corev1.TypedObjectReference{APIGroup: new(string), Kind: "Hello", Name: "hello"},
		},
	}
	*target.Spec.DataSourceRef.APIGroup = "hello.example.com"
	cs := fake.NewSimpleClientset(target, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: class}, VolumeBindingMode: &wffc})
	hello := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "hello.example.com/v1alpha1", "kind": "Hello",
		"metadata": map[string]any{"namespace": "app", "name": "hello"}, "spec": map[string]any{"fileName": "f", "fileContents": "c"}}}
	cfg := HelloPopulator()
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{cfg.GVR: "HelloList"}, hello)
	p := &VolumePopulator{VolumePopulatorConfig: cfg, Conn: &Conn{Kube: cs, Dynamic: dyn}, recorder: record.NewFakeRecorder(100),
		populated: cfg.Prefix + "/" + populatedFromAnnoSuffix, finalizer: cfg.Prefix + "/" + pvcFinalizerSuffix,
		done: map[types.UID]string{}, events: map[string]bool{}}
	get := func() *corev1.PersistentVolumeClaim {
		c, err := cs.CoreV1().PersistentVolumeClaims("app").Get(ctx, "data", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	primeName, podName := "prime-"+string(target.UID), "populate-"+string(target.UID)
	step := func(want ...string) {
		t.Helper()
		if err := p.sync(ctx, get()); err != nil {
			t.Fatal(err)
		}
		if got := writes(cs); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("writes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	cs.ClearActions()
	step("create persistentvolumeclaims hello/"+primeName, "patch persistentvolumeclaims app/data application/json-patch+json",
		"create pods hello/"+podName)
	prime, _ := cs.CoreV1().PersistentVolumeClaims("hello").Get(ctx, primeName, metav1.GetOptions{})
	if prime.Annotations[annSelectedNode] != "node-a" || *prime.Spec.StorageClassName != class {
		t.Errorf("prime claim %+v: want selected-node node-a and the target's class", prime.ObjectMeta)
	}
	pod, _ := cs.CoreV1().Pods("hello").Get(ctx, podName, metav1.GetOptions{})
	if pod.Spec.NodeName != "node-a" || pod.Spec.Volumes[0].PersistentVolumeClaim.ClaimName != primeName {
		t.Errorf("populator pod: node %q claim %q", pod.Spec.NodeName, pod.Spec.Volumes[0].PersistentVolumeClaim.ClaimName)
	}
	if f := get().Finalizers; len(f) != 2 || f[1] != p.FinalizerName() {
		t.Errorf("target finalizers %v", f)
	}
	step() // the pod has not run
	// The provisioner binds the prime claim; the pod runs.
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv1"}, Spec: corev1.PersistentVolumeSpec{
		ClaimRef: &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: "hello", Name: primeName, UID: "prime-uid"}}}
	if _, err := cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	prime.Spec.VolumeName = "pv1"
	prime.Status.Phase = corev1.ClaimBound
	_, _ = cs.CoreV1().PersistentVolumeClaims("hello").Update(ctx, prime, metav1.UpdateOptions{})
	pod.Status.Phase = corev1.PodSucceeded
	_, _ = cs.CoreV1().Pods("hello").Update(ctx, pod, metav1.UpdateOptions{})
	cs.ClearActions()
	if err := p.sync(ctx, get()); err != nil {
		t.Fatal(err)
	}
	var patch corev1.PersistentVolume
	if err := json.Unmarshal(patchOf(cs, "persistentvolumes"), &patch); err != nil {
		t.Fatal(err)
	}
	if got := writes(cs); len(got) != 1 || got[0] != "patch persistentvolumes /pv1 application/strategic-merge-patch+json" {
		t.Fatalf("hand-off writes %v, want one strategic merge patch of the volume", got)
	}
	ref := patch.Spec.ClaimRef
	if ref.Namespace != "app" || ref.Name != "data" || ref.UID != target.UID || ref.ResourceVersion == "" || ref.Kind != "" ||
		patch.Annotations[p.PopulatedFromAnnotation()] != "app/hello" {
		t.Errorf("hand-off patch %+v %v", ref, patch.Annotations)
	}
	step() // waiting for the binder: the prime claim is not Lost yet
	// The binder binds the target and marks the prime claim Lost.
	tgt := get()
	tgt.Spec.VolumeName = "pv1"
	_, _ = cs.CoreV1().PersistentVolumeClaims("app").Update(ctx, tgt, metav1.UpdateOptions{})
	prime.Status.Phase = corev1.ClaimLost
	_, _ = cs.CoreV1().PersistentVolumeClaims("hello").Update(ctx, prime, metav1.UpdateOptions{})
	cs.ClearActions()
	step("delete pods hello/"+podName, "delete persistentvolumeclaims hello/"+primeName, "patch persistentvolumeclaims app/data application/json-patch+json")
	if f := get().Finalizers; len(f) != 1 {
		t.Errorf("target finalizers %v after the hand-off, want the populator's removed", f)
	}
}

// TestVeleroRebindVolumePatches runs the Velero stand-in's RebindVolume against a fake clientset
// and checks its writes, in order, and the merge patches of the hand-off: the target claim given
// the volume, the volume's claimRef pointed at the target by name (uid, resourceVersion, kind and
// apiVersion nulled) with the selector's label, the reclaim policy Retain and back.
func TestVeleroRebindVolumePatches(t *testing.T) {
	ctx := context.Background()
	sel := map[string]string{DynamicPVRestoreLabel: "app.data.abcde"}
	target := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "data", UID: "target-uid"},
		Spec: corev1.PersistentVolumeClaimSpec{Selector: &metav1.LabelSelector{MatchLabels: sel}}}
	restore := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: "dd"},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv1"}}
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv1", Annotations: map[string]string{annBoundByController: "yes"}},
		Spec: corev1.PersistentVolumeSpec{PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			ClaimRef: &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: "velero", Name: "dd", UID: "restore-uid", ResourceVersion: "5"}},
		Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: "dd"}}
	cs := fake.NewSimpleClientset(target, restore, pv, pod)
	// The PV binder: once the volume names the target, it is Bound to it.
	cs.PrependReactor("patch", "persistentvolumes", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if !strings.Contains(string(a.(clienttesting.PatchAction).GetPatch()), `"claimRef"`) {
			return false, nil, nil
		}
		obj, err := cs.Tracker().Get(a.GetResource(), "", "pv1")
		if err != nil {
			return true, nil, err
		}
		cur := obj.(*corev1.PersistentVolume)
		cur.Spec.ClaimRef = &corev1.ObjectReference{Namespace: "app", Name: "data", UID: "target-uid"}
		cur.Status.Phase = corev1.VolumeBound
		return true, cur, cs.Tracker().Update(a.GetResource(), cur, "")
	})
	v := &Velero{Conn: &Conn{Kube: cs}}
	owner := corev1.ObjectReference{Namespace: "velero", Name: "dd"}
	if err := v.RebindVolume(ctx, owner, "data", "app", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	var patches []string
	for _, a := range cs.Actions() {
		if p, ok := a.(clienttesting.PatchAction); ok {
			if p.GetPatchType() != types.MergePatchType {
				t.Errorf("%s %s patched with %s, want a JSON merge patch", p.GetResource().Resource, p.GetName(), p.GetPatchType())
			}
			patches = append(patches, p.GetResource().Resource+" "+string(p.GetPatch()))
		}
	}
	want := []string{
		`persistentvolumes {"spec":{"persistentVolumeReclaimPolicy":"Retain"}}`,
		`persistentvolumeclaims {"spec":{"volumeName":"pv1"}}`,
		`persistentvolumes {"metadata":{"annotations":null,"labels":{"velero.io/dynamic-pv-restore":"app.data.abcde"}},"spec":{"claimRef":{"apiVersion":null,"kind":null,"name":"data","namespace":"app","resourceVersion":null,"uid":null}}}`,
		`persistentvolumes {"spec":{"persistentVolumeReclaimPolicy":"Delete"}}`,
	}
	if strings.Join(patches, "\n") != strings.Join(want, "\n") {
		t.Errorf("patches:\n%s\nwant:\n%s", strings.Join(patches, "\n"), strings.Join(want, "\n"))
	}
}
