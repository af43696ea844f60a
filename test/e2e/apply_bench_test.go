package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/internal/devcluster"
	"github.com/pvguard/pvguard/test/harness"
	"github.com/pvguard/pvguard/test/testobj"
)

// BenchmarkApplyOverhead measures what pvguard adds to a PVC create through kube-apiserver: the
// same create, alternately in a tenant namespace (pvguard's webhooks are called) and in
// pvguard's own namespace (the chart's namespaceSelector excludes it, so no webhook is called),
// on the same apiserver and connection. It reports both medians, the p99s and the difference of
// the medians, for two claims:
//
//   - dynamic: a claim that names no volume, as nearly all are; only the validating webhook is
//     called (the chart's matchCondition keeps it from the mutating one);
//
//   - prebound: a claim naming a volume pre-bound to it; the mutating and the validating webhook
//     are called, and every at-bind rule judges the pair.
//
//     go test -run '^$' -bench ApplyOverhead -benchtime 500x ./test/e2e/
func BenchmarkApplyOverhead(b *testing.B) {
	b.Run("dynamic", func(b *testing.B) { benchmarkApplyOverhead(b, false) })
	b.Run("prebound", func(b *testing.B) { benchmarkApplyOverhead(b, true) })
}

func benchmarkApplyOverhead(b *testing.B, prebound bool) {
	ctx := context.Background()
	cfg := rest.CopyConfig(suite.cfg)
	cfg.QPS, cfg.Burst = 1000, 2000
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		b.Fatal(err)
	}
	tenant := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "bench-"}}
	if err := c.Create(ctx, tenant); err != nil {
		b.Fatal(err)
	}
	own := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: devcluster.ChartNamespace}}
	if err := c.Create(ctx, own); err != nil && !apierrors.IsAlreadyExists(err) {
		b.Fatal(err)
	}
	claimName := func(i int) string { return fmt.Sprintf("bench-%d-%d", b.N, i) }
	volumeName := func(ns string, i int) string { return ns + "-" + claimName(i) }
	var volumes []string
	if prebound {
		// One volume per tenant claim, pre-bound to it, created before the clock starts; the
		// claims in pvguard's own namespace name volumes that do not exist, which the apiserver
		// does not check.
		for i := range b.N {
			pv := harness.FreshPV(testobj.PV(volumeName(tenant.Name, i), testobj.ClaimRef(tenant.Name, claimName(i), "")))
			if err := c.Create(ctx, pv); err != nil {
				b.Fatalf("creating volume %s: %v", pv.Name, err)
			}
			volumes = append(volumes, pv.Name)
		}
		time.Sleep(2 * time.Second) // let pvguard's informer see them, as it would in a cluster
	}
	create := func(ns string, i int) time.Duration {
		var mods []testobj.PVCMod
		if prebound {
			mods = append(mods, testobj.VolumeName(volumeName(ns, i)))
		}
		pvc := harness.FreshPVC(testobj.PVC(ns, claimName(i), mods...))
		start := time.Now()
		if err := c.Create(ctx, pvc); err != nil {
			b.Fatalf("creating %s/%s: %v", ns, pvc.Name, err)
		}
		return time.Since(start)
	}
	var with, without []time.Duration
	b.ResetTimer()
	for i := range b.N {
		if i%2 == 0 {
			with = append(with, create(tenant.Name, i))
			without = append(without, create(own.Name, i))
		} else {
			without = append(without, create(own.Name, i))
			with = append(with, create(tenant.Name, i))
		}
	}
	b.StopTimer()
	pct := func(d []time.Duration, p float64) float64 {
		slices.Sort(d)
		return float64(d[int(p*float64(len(d)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(with, 0.5), "p50-ms-webhook")
	b.ReportMetric(pct(without, 0.5), "p50-ms-none")
	b.ReportMetric(pct(with, 0.5)-pct(without, 0.5), "p50-ms-added")
	b.ReportMetric(pct(with, 0.99), "p99-ms-webhook")
	b.ReportMetric(pct(without, 0.99), "p99-ms-none")

	// Leave no claims or volumes behind for the benchmarks and tests that may follow in the run.
	for _, name := range volumes {
		_ = c.Delete(ctx, &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}})
	}
	for _, ns := range []string{tenant.Name, own.Name} {
		var list corev1.PersistentVolumeClaimList
		if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
			b.Fatal(err)
		}
		for i := range list.Items {
			pvc := &list.Items[i]
			if len(pvc.Finalizers) > 0 {
				patch := client.MergeFrom(pvc.DeepCopy())
				pvc.Finalizers = nil
				_ = c.Patch(ctx, pvc, patch)
			}
			_ = c.Delete(ctx, pvc)
		}
	}
}
