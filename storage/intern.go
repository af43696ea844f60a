package storage

import (
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Interner shares equal maps between the objects a cache holds: the labels and annotations of
// volumes and claims, and their resource lists (capacity, requests, limits), are mostly equal
// across a cluster's objects (a class's provisioner annotations, a few sizes), and each is a Go
// map of a few hundred bytes. Sharing them halves what a cached volume or claim holds
// (docs/benchmarks.md, "What the cache keeps"). It is sound because nothing writes to a cached
// object: readers hand them to the policy, which is fuzzed for leaving its inputs alone, and the
// binder deep-copies what it writes.
//
// Its table is bounded so that a tenant's objects cannot make it grow without end: a map of more
// than maxInternKey bytes (keys and values) is never shared, and when the table holds max maps it starts again
// empty (the objects keep the maps they share; only later ones stop meeting them).
type Interner struct {
	mu        sync.Mutex
	max       int
	strings   map[string]map[string]string
	resources map[string]corev1.ResourceList
}

// maxInternKey is the longest map (its keys and values) an Interner shares: annotations and
// labels of that size are not the repeated ones.
const maxInternKey = 1024

// NewInterner returns an Interner whose table holds at most max maps of each type.
func NewInterner(max int) *Interner {
	return &Interner{max: max, strings: map[string]map[string]string{}, resources: map[string]corev1.ResourceList{}}
}

// Strings returns a map equal to m: m itself the first time, else the one seen before.
func (in *Interner) Strings(m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	keys := make([]string, 0, len(m))
	n := 0
	for k, v := range m {
		keys = append(keys, k)
		n += len(k) + len(v) + 2
	}
	if n > maxInternKey {
		return m
	}
	slices.Sort(keys)
	var b strings.Builder
	b.Grow(n)
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(m[k])
		b.WriteByte(0)
	}
	return intern(in, in.strings, b.String(), m)
}

// Resources returns a resource list equal to r: r itself the first time, else the one seen
// before.
func (in *Interner) Resources(r corev1.ResourceList) corev1.ResourceList {
	if len(r) == 0 {
		return r
	}
	keys := make([]string, 0, len(r))
	for k := range r {
		keys = append(keys, string(k))
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		q := r[corev1.ResourceName(k)]
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(q.String())
		b.WriteByte(0)
	}
	if b.Len() > maxInternKey {
		return r
	}
	return intern(in, in.resources, b.String(), r)
}

func intern[M any](in *Interner, table map[string]M, key string, m M) M {
	in.mu.Lock()
	defer in.mu.Unlock()
	if s, ok := table[key]; ok {
		return s
	}
	if len(table) >= in.max {
		clear(table)
	}
	table[key] = m
	return m
}

// Share replaces, in place, the labels, annotations and resource lists of a volume or claim (and
// the labels and annotations of any other object) by equal ones the Interner has seen, and
// returns obj.
func (in *Interner) Share(obj any) any {
	if m, ok := obj.(metav1.Object); ok {
		m.SetLabels(in.Strings(m.GetLabels()))
		m.SetAnnotations(in.Strings(m.GetAnnotations()))
	}
	switch o := obj.(type) {
	case *corev1.PersistentVolume:
		o.Spec.Capacity = in.Resources(o.Spec.Capacity)
	case *corev1.PersistentVolumeClaim:
		o.Spec.Resources.Requests = in.Resources(o.Spec.Resources.Requests)
		o.Spec.Resources.Limits = in.Resources(o.Spec.Resources.Limits)
		o.Status.Capacity = in.Resources(o.Status.Capacity)
	}
	return obj
}

// Transform is the cache transform of volumes, claims and classes: Strip to the shape, then
// Share with in.
func (s CacheShape) Transform(in *Interner) func(any) (any, error) {
	return func(obj any) (any, error) {
		obj, err := s.Strip(obj)
		if err != nil {
			return nil, err
		}
		return in.Share(obj), nil
	}
}
