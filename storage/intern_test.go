package storage

import (
	"fmt"
	"maps"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func same(a, b any) bool { return reflect.ValueOf(a).Pointer() == reflect.ValueOf(b).Pointer() }

// TestInternerSharesOnlyEqualMaps: equal maps come back as one instance, and a map always comes
// back equal to itself, however close another map seen before is.
func TestInternerSharesOnlyEqualMaps(t *testing.T) {
	in := NewInterner(100)
	seen := []map[string]string{
		{"a": "1", "b": "2"},
		{"a": "1", "b": "3"},     // another value
		{"a": "1", "c": "2"},     // another key
		{"a": "1"},               // fewer
		{"a": "1\x00b", "": "2"}, // what a separator-blind key would confuse with the first
		{"a\x00": "1", "b": "2"},
	}
	for _, m := range seen {
		if got := in.Strings(maps.Clone(m)); !maps.Equal(got, m) {
			t.Errorf("Strings(%q) = %q", m, got)
		}
	}
	for _, m := range seen {
		a, b := in.Strings(maps.Clone(m)), in.Strings(maps.Clone(m))
		if !maps.Equal(a, m) || !same(a, b) {
			t.Errorf("Strings(%q): %q and %q, shared %v", m, a, b, same(a, b))
		}
	}
	r1 := corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
	r2 := corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
	r3 := corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")}
	if a, b, c := in.Resources(r1), in.Resources(r2), in.Resources(r3); !same(a, b) || same(a, c) || !c.Storage().Equal(resource.MustParse("2Gi")) {
		t.Errorf("resource lists: 1Gi and 1Gi shared %v, 1Gi and 2Gi shared %v, 2Gi came back %v", same(a, b), same(a, c), c.Storage())
	}
}

// TestInternerIsBounded: a map longer than maxInternKey is never kept, and the table never holds
// more than its bound however many distinct maps go through it.
func TestInternerIsBounded(t *testing.T) {
	in := NewInterner(10)
	big := map[string]string{"k": strings.Repeat("x", maxInternKey)}
	if a, b := in.Strings(maps.Clone(big)), in.Strings(maps.Clone(big)); same(a, b) || len(in.strings) != 0 {
		t.Errorf("a map of %d bytes was shared (%v) or kept (%d)", maxInternKey, same(a, b), len(in.strings))
	}
	for i := range 1000 {
		in.Strings(map[string]string{"i": fmt.Sprint(i)})
		if len(in.strings) > 10 {
			t.Fatalf("after %d maps the table holds %d, more than its bound 10", i+1, len(in.strings))
		}
	}
}

// TestTransformSharesVolumesAndClaimsMaps: the cache transform strips, then shares the labels,
// annotations and resource lists of volumes and claims.
func TestTransformSharesVolumesAndClaimsMaps(t *testing.T) {
	tr := CacheShape{ClaimStatus: []string{"capacity"}}.Transform(NewInterner(100))
	claim := func(name string) *corev1.PersistentVolumeClaim {
		c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "db"},
			Annotations: map[string]string{AnnBindCompleted: "yes", AnnLastApplied: "{}"}}}
		c.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
		c.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
		return c
	}
	o1, _ := tr(claim("a"))
	o2, _ := tr(claim("b"))
	a, b := o1.(*corev1.PersistentVolumeClaim), o2.(*corev1.PersistentVolumeClaim)
	if !same(a.Labels, b.Labels) || !same(a.Annotations, b.Annotations) || !same(a.Spec.Resources.Requests, b.Spec.Resources.Requests) || !same(a.Status.Capacity, b.Status.Capacity) {
		t.Errorf("equal maps of two claims not shared")
	}
	if _, ok := a.Annotations[AnnLastApplied]; ok || a.Annotations[AnnBindCompleted] != "yes" {
		t.Errorf("annotations after the transform: %v", a.Annotations)
	}
	pv := func(name string) *corev1.PersistentVolume {
		return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PersistentVolumeSpec{
			Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}
	}
	v1, _ := tr(pv("a"))
	v2, _ := tr(pv("b"))
	if !same(v1.(*corev1.PersistentVolume).Spec.Capacity, v2.(*corev1.PersistentVolume).Spec.Capacity) {
		t.Errorf("equal capacities of two volumes not shared")
	}
}
