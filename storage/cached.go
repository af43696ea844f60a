package storage

import (
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AnnLastApplied is the annotation in which `kubectl apply` keeps the configuration it last
// applied: a second copy of the object's spec, which nothing in pvguard reads.
const AnnLastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// CacheShape says what a cache keeps of the volumes and claims it holds: the fields of status
// named here (as the API spells them), and everything else but the fields no reader of pvguard
// reads (Strip). It is made from what the readers declare they read (the rules' StatusReads, the
// binder's and explain's own lists), so a reader reading more than it declares is the only way a
// cached object can lack what it reads; the tests of each reader hold it to its declaration.
type CacheShape struct {
	VolumeStatus []string
	ClaimStatus  []string
}

// Union is a shape that keeps what either keeps.
func (s CacheShape) Union(o CacheShape) CacheShape {
	merge := func(a, b []string) []string {
		out := slices.Concat(a, b)
		slices.Sort(out)
		return slices.Compact(out)
	}
	return CacheShape{VolumeStatus: merge(s.VolumeStatus, o.VolumeStatus), ClaimStatus: merge(s.ClaimStatus, o.ClaimStatus)}
}

// Strip is the cache transform of volumes, claims and classes: it drops, in place, what no rule,
// binder decision or explanation reads, and returns obj. Dropped: metadata.managedFields (a third
// of a controller-written object), kubectl's last-applied-configuration annotation (a copy of the
// spec as applied: most of the rest of an applied object), and the status fields the shape does
// not keep. A writer holding a stripped object must write by patch, not update, so that what was
// dropped stays on the server (the binder does). Other objects (a tombstone) are returned as they
// are.
func (s CacheShape) Strip(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.PersistentVolume:
		stripMeta(&o.ObjectMeta)
		zeroUnkept(reflect.ValueOf(&o.Status).Elem(), s.VolumeStatus)
	case *corev1.PersistentVolumeClaim:
		stripMeta(&o.ObjectMeta)
		zeroUnkept(reflect.ValueOf(&o.Status).Elem(), s.ClaimStatus)
	case metav1.Object:
		stripMeta(o)
	}
	return obj, nil
}

// StripVolume returns a stripped copy of v (Strip), leaving v alone.
func (s CacheShape) StripVolume(v *corev1.PersistentVolume) *corev1.PersistentVolume {
	if v == nil {
		return nil
	}
	out, _ := s.Strip(v.DeepCopy())
	return out.(*corev1.PersistentVolume)
}

// StripClaim returns a stripped copy of c (Strip), leaving c alone.
func (s CacheShape) StripClaim(c *corev1.PersistentVolumeClaim) *corev1.PersistentVolumeClaim {
	if c == nil {
		return nil
	}
	out, _ := s.Strip(c.DeepCopy())
	return out.(*corev1.PersistentVolumeClaim)
}

func stripMeta(m metav1.Object) {
	m.SetManagedFields(nil)
	if a := m.GetAnnotations(); a != nil {
		if _, ok := a[AnnLastApplied]; ok {
			delete(a, AnnLastApplied)
			if len(a) == 0 {
				m.SetAnnotations(nil)
			}
		}
	}
}

// zeroUnkept sets every field of the status struct st whose JSON name keep does not list to its
// zero value: a field the API adds later is dropped until a reader declares it.
func zeroUnkept(st reflect.Value, keep []string) {
	for i := 0; i < st.NumField(); i++ {
		name, _, _ := strings.Cut(st.Type().Field(i).Tag.Get("json"), ",")
		if !slices.Contains(keep, name) {
			f := st.Field(i)
			f.Set(reflect.Zero(f.Type()))
		}
	}
}
