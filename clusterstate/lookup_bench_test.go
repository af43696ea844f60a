package clusterstate_test

import (
	"fmt"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvguard/pvguard/clusterstate"
)

// boundPairs are n claims and n volumes bound to each other, in 100 namespaces.
func boundPairs(n int) ([]*corev1.PersistentVolumeClaim, []*corev1.PersistentVolume) {
	claims := make([]*corev1.PersistentVolumeClaim, n)
	volumes := make([]*corev1.PersistentVolume, n)
	for i := range n {
		ns, name, pv := fmt.Sprintf("team-%03d", i%100), fmt.Sprintf("data-%d", i), fmt.Sprintf("pvc-%08x-0000-4000-8000-%012x", i, i)
		claims[i] = &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(fmt.Sprintf("%08x-1111-4000-8000-%012x", i, i))},
			Spec: corev1.PersistentVolumeClaimSpec{VolumeName: pv}}
		volumes[i] = &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: pv},
			Spec: corev1.PersistentVolumeSpec{ClaimRef: &corev1.ObjectReference{Namespace: ns, Name: name, UID: claims[i].UID}}}
	}
	return claims, volumes
}

// lookupRound asks each of the five lookups over claims and volumes once.
func lookupRound(s *clusterstate.State, c *corev1.PersistentVolumeClaim) {
	_, _ = s.PersistentVolume(c.Spec.VolumeName)
	_, _ = s.PersistentVolumeClaim(c.Namespace, c.Name)
	_, _ = s.ClaimsNamingVolume(c.Spec.VolumeName)
	_, _ = s.VolumesClaiming(c.Namespace, c.Name)
	_, _ = s.ClaimWithUID(c.UID)
}

// BenchmarkBuildLookups100k builds a state's five lookups over 100,000 bound pairs, and reports
// the heap they hold (held-B/op, measured after a collection, with the state kept alive).
func BenchmarkBuildLookups100k(b *testing.B) {
	claims, volumes := boundPairs(100000)
	var held uint64
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		s := clusterstate.New(claims, volumes, nil, nil)
		b.StartTimer()
		lookupRound(s, claims[0])
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&after)
		held += after.HeapAlloc - before.HeapAlloc
		runtime.KeepAlive(s)
		b.StartTimer()
	}
	b.ReportMetric(float64(held)/float64(b.N), "held-B/op")
}

// BenchmarkLookups100k asks the five lookups of one claim at a time over 100,000 bound pairs.
func BenchmarkLookups100k(b *testing.B) {
	claims, volumes := boundPairs(100000)
	s := clusterstate.New(claims, volumes, nil, nil)
	lookupRound(s, claims[0])
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		lookupRound(s, claims[(i*7919)%len(claims)])
	}
}
