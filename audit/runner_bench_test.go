package audit_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/audit"
	"github.com/pvguard/pvguard/clusterstate"
	"github.com/pvguard/pvguard/internal/clusterview"
	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/test/gen"
)

// BenchmarkRunnerFullAudit times the server's full audit (Runner.RunOnce) of a generated cluster
// held in informer stores, as `pvguard serve` reads its cache, and reports the heap the runner
// keeps between audits (retained-B: the live heap after the audits and a collection, less the
// live heap before the runner was made). AUDIT_BENCH_OBJECTS sets the size (default 20,000).
//
//	go test ./audit/ -run '^$' -bench RunnerFullAudit -benchtime 5x -memprofile mem.out -memprofilerate 1
func BenchmarkRunnerFullAudit(b *testing.B) {
	n := 20000
	if s := os.Getenv("AUDIT_BENCH_OBJECTS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			b.Fatalf("AUDIT_BENCH_OBJECTS: %v", err)
		}
	}
	st := gen.Inventory(n)
	c := storeCacheOf(st)
	// The state's lookups the live reads make build its indexes: built now, they are not counted.
	_, _ = st.PersistentVolume("")
	_, _ = st.PersistentVolumeClaim("", "")
	_, _ = st.Node("")
	before := liveHeap()
	r := audit.NewRunner(audit.RunnerOptions{Cache: c, Live: clusterview.New(c, stateReader{st}).LiveView,
		Engine: func() *policy.Engine { return policy.NewEngine(nil) }, Log: logr.Discard(), Now: func() time.Time { return gen.InventoryNow }})
	ctx := context.Background()
	b.ReportAllocs()
	cpu := cpuTime(b)
	for b.Loop() {
		if err := r.RunOnce(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	// The process's CPU time (every thread, the collector's included) moves less with what else
	// runs on the machine than the wall time does.
	b.ReportMetric(float64(cpuTime(b)-cpu)/float64(b.N), "cpu-ns/op")
	if found, _, _ := r.LatestFindings(); len(found) != gen.InventoryFindings(n) {
		b.Fatalf("%d findings, want %d", len(found), gen.InventoryFindings(n))
	}
	retained := liveHeap() - before
	if path := os.Getenv("AUDIT_BENCH_HEAP_PROFILE"); path != "" {
		writeHeapProfile(b, path)
	}
	runtime.KeepAlive(r)
	runtime.KeepAlive(c)
	runtime.KeepAlive(st)
	b.ReportMetric(float64(retained), "retained-B")
	b.ReportMetric(float64(retained)/float64(n), "retained-B/object")
}

// writeHeapProfile writes the heap profile (inuse_space is what is live now, the runner's results
// among it) while the runner is alive: -memprofile is written after the benchmark, when it is not.
func writeHeapProfile(b *testing.B, path string) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.WriteHeapProfile(f); err != nil {
		b.Fatal(err)
	}
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// liveHeap is the heap in use after a full collection.
func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// storeCache is an informer cache whose informers are never started: their stores hold the
// objects. Only GetInformer is served, which is all the cache's lists (cachelist) read.
type storeCache struct {
	cache.Cache
	stores map[string]toolscache.SharedIndexInformer
}

func storeCacheOf(st *clusterstate.State) *storeCache {
	c := &storeCache{stores: map[string]toolscache.SharedIndexInformer{}}
	fillStore(c, &corev1.PersistentVolume{}, st.Volumes())
	fillStore(c, &corev1.PersistentVolumeClaim{}, st.Claims())
	fillStore(c, &storagev1.StorageClass{}, st.Classes())
	fillStore(c, &corev1.Pod{}, st.Pods())
	node := &metav1.PartialObjectMetadata{}
	node.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Node"))
	metas := make([]*metav1.PartialObjectMetadata, 0, len(st.Nodes()))
	for _, n := range st.Nodes() {
		m := &metav1.PartialObjectMetadata{ObjectMeta: n.ObjectMeta}
		m.SetGroupVersionKind(node.GroupVersionKind())
		metas = append(metas, m)
	}
	fillStore(c, node, metas)
	return c
}

func storeKey(obj client.Object) string {
	if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
		return "meta:" + m.GroupVersionKind().Kind
	}
	return fmt.Sprintf("%T", obj)
}

func fillStore[T client.Object](c *storeCache, kind T, objs []T) {
	inf := toolscache.NewSharedIndexInformer(&toolscache.ListWatch{}, kind, 0, toolscache.Indexers{})
	for _, o := range objs {
		if err := inf.GetStore().Add(o); err != nil {
			panic(err)
		}
	}
	c.stores[storeKey(kind)] = inf
}

func (c *storeCache) GetInformer(_ context.Context, obj client.Object, _ ...cache.InformerGetOption) (cache.Informer, error) {
	inf, ok := c.stores[storeKey(obj)]
	if !ok {
		return nil, fmt.Errorf("storeCache: no informer for %s", storeKey(obj))
	}
	return inf, nil
}

// stateReader answers the audit's live reads from the state: an apiserver that agrees with the
// cache.
type stateReader struct{ st *clusterstate.State }

func (s stateReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	switch o := obj.(type) {
	case *corev1.PersistentVolume:
		if pv, _ := s.st.PersistentVolume(key.Name); pv != nil {
			*o = *pv
			return nil
		}
		return apierrors.NewNotFound(schema.GroupResource{Resource: "persistentvolumes"}, key.Name)
	case *corev1.PersistentVolumeClaim:
		if pvc, _ := s.st.PersistentVolumeClaim(key.Namespace, key.Name); pvc != nil {
			*o = *pvc
			return nil
		}
		return apierrors.NewNotFound(schema.GroupResource{Resource: "persistentvolumeclaims"}, key.Name)
	case *corev1.Node:
		if n, _ := s.st.Node(key.Name); n != nil {
			*o = *n
			return nil
		}
		return apierrors.NewNotFound(schema.GroupResource{Resource: "nodes"}, key.Name)
	}
	return fmt.Errorf("stateReader: Get of %T", obj)
}

func (s stateReader) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	switch l := list.(type) {
	case *corev1.NodeList:
		for _, n := range s.st.Nodes() {
			l.Items = append(l.Items, *n)
		}
	case *corev1.PersistentVolumeList:
		for _, pv := range s.st.Volumes() {
			l.Items = append(l.Items, *pv)
		}
	case *corev1.PersistentVolumeClaimList:
		for _, pvc := range s.st.Claims() {
			l.Items = append(l.Items, *pvc)
		}
	case *storagev1.StorageClassList:
		for _, sc := range s.st.Classes() {
			l.Items = append(l.Items, *sc)
		}
	default:
		return fmt.Errorf("stateReader: List of %T", list)
	}
	return nil
}
