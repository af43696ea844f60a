package storage

import (
	"encoding/binary"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Interner shares equal values between the objects a cache holds. Most of what a cluster's
// volumes and claims hold besides their names and uids is repeated across them: a class's
// provisioner annotations, a few sizes, the namespace, class, driver and fsType, the finalizers,
// the access modes, the claimRef's kind, the secret refs of a driver, the node affinity of the
// disks of one node. Decoded, each object has copies of its own; sharing them leaves a cached
// volume or claim well under half of what it held (docs/benchmarks.md, "What the cache keeps"). It is
// sound because nothing writes to a cached object: readers hand them to the policy, which is
// fuzzed for leaving its inputs alone, and the binder deep-copies what it writes. A shared slice
// has no room past its length, so that an append to it copies.
//
// Its tables are bounded so that a tenant's objects cannot make them grow without end: a value
// whose key (its content, encoded) is longer than maxInternKey bytes is never shared, and when a
// table holds max values it starts again empty (the objects keep the values they share; only
// later ones stop meeting them). A key encodes every string with its length, so two values share
// a key only if they are equal.
type Interner struct {
	mu        sync.Mutex
	max       int
	strings   map[string]map[string]string
	resources map[string]corev1.ResourceList
	strs      map[string]string
	values    map[string]any
	key       []byte   // the key being built, under mu
	keys      []string // a map's keys being sorted, under mu
}

// maxInternKey is the longest key (a value's content, encoded) an Interner shares: annotations,
// labels and strings of that size are not the repeated ones.
const maxInternKey = 1024

// CacheInternMaps bounds each of the informer cache's tables of shared values (pvguard serve's
// Interner): a cluster's distinct labels, annotations, sizes and other shared values are far
// fewer, and a tenant filling them with distinct ones makes each hold at most a few tens of MiB
// (values whose content is at most 1 KiB, each kept with its key), after which it starts again
// empty.
const CacheInternMaps = 4096

// NewInterner returns an Interner whose tables hold at most max values each (maps of strings,
// resource lists, strings, other values).
func NewInterner(max int) *Interner {
	return &Interner{max: max, strings: map[string]map[string]string{}, resources: map[string]corev1.ResourceList{},
		strs: map[string]string{}, values: map[string]any{}}
}

// Strings returns a map equal to m: m itself the first time, else the one seen before.
func (in *Interner) Strings(m map[string]string) map[string]string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.stringMap(m)
}

// Resources returns a resource list equal to r: r itself the first time, else the one seen
// before.
func (in *Interner) Resources(r corev1.ResourceList) corev1.ResourceList {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.resourceList(r)
}

// Share replaces, in place, the labels, annotations, resource lists and the other repeated
// values of a volume, claim or class (and the labels and annotations of any other object) by
// equal ones the Interner has seen, and returns obj.
func (in *Interner) Share(obj any) any {
	in.mu.Lock()
	defer in.mu.Unlock()
	switch o := obj.(type) {
	case *corev1.PersistentVolume:
		in.shareVolume(o)
	case *corev1.PersistentVolumeClaim:
		in.shareClaim(o)
	case *storagev1.StorageClass:
		in.shareMeta(&o.TypeMeta, &o.ObjectMeta)
	case metav1.Object:
		o.SetLabels(in.stringMap(o.GetLabels()))
		o.SetAnnotations(in.stringMap(o.GetAnnotations()))
	}
	return obj
}

// Transform is the cache transform of volumes, claims and classes: Strip to the shape, then
// Share with in.
func (s CacheShape) Transform(in *Interner) func(any) (any, error) {
	strip := s.stripper()
	return func(obj any) (any, error) {
		return in.Share(strip.strip(obj)), nil
	}
}

func (in *Interner) shareMeta(t *metav1.TypeMeta, m *metav1.ObjectMeta) {
	t.Kind, t.APIVersion = in.str(t.Kind), in.str(t.APIVersion)
	m.Namespace = in.str(m.Namespace)
	m.Labels = in.stringMap(m.Labels)
	m.Annotations = in.stringMap(m.Annotations)
	m.Finalizers = shareSlice(in, 'f', m.Finalizers)
}

func (in *Interner) shareVolume(v *corev1.PersistentVolume) {
	in.shareMeta(&v.TypeMeta, &v.ObjectMeta)
	s := &v.Spec
	s.Capacity = in.resourceList(s.Capacity)
	s.AccessModes = shareSlice(in, 'a', s.AccessModes)
	if r := s.ClaimRef; r != nil {
		r.Kind, r.APIVersion, r.Namespace, r.FieldPath = in.str(r.Kind), in.str(r.APIVersion), in.str(r.Namespace), in.str(r.FieldPath)
	}
	s.PersistentVolumeReclaimPolicy = shareStr(in, s.PersistentVolumeReclaimPolicy)
	s.StorageClassName = in.str(s.StorageClassName)
	s.MountOptions = shareSlice(in, 'o', s.MountOptions)
	s.VolumeMode = sharePointer(in, 'v', s.VolumeMode)
	s.VolumeAttributesClassName = sharePointer(in, 'c', s.VolumeAttributesClassName)
	s.NodeAffinity = in.nodeAffinity(s.NodeAffinity)
	if c := s.CSI; c != nil {
		c.Driver, c.FSType = in.str(c.Driver), in.str(c.FSType)
		c.VolumeAttributes = in.stringMap(c.VolumeAttributes)
		c.ControllerPublishSecretRef = in.secretRef(c.ControllerPublishSecretRef)
		c.NodeStageSecretRef = in.secretRef(c.NodeStageSecretRef)
		c.NodePublishSecretRef = in.secretRef(c.NodePublishSecretRef)
		c.ControllerExpandSecretRef = in.secretRef(c.ControllerExpandSecretRef)
		c.NodeExpandSecretRef = in.secretRef(c.NodeExpandSecretRef)
	}
	if l := s.Local; l != nil {
		l.FSType = sharePointer(in, 'c', l.FSType)
	}
	v.Status.Phase = shareStr(in, v.Status.Phase)
	v.Status.Message = in.str(v.Status.Message)
}

func (in *Interner) shareClaim(c *corev1.PersistentVolumeClaim) {
	in.shareMeta(&c.TypeMeta, &c.ObjectMeta)
	s := &c.Spec
	s.AccessModes = shareSlice(in, 'a', s.AccessModes)
	s.Resources.Requests = in.resourceList(s.Resources.Requests)
	s.Resources.Limits = in.resourceList(s.Resources.Limits)
	s.StorageClassName = sharePointer(in, 'c', s.StorageClassName)
	s.VolumeMode = sharePointer(in, 'v', s.VolumeMode)
	s.VolumeAttributesClassName = sharePointer(in, 'c', s.VolumeAttributesClassName)
	c.Status.Phase = shareStr(in, c.Status.Phase)
	c.Status.AccessModes = shareSlice(in, 'a', c.Status.AccessModes)
	c.Status.Capacity = in.resourceList(c.Status.Capacity)
}

// str returns a string equal to s, one seen before if there was one. Under in.mu.
func (in *Interner) str(s string) string {
	if s == "" || len(s) > maxInternKey {
		return s
	}
	if t, ok := in.strs[s]; ok {
		return t
	}
	if len(in.strs) >= in.max {
		clear(in.strs)
	}
	in.strs[s] = s
	return s
}

// shareStr is str for a string type.
func shareStr[S ~string](in *Interner, s S) S { return S(in.str(string(s))) }

// stringMap returns a map equal to m: the one seen before, else m with its keys and values
// shared (in place: m is the decoded object's own). Under in.mu.
func (in *Interner) stringMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	keys := in.keys[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	defer func() { clear(keys); in.keys = keys[:0] }() // the strings are not kept alive by the buffer
	in.key = append(in.key[:0], 'm')
	for _, k := range keys {
		in.key = appendStr(appendStr(in.key, k), m[k])
		if len(in.key) > maxInternKey {
			break
		}
	}
	if s, ok := lookup(in, in.strings, in.key); ok {
		return s
	}
	// Assigning to a key the map holds stores the key given: the shared one.
	for _, k := range keys {
		m[in.str(k)] = in.str(m[k])
	}
	remember(in, in.strings, in.key, m)
	return m
}

// resourceList: as stringMap, for a resource list. Under in.mu.
func (in *Interner) resourceList(r corev1.ResourceList) corev1.ResourceList {
	if len(r) == 0 {
		return r
	}
	keys := make([]corev1.ResourceName, 0, len(r))
	for k := range r {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	in.key = append(in.key[:0], 'r')
	for _, k := range keys {
		q := r[k]
		in.key = appendStr(appendStr(in.key, string(k)), q.String())
	}
	if s, ok := lookup(in, in.resources, in.key); ok {
		return s
	}
	remember(in, in.resources, in.key, r)
	return r
}

// secretRef returns a reference equal to r, one seen before if there was one. Under in.mu.
func (in *Interner) secretRef(r *corev1.SecretReference) *corev1.SecretReference {
	if r == nil {
		return nil
	}
	in.key = appendStr(appendStr(append(in.key[:0], 's'), r.Name), r.Namespace)
	if s, ok := lookup(in, in.values, in.key); ok {
		return s.(*corev1.SecretReference)
	}
	remember(in, in.values, in.key, any(r))
	return r
}

// nodeAffinity returns a node affinity equal to a, one seen before if there was one: a local
// disk's is the same for every disk of its node. Under in.mu.
func (in *Interner) nodeAffinity(a *corev1.VolumeNodeAffinity) *corev1.VolumeNodeAffinity {
	if a == nil {
		return nil
	}
	k := append(in.key[:0], 'n')
	if a.Required == nil {
		k = append(k, 0)
	} else {
		k = appendLen(k, a.Required.NodeSelectorTerms)
		for _, t := range a.Required.NodeSelectorTerms {
			for _, reqs := range [][]corev1.NodeSelectorRequirement{t.MatchExpressions, t.MatchFields} {
				k = appendLen(k, reqs)
				for _, r := range reqs {
					k = appendStr(appendStr(k, r.Key), string(r.Operator))
					k = appendLen(k, r.Values)
					for _, v := range r.Values {
						k = appendStr(k, v)
					}
				}
			}
		}
	}
	in.key = k
	if s, ok := lookup(in, in.values, in.key); ok {
		return s.(*corev1.VolumeNodeAffinity)
	}
	if a.Required != nil {
		for i := range a.Required.NodeSelectorTerms {
			t := &a.Required.NodeSelectorTerms[i]
			t.MatchExpressions = slices.Clip(t.MatchExpressions)
			t.MatchFields = slices.Clip(t.MatchFields)
			for _, reqs := range [][]corev1.NodeSelectorRequirement{t.MatchExpressions, t.MatchFields} {
				for j := range reqs {
					reqs[j].Key = in.str(reqs[j].Key)
					reqs[j].Values = slices.Clip(reqs[j].Values)
				}
			}
		}
		a.Required.NodeSelectorTerms = slices.Clip(a.Required.NodeSelectorTerms)
	}
	remember(in, in.values, in.key, any(a))
	return a
}

// shareSlice returns a slice equal to s (nil if s is nil), one seen before if there was one.
// tag tells apart the slices of different fields' types. Under in.mu.
func shareSlice[S ~string](in *Interner, tag byte, s []S) []S {
	if len(s) == 0 {
		return s
	}
	in.key = append(in.key[:0], 'l', tag)
	for _, e := range s {
		in.key = appendStr(in.key, string(e))
	}
	if t, ok := lookup(in, in.values, in.key); ok {
		return t.([]S)
	}
	s = slices.Clip(s)
	for i := range s {
		s[i] = shareStr(in, s[i])
	}
	remember(in, in.values, in.key, any(s))
	return s
}

// sharePointer returns a pointer to a value equal to *p (nil if p is nil), one seen before if
// there was one. tag tells apart the pointers of different fields' types. Under in.mu.
func sharePointer[S ~string](in *Interner, tag byte, p *S) *S {
	if p == nil {
		return nil
	}
	in.key = appendStr(append(in.key[:0], 'p', tag), string(*p))
	if t, ok := lookup(in, in.values, in.key); ok {
		return t.(*S)
	}
	*p = shareStr(in, *p)
	remember(in, in.values, in.key, any(p))
	return p
}

func appendStr(k []byte, s string) []byte {
	return append(binary.AppendUvarint(k, uint64(len(s))), s...)
}

// appendLen encodes a slice's length, nil apart from empty.
func appendLen[E any](k []byte, s []E) []byte {
	if s == nil {
		return append(k, 0)
	}
	return binary.AppendUvarint(k, uint64(len(s))+1)
}

func lookup[V any](in *Interner, table map[string]V, key []byte) (V, bool) {
	var zero V
	if len(key) > maxInternKey {
		return zero, false
	}
	v, ok := table[string(key)]
	return v, ok
}

func remember[V any](in *Interner, table map[string]V, key []byte, v V) {
	if len(key) > maxInternKey {
		return
	}
	if len(table) >= in.max {
		clear(table)
	}
	table[string(key)] = v
}
