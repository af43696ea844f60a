// Command cachecuts measures what each cut of the cache's transform saves on a cluster's own
// volumes and claims: it lists them (at most -n of each) and reports the Go heap they hold, and
// their JSON size, whole, without managedFields, without the last-applied annotation too, and
// stripped to the cache's shape (storage.CacheShape.Strip, explain.CacheShape), and with equal maps
// shared between objects too (storage.Interner), as pvguard caches them. Point it at the
// apiserver hack/bench/scale fills (-keep keeps its kubeconfig).
//
//	go run ./hack/bench/cachecuts -kubeconfig /tmp/pvguard-scale-*/n100000/kubeconfig
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/pvguard/pvguard/explain"
	"github.com/pvguard/pvguard/storage"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the apiserver to read")
	n := flag.Int64("n", 5000, "volumes and claims to read, of each")
	flag.Parse()
	if err := run(*kubeconfig, *n); err != nil {
		fmt.Fprintln(os.Stderr, "cachecuts:", err)
		os.Exit(1)
	}
}

// heldBy decodes the listed JSON afresh, applies cut to every object, and reports the Go heap
// the objects then hold, per object, and their JSON size.
func heldBy(raw [][]byte, cut func(any)) (heap, size float64, err error) {
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	objs := make([]any, 0, len(raw))
	for _, b := range raw {
		var probe struct{ Kind string }
		if err := json.Unmarshal(b, &probe); err != nil {
			return 0, 0, err
		}
		var o any
		if probe.Kind == "PersistentVolume" {
			o = &corev1.PersistentVolume{}
		} else {
			o = &corev1.PersistentVolumeClaim{}
		}
		if err := json.Unmarshal(b, o); err != nil {
			return 0, 0, err
		}
		cut(o)
		objs = append(objs, o)
	}
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	var total int
	for _, o := range objs {
		b, err := json.Marshal(o)
		if err != nil {
			return 0, 0, err
		}
		total += len(b)
	}
	runtime.KeepAlive(objs)
	k := float64(len(objs))
	return float64(after.HeapAlloc-before.HeapAlloc) / k, float64(total) / k, nil
}

func run(kubeconfig string, n int64) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx := context.Background()
	pvs, err := cs.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{Limit: n})
	if err != nil {
		return err
	}
	pvcs, err := cs.CoreV1().PersistentVolumeClaims("").List(ctx, metav1.ListOptions{Limit: n})
	if err != nil {
		return err
	}
	var raw [][]byte
	for i := range pvs.Items {
		pvs.Items[i].Kind = "PersistentVolume"
		b, _ := json.Marshal(&pvs.Items[i])
		raw = append(raw, b)
	}
	for i := range pvcs.Items {
		pvcs.Items[i].Kind = "PersistentVolumeClaim"
		b, _ := json.Marshal(&pvcs.Items[i])
		raw = append(raw, b)
	}
	shape := explain.CacheShape()
	shared := shape.Transform(storage.NewInterner(4096))
	noManaged := func(o any) { o.(metav1.Object).SetManagedFields(nil) }
	noLastApplied := func(o any) {
		noManaged(o)
		m := o.(metav1.Object)
		a := m.GetAnnotations()
		delete(a, storage.AnnLastApplied)
		m.SetAnnotations(a)
	}
	fmt.Printf("%d volumes and %d claims\n\n| cut | heap per object | JSON per object |\n|---|---|---|\n", len(pvs.Items), len(pvcs.Items))
	for _, c := range []struct {
		name string
		cut  func(any)
	}{
		{"whole", func(any) {}},
		{"without managedFields (before this cache shape)", noManaged},
		{"and without the last-applied annotation", noLastApplied},
		{"stripped to the cache's shape (also unread status fields)", func(o any) { _, _ = shape.Strip(o) }},
		{"and equal labels, annotations and resource lists shared (storage.Interner): pvguard's cache", func(o any) { _, _ = shared(o) }},
	} {
		heap, size, err := heldBy(raw, c.cut)
		if err != nil {
			return err
		}
		fmt.Printf("| %s | %.0f B | %.0f B |\n", c.name, heap, size)
	}
	return nil
}
