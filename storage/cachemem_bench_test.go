package storage

import (
	"runtime"
	"testing"
)

// BenchmarkCacheHeap is the Go heap a cached volume or claim holds (docs/benchmarks.md, "What the
// cache keeps"): 20,000 objects shaped as a cluster holds them (clusterObjects), each decoded
// from its own JSON as an informer decodes it, through the cache transform, heap in use after
// minus before, per object.
func BenchmarkCacheHeap(b *testing.B) {
	const n = 20000
	raw := clusterObjects(b, n)
	var perObject float64
	for b.Loop() {
		objs := make([]any, n)
		tr := fixtureShape.Transform(NewInterner(4096))
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for i, r := range raw {
			o, err := tr(decodeObject(b, r))
			if err != nil {
				b.Fatal(err)
			}
			objs[i] = o
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(objs)
		runtime.KeepAlive(tr)
		perObject = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / n
	}
	b.ReportMetric(perObject, "heap-B/object")
}

// BenchmarkCacheTransformCluster is the cache transform's cost for one object shaped as a
// cluster holds it (clusterObjects, decoded outside the timer).
func BenchmarkCacheTransformCluster(b *testing.B) {
	raw := clusterObjects(b, 20000)
	tr := fixtureShape.Transform(NewInterner(4096))
	objs := make([]any, 0, len(raw))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if len(objs) == 0 {
			b.StopTimer()
			for _, r := range raw[:min(len(raw), b.N-i)] {
				objs = append(objs, decodeObject(b, r))
			}
			b.StartTimer()
		}
		if _, err := tr(objs[len(objs)-1]); err != nil {
			b.Fatal(err)
		}
		objs = objs[:len(objs)-1]
	}
}
