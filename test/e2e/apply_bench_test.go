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

	"github.com/pvguard/pvguard/test/controlplane"
	"github.com/pvguard/pvguard/test/testobj"
)

// BenchmarkApplyOverhead measures what pvguard adds to a PVC create through kube-apiserver: the
// same create, alternately in a tenant namespace (the mutating and validating webhooks are
// called) and in pvguard's own namespace (the chart's namespaceSelector excludes it, so no
// webhook is called), on the same apiserver and connection. It reports both medians, the p99s
// and the difference of the medians.
//
//	go test -run '^$' -bench ApplyOverhead -benchtime 500x ./test/e2e/
func BenchmarkApplyOverhead(b *testing.B) {
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
	own := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: controlplane.ChartNamespace}}
	if err := c.Create(ctx, own); err != nil && !apierrors.IsAlreadyExists(err) {
		b.Fatal(err)
	}
	create := func(ns string, i int) time.Duration {
		pvc := freshPVC(testobj.PVC(ns, fmt.Sprintf("bench-%d-%d", b.N, i)))
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

	// Leave no claims behind for the tests that may follow in the same run.
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
