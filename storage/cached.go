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
	return s.stripper().strip(obj), nil
}

// stripper is a shape's Strip with the status fields it drops found once: the cache's transform
// strips every object of the informers' lists, and reading struct tags for each was a share of the
// start's CPU.
type stripper struct {
	volumeStatus, claimStatus []int // the fields of each status struct dropped, by index
}

func (s CacheShape) stripper() stripper {
	return stripper{
		volumeStatus: unkept(reflect.TypeFor[corev1.PersistentVolumeStatus](), s.VolumeStatus),
		claimStatus:  unkept(reflect.TypeFor[corev1.PersistentVolumeClaimStatus](), s.ClaimStatus),
	}
}

func (p stripper) strip(obj any) any {
	switch o := obj.(type) {
	case *corev1.PersistentVolume:
		stripMeta(&o.ObjectMeta)
		zeroFields(reflect.ValueOf(&o.Status).Elem(), p.volumeStatus)
	case *corev1.PersistentVolumeClaim:
		stripMeta(&o.ObjectMeta)
		zeroFields(reflect.ValueOf(&o.Status).Elem(), p.claimStatus)
	case metav1.Object:
		stripMeta(o)
	}
	return obj
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

// unkept is the indexes of the fields of the status struct type t whose JSON name keep does not
// list: a field the API adds later is dropped until a reader declares it.
func unkept(t reflect.Type, keep []string) []int {
	var drop []int
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if !slices.Contains(keep, name) {
			drop = append(drop, i)
		}
	}
	return drop
}

// zeroFields sets the fields of the struct st at the given indexes to their zero value.
func zeroFields(st reflect.Value, fields []int) {
	for _, i := range fields {
		st.Field(i).SetZero()
	}
}
