package clusterview_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache/informertest"

	"github.com/pvguard/pvguard/internal/clusterview"
)

func TestCountCachedObjects(t *testing.T) {
	ctx := context.Background()
	s := runtime.NewScheme()
	if err := storagev1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	s.AddKnownTypes(corev1.SchemeGroupVersion, &corev1.PersistentVolume{}, &corev1.PersistentVolumeClaim{}, &corev1.Pod{})
	// The real cache keeps Nodes as metadata; the fake finds their informer through the scheme.
	s.AddKnownTypeWithName(corev1.SchemeGroupVersion.WithKind("Node"), &metav1.PartialObjectMetadata{})
	informers := &informertest.FakeInformers{Scheme: s}
	reg := prometheus.NewRegistry()
	if err := clusterview.CountCachedObjects(ctx, informers, reg); err != nil {
		t.Fatal(err)
	}
	pvs, err := informers.FakeInformerFor(ctx, &corev1.PersistentVolume{})
	if err != nil {
		t.Fatal(err)
	}
	claims, err := informers.FakeInformerFor(ctx, &corev1.PersistentVolumeClaim{})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b", "c"} {
		pvs.Add(&corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}})
	}
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "a"}}
	pvs.Update(pv, pv) // an update is no new object
	pvs.Delete(pv)
	claims.Add(&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "n", Name: "c"}})
	pods, err := informers.FakeInformerFor(ctx, &corev1.Pod{})
	if err != nil {
		t.Fatal(err)
	}
	pods.Add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "n", Name: "p"}})

	for kind, want := range map[string]float64{"PersistentVolume": 2, "PersistentVolumeClaim": 1, "StorageClass": 0, "Pod": 1} {
		if got := testutil.ToFloat64(gaugeFor(t, reg, kind)); got != want {
			t.Errorf("pvguard_cache_objects{kind=%q} = %v, want %v", kind, got, want)
		}
	}
}

// gaugeFor returns a collector yielding only the pvguard_cache_objects sample of a kind.
func gaugeFor(t *testing.T, reg *prometheus.Registry, kind string) prometheus.Collector {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "pvguard_cache_objects" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "kind" && l.GetValue() == kind {
					g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "x"})
					g.Set(m.GetGauge().GetValue())
					return g
				}
			}
		}
	}
	t.Fatalf("no pvguard_cache_objects sample for kind %s", kind)
	return nil
}
