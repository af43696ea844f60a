package e2ecel

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/charts"
	"github.com/pvguard/pvguard/internal/devcluster"
)

// BenchmarkPVUpdateAdmissionPolicies measures what the chart's admission policies
// (admissionPolicies.enabled, the default) add to a volume update on a real kube-apiserver:
// updates of a label of a Bound volume (so that PVG002's, PVG011's and PVG012's expressions are
// evaluated in full: the requester is no exempt controller, the volume is in use), one at a
// time, through the volume and through its status subresource (a status message and a label),
// without the policies (the anchor) and with them, alternately twice, on one apiserver with no
// webhook, the policies reading the chart's parameter object. It reports the mean (ns/op) and the
// median and 99th percentile of each update.
//
//	go test ./test/e2ecel/ -run '^$' -bench AdmissionPolicies -benchtime 300x -count 1
func BenchmarkPVUpdateAdmissionPolicies(b *testing.B) {
	ctx := context.Background()
	assets, err := devcluster.AssetsDir()
	if err != nil {
		b.Fatal(err)
	}
	cp, err := devcluster.StartWith(assets, devcluster.Options{LogDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cp.Stop() })
	admin := kubernetes.NewForConfigOrDie(cp.Config)
	c, err := client.New(cp.Config, client.Options{})
	if err != nil {
		b.Fatal(err)
	}
	var policies []*unstructured.Unstructured
	manifests, err := charts.Render(devcluster.ChartRelease, devcluster.ChartNamespace, nil)
	if err != nil {
		b.Fatal(err)
	}
	var params []*unstructured.Unstructured
	for _, m := range manifests {
		if k := m.Object.GetKind(); k == "ValidatingAdmissionPolicy" || k == "ValidatingAdmissionPolicyBinding" {
			policies = append(policies, m.Object)
		}
		if _, ok, _ := unstructured.NestedString(m.Object.Object, "data", "policy.yaml"); m.Object.GetKind() == "ConfigMap" && !ok {
			params = append(params, m.Object)
		}
	}
	if len(policies) == 0 || len(params) != 1 {
		b.Fatalf("the chart rendered %d admission policies and %d parameter objects", len(policies), len(params))
	}
	// The policies' parameters, as the chart installs them.
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: devcluster.ChartNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		b.Fatal(err)
	}
	if err := c.Create(ctx, params[0]); err != nil {
		b.Fatal(err)
	}

	// A Bound volume, linked to its claim with its uid.
	ns := "bench"
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	pv, err := admin.CoreV1().PersistentVolumes().Create(ctx, &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "bench-1", Labels: map[string]string{"n": "0"}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/bench-1"}},
			ClaimRef: &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: ns, Name: "data",
				UID: "4a1e6a57-3c1f-4f8e-9a55-0d2c54c1b7e1"},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	pv.Status.Phase = corev1.VolumeBound
	if pv, err = admin.CoreV1().PersistentVolumes().UpdateStatus(ctx, pv, metav1.UpdateOptions{}); err != nil {
		b.Fatal(err)
	}
	// refused reports whether PVG002's policy refuses clearing the volume's claimRef (dry run).
	refused := func(ctx context.Context) (bool, error) {
		v := pv.DeepCopy()
		v.ResourceVersion, v.Spec.ClaimRef = "", nil
		_, err := admin.CoreV1().PersistentVolumes().Update(ctx, v, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil && !strings.Contains(err.Error(), "[PVG002 ") {
			return false, err
		}
		return err != nil, nil
	}
	setPolicies := func(b *testing.B, on bool) {
		b.Helper()
		for _, p := range policies {
			var err error
			if on {
				err = c.Create(ctx, p.DeepCopy())
				if apierrors.IsAlreadyExists(err) {
					err = nil
				}
			} else {
				err = client.IgnoreNotFound(c.Delete(ctx, p.DeepCopy()))
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			r, err := refused(ctx)
			return err == nil && r == on, nil
		}); err != nil {
			b.Fatalf("the policies never took effect (on=%v): %v", on, err)
		}
	}

	n := 0
	for _, on := range []bool{false, true, false, true} {
		name := "without-policies"
		if on {
			name = "with-policies"
		}
		// The policies match the status subresource too: a status write that changes the
		// status message and a label (the status strategy keeps metadata) is judged in full.
		for _, status := range []bool{false, true} {
			sub := name
			if status {
				sub += "/status"
			}
			b.Run(sub, func(b *testing.B) {
				setPolicies(b, on)
				lat := make([]time.Duration, 0, b.N)
				b.ResetTimer()
				for range b.N {
					n++
					pv.Labels["n"] = fmt.Sprint(n)
					start := time.Now()
					if status {
						pv.Status.Message = fmt.Sprint("update ", n)
						pv, err = admin.CoreV1().PersistentVolumes().UpdateStatus(ctx, pv, metav1.UpdateOptions{})
					} else {
						pv, err = admin.CoreV1().PersistentVolumes().Update(ctx, pv, metav1.UpdateOptions{})
					}
					if err != nil {
						b.Fatal(err)
					}
					lat = append(lat, time.Since(start))
				}
				b.StopTimer()
				slices.Sort(lat)
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(lat[min(len(lat)-1, len(lat)*99/100)].Microseconds())/1000, "p99-ms")
			})
		}
	}
}
