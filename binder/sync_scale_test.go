package binder

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/test/testobj"
)

// memInformers is a memCache that is also an informer cache whose informers expose their stores
// (holding the memCache's own objects), as controller-runtime's do: readers that go to the store
// (package cachelist) get the cached objects, Get and List copy as the informer cache does.
type memInformers struct {
	*memCache
	stores map[string]toolscache.Store
}

var _ cache.Informers = memInformers{}

// storeOnly is an informer of which only the store is used.
type storeOnly struct {
	cache.Informer
	store toolscache.Store
}

func (s storeOnly) GetStore() toolscache.Store { return s.store }

func newMemInformers(objs ...client.Object) (memInformers, error) {
	m, err := newMemCache(objs...)
	if err != nil {
		return memInformers{}, err
	}
	out := memInformers{memCache: m, stores: map[string]toolscache.Store{}}
	for kind, s := range m.stores {
		st := toolscache.NewStore(toolscache.MetaNamespaceKeyFunc)
		for _, o := range s.items {
			if err := st.Add(o); err != nil {
				return memInformers{}, err
			}
		}
		out.stores[kind] = st
	}
	return out, nil
}

func (m memInformers) GetInformer(_ context.Context, obj client.Object, _ ...cache.InformerGetOption) (cache.Informer, error) {
	kind, err := kindOf(obj)
	if err != nil {
		return nil, err
	}
	st, ok := m.stores[kind]
	if !ok {
		st = toolscache.NewStore(toolscache.MetaNamespaceKeyFunc)
	}
	return storeOnly{store: st}, nil
}

func (memInformers) GetInformerForKind(context.Context, schema.GroupVersionKind, ...cache.InformerGetOption) (cache.Informer, error) {
	return nil, fmt.Errorf("not implemented")
}
func (memInformers) RemoveInformer(context.Context, client.Object) error { return nil }
func (memInformers) Start(context.Context) error                         { return nil }
func (memInformers) WaitForCacheSync(context.Context) bool               { return true }
func (memInformers) IndexField(context.Context, client.Object, string, client.IndexerFunc) error {
	return nil
}

// BenchmarkClaimSyncs syncs every claim of a generated cluster (scaleCluster: at 100,000 volumes
// about 90,000 bound claims and 10,000 pending) through syncClaim, reading a cache that copies as
// controller-runtime's informer cache does and exposes its informers' stores, as the manager's
// cache does. Per sync it reports the bytes and allocations, and "live-MB": how much more live
// heap a collection finds while eight workers sync claims (the binder's default) than when they
// are idle. A collection marks everything allocated while it runs, so what a sync allocates
// shows as live heap, and the next heap goal (GOGC) doubles it. Results are in
// docs/benchmarks.md.
func BenchmarkClaimSyncs(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("volumes=%d", n), func(b *testing.B) {
			objs := boundStatuses(scaleCluster(n, n/10))
			c, err := newMemInformers(objs...)
			if err != nil {
				b.Fatal(err)
			}
			bd := scalePlanner(b)
			bd.o.Cache, bd.o.Live = c, c
			var claims []*corev1.PersistentVolumeClaim
			for _, o := range objs {
				if claim, ok := o.(*corev1.PersistentVolumeClaim); ok {
					claims = append(claims, claim)
				}
			}
			ctx := context.Background()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				claim := claims[i%len(claims)]
				i++
				_ = bd.syncClaim(ctx, claim.Namespace, claim.Name) // writes to the empty fake fail; the reads are measured
			}
			b.StopTimer()
			b.ReportMetric(liveWhileSyncing(bd, claims)/(1<<20), "live-MB")
		})
	}
}

// boundStatuses gives the bound pairs of objs the statuses the binder's bind writes leave, so that
// their syncs write nothing (as in a cluster at rest: the benchmark's writer holds nothing).
func boundStatuses(objs []client.Object) []client.Object {
	volumes := map[string]*corev1.PersistentVolume{}
	for _, o := range objs {
		if v, ok := o.(*corev1.PersistentVolume); ok {
			volumes[v.Name] = v
		}
	}
	for _, o := range objs {
		if c, ok := o.(*corev1.PersistentVolumeClaim); ok && c.Spec.VolumeName != "" {
			v := volumes[c.Spec.VolumeName]
			v.Status.Phase = corev1.VolumeBound
			testobj.ClaimBoundStatus(v)(c)
		}
	}
	return objs
}

// liveWhileSyncing is the live heap a forced collection finds while eight workers sync claims,
// less the live heap it finds with them idle (the median of five of each).
func liveWhileSyncing(bd *Binder, claims []*corev1.PersistentVolumeClaim) float64 {
	live := func() uint64 {
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	median := func(f func() uint64) float64 {
		var xs []float64
		for range 5 {
			xs = append(xs, float64(f()))
		}
		slices.Sort(xs)
		return xs[2]
	}
	idle := median(live)
	var stop atomic.Bool
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			for i := w; !stop.Load(); i++ {
				c := claims[i%len(claims)]
				_ = bd.syncClaim(ctx, c.Namespace, c.Name)
			}
		}()
	}
	busy := median(live)
	stop.Store(true)
	wg.Wait()
	runtime.KeepAlive(claims)
	return busy - idle
}

// BenchmarkResyncGOGC runs the binder's periodic resync (a sync of every claim and every volume)
// over 100,000 volumes held as the informers hold them, at GOGC 100 (Go's default) and 50: per
// resync, the time, what it allocated, and how many collections it set off; and the CPU time one
// collection of this heap takes (a forced one, timed with runtime/metrics' GC CPU classes: assists,
// dedicated workers and pauses, not the idle time the collector fills). A
// collection's cost is about that of marking the live heap, so collections per resync times that
// is the binder's part of what a lower GOGC would cost pvguard. Results are in docs/benchmarks.md.
//
//	go test ./binder/ -run '^$' -bench ResyncGOGC -benchtime 5x
func BenchmarkResyncGOGC(b *testing.B) {
	objs := boundStatuses(scaleCluster(100_000, 10_000))
	c, err := newMemInformers(objs...)
	if err != nil {
		b.Fatal(err)
	}
	bd := scalePlanner(b)
	bd.o.Cache, bd.o.Live = c, c
	ctx := context.Background()
	resync := func() {
		for _, o := range objs {
			switch o := o.(type) {
			case *corev1.PersistentVolumeClaim:
				_ = bd.syncClaim(ctx, o.Namespace, o.Name)
			case *corev1.PersistentVolume:
				_ = bd.syncVolume(ctx, o.Name)
			}
		}
	}
	resync() // the ledger's first records
	// The collector's own work, not the idle time it fills (/cpu/classes/gc/total counts both).
	gcCPU := func() float64 {
		s := []rtmetrics.Sample{{Name: "/cpu/classes/gc/mark/assist:cpu-seconds"}, {Name: "/cpu/classes/gc/mark/dedicated:cpu-seconds"}, {Name: "/cpu/classes/gc/pause:cpu-seconds"}}
		rtmetrics.Read(s)
		return s[0].Value.Float64() + s[1].Value.Float64() + s[2].Value.Float64()
	}
	for _, gogc := range []int{100, 50} {
		b.Run(fmt.Sprintf("gogc=%d", gogc), func(b *testing.B) {
			defer debug.SetGCPercent(debug.SetGCPercent(gogc))
			runtime.GC()
			before := gcCPU()
			runtime.GC()
			oneGC := gcCPU() - before
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			for b.Loop() {
				resync()
			}
			runtime.ReadMemStats(&m1)
			n := float64(b.N)
			b.ReportMetric(float64(m1.TotalAlloc-m0.TotalAlloc)/n/(1<<20), "alloc-MB/resync")
			b.ReportMetric(float64(m1.NumGC-m0.NumGC)/n, "GCs/resync")
			b.ReportMetric(oneGC*1000, "gc-cpu-ms/GC")
			b.ReportMetric(float64(m0.HeapAlloc)/(1<<20), "live-MB")
		})
	}
	runtime.KeepAlive(objs)
}
