package e2ecluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/pvguard/pvguard/test/harness"
	"github.com/pvguard/pvguard/test/populators"
)

// What the hand-off flows (populators, CDI, Velero) share: the source kinds' CRDs, the kubelet
// stand-in, the data the worker pods write, and the checks on a stand-in's connection.

// handOffCRDs are the custom resources the flows' claims name as data sources or owners:
// hello-populator's Hello (example/hello-populator/crd.yaml), CDI's VolumeImportSource and
// VolumeCloneSource, Velero's DataDownload (the restore pod's and claim's owner). Only their
// names matter here; their schemas keep any field.
var handOffCRDs = []schema.GroupVersionResource{
	{Group: "hello.example.com", Version: "v1alpha1", Resource: "hellos"},
	populators.VolumeImportSources,
	populators.VolumeCloneSources,
	{Group: "velero.io", Version: "v2alpha1", Resource: "datadownloads"},
}

var crdOnce sync.Once
var crdErr error

func installHandOffCRDs(t *testing.T) {
	t.Helper()
	crdOnce.Do(func() {
		keep := true
		var crds []*apiextensionsv1.CustomResourceDefinition
		for _, r := range handOffCRDs {
			singular := strings.TrimSuffix(r.Resource, "s")
			kind := map[string]string{"hello": "Hello", "volumeimportsource": "VolumeImportSource", "volumeclonesource": "VolumeCloneSource", "datadownload": "DataDownload"}[singular]
			crds = append(crds, &apiextensionsv1.CustomResourceDefinition{
				ObjectMeta: metav1.ObjectMeta{Name: r.Resource + "." + r.Group},
				Spec: apiextensionsv1.CustomResourceDefinitionSpec{
					Group: r.Group, Scope: apiextensionsv1.NamespaceScoped,
					Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: r.Resource, Singular: singular, Kind: kind, ListKind: kind + "List"},
					Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: r.Version, Served: true, Storage: true,
						Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
							Type: "object", XPreserveUnknownFields: &keep}}}},
				},
			})
		}
		_, crdErr = envtest.InstallCRDs(cl.Admin, envtest.CRDInstallOptions{CRDs: crds})
	})
	if crdErr != nil {
		t.Fatalf("installing the hand-off flows' CRDs: %v", crdErr)
	}
}

// createCR creates a namespaced custom resource with the given spec.
func createCR(t *testing.T, gvr schema.GroupVersionResource, kind, ns, name string, spec map[string]any) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetAPIVersion(gvr.GroupVersion().String())
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	if err := cl.Client.Create(context.Background(), u); err != nil {
		t.Fatalf("creating %s %s/%s: %v", kind, ns, name, err)
	}
	return u
}

// dataSourceRef is a claim's reference to a populator's source.
func dataSourceRef(group, kind, name string) *corev1.TypedObjectReference {
	return &corev1.TypedObjectReference{APIGroup: &group, Kind: kind, Name: name}
}

// startKubelet runs the kubelet stand-in for the namespaces until the test ends, and fails the
// test if one of its passes failed.
func startKubelet(t *testing.T, k *populators.Kubelet) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	k.Client = cl.Clientset
	k.Start(ctx)
	t.Cleanup(func() {
		stop()
		if errs := k.Errors(); len(errs) > 0 {
			t.Errorf("the kubelet stand-in failed:\n%s", strings.Join(errs, "\n"))
		}
	})
}

// standInContext is a context that ends when the test does.
func standInContext(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return ctx
}

// volumeDir is the backend directory of a claim's volume, once it has one.
func volumeDir(ctx context.Context, ns, claimName string) (string, error) {
	pvc := &corev1.PersistentVolumeClaim{}
	if err := cl.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: claimName}, pvc); err != nil {
		return "", err
	}
	if pvc.Spec.VolumeName == "" {
		return "", fmt.Errorf("claim %s/%s has no volume", ns, claimName)
	}
	pv := &corev1.PersistentVolume{}
	if err := cl.Client.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, pv); err != nil {
		return "", err
	}
	if pv.Spec.CSI == nil {
		return "", fmt.Errorf("volume %s is not the CSI plugin's", pv.Name)
	}
	return cl.CSI.Plugin.Dir(pv.Spec.CSI.VolumeHandle), nil
}

// podClaim is the claim a worker pod mounts.
func podClaim(p *corev1.Pod) string {
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			return v.PersistentVolumeClaim.ClaimName
		}
	}
	return ""
}

// writeData writes the file a worker pod leaves on its claim's volume.
func writeData(ctx context.Context, ns, claimName, file, content string) error {
	dir, err := volumeDir(ctx, ns, claimName)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, file), []byte(content), 0o600)
}

// checkData checks that a claim's volume holds the file a worker pod wrote for it.
func checkData(t *testing.T, ns, claimName, file, want string) bool {
	t.Helper()
	dir, err := volumeDir(context.Background(), ns, claimName)
	if err != nil {
		t.Error(err)
		return false
	}
	got, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil || string(got) != want {
		t.Errorf("claim %s/%s: its volume holds %s = %q (%v), want %q: not the populated volume", ns, claimName, file, got, err, want)
		return false
	}
	return true
}

// checkStandIn fails when the apiserver sent a stand-in a warning or refused it a write.
func checkStandIn(t *testing.T, name string, c *populators.Conn) {
	t.Helper()
	if w := c.Warnings(); len(w) > 0 {
		t.Errorf("%s (%s) was sent warnings:\n%s", name, c.ServiceAccount, strings.Join(w, "\n"))
	}
	if d := c.Denials(); len(d) > 0 {
		t.Errorf("%s (%s) was refused writes:\n%s", name, c.ServiceAccount, strings.Join(d, "\n"))
	}
	if errs := c.Errors(); len(errs) > 0 {
		t.Logf("%s's failed steps (retried as upstream retries them):\n%s", name, strings.Join(errs, "\n"))
	}
}

// extraNamespace creates a second namespace for a flow, deleted (and waited for) when the test
// ends.
func extraNamespace(t *testing.T, name string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: harness.PrefixedNamespace(t, cl.Client, name)}}
	t.Cleanup(func() {
		if t.Failed() && os.Getenv("PVGUARD_CLUSTER_KEEP_OBJECTS") != "" {
			return
		}
		if err := cl.Client.Delete(context.Background(), ns); err != nil {
			t.Errorf("deleting namespace %s: %v", ns.Name, err)
			return
		}
		harness.WaitFor(t, time.Minute, "namespace "+ns.Name+" deleted", func(ctx context.Context) (bool, error) {
			err := cl.Client.Get(ctx, client.ObjectKeyFromObject(ns), ns)
			return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
		})
	})
	return ns.Name
}

// claimsGone waits until none of the named claims exists.
func claimsGone(ctx context.Context, keys ...client.ObjectKey) (bool, error) {
	for _, k := range keys {
		err := cl.Client.Get(ctx, k, &corev1.PersistentVolumeClaim{})
		if err == nil {
			return false, fmt.Errorf("claim %s still exists", k)
		}
		if !apierrors.IsNotFound(err) {
			return false, err
		}
	}
	return true, nil
}

// refusedStandIn fails the test at once when the apiserver refused a stand-in a write: the flow
// cannot complete, and the denial is what to report.
func refusedStandIn(t *testing.T, name string, c *populators.Conn) {
	t.Helper()
	if d := c.Denials(); len(d) > 0 {
		t.Fatalf("%s (%s) was refused writes (it retries them as upstream does, in vain):\n%s\nwarnings sent to it: %q",
			name, c.ServiceAccount, strings.Join(d, "\n"), c.Warnings())
	}
}

// dropFinalizerOnFailure removes a finalizer from the claims of a namespace when the test
// failed, as an administrator would for a component that stopped half-way, so that the flow's
// namespace can go. Register it after the flow and before starting the component: cleanups run
// last first.
func dropFinalizerOnFailure(t *testing.T, ns, finalizer string) {
	t.Cleanup(func() {
		if !t.Failed() || os.Getenv("PVGUARD_CLUSTER_KEEP_OBJECTS") != "" {
			return
		}
		ctx := context.Background()
		var claims corev1.PersistentVolumeClaimList
		if err := cl.Client.List(ctx, &claims, client.InNamespace(ns)); err != nil {
			t.Error(err)
			return
		}
		for i := range claims.Items {
			c := &claims.Items[i]
			if i := slices.Index(c.Finalizers, finalizer); i >= 0 {
				c.Finalizers = slices.Delete(c.Finalizers, i, i+1)
				if err := cl.Client.Update(ctx, c); err != nil {
					t.Logf("removing %s from claim %s/%s: %v", finalizer, ns, c.Name, err)
				}
			}
		}
	})
}

// clearOnFailure deletes the pods and claims a stand-in left in its own namespace when the test
// failed half-way, so that their volumes are released and deleted (the flow's provisioned
// volumes are checked for leaks by the next flows). Register it before starting the component.
func clearOnFailure(t *testing.T, ns string) {
	t.Cleanup(func() {
		if !t.Failed() || os.Getenv("PVGUARD_CLUSTER_KEEP_OBJECTS") != "" {
			return
		}
		ctx := context.Background()
		deletePods(t, podsIn(t, ns)...)
		if err := cl.Client.DeleteAllOf(ctx, &corev1.PersistentVolumeClaim{}, client.InNamespace(ns)); err != nil {
			t.Errorf("deleting the claims of %s: %v", ns, err)
		}
	})
}

// binderRefused fails the test at once when pvguard's binder recorded that its policy forbade a
// bind (event PolicyForbidsBinding) on a claim of the namespaces: in these flows every bind is
// the one upstream's binder makes, and the claim would wait for ever.
func binderRefused(t *testing.T, namespaces ...string) {
	t.Helper()
	for _, ns := range namespaces {
		var list corev1.EventList
		if err := cl.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for _, e := range list.Items {
			if e.Reason == "PolicyForbidsBinding" {
				t.Fatalf("pvguard's binder refused a bind of claim %s/%s: %s", ns, e.InvolvedObject.Name, e.Message)
			}
		}
	}
}
