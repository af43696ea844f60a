package storage

import (
	"fmt"
	"maps"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
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

// sameString: a and b are one string in memory, not two equal copies.
func sameString(a, b string) bool { return a == b && unsafe.StringData(a) == unsafe.StringData(b) }

// TestInternerSharesOnlyEqualValues: for each value the transform shares, two objects decoded
// with equal values come out with one instance of it, and with different values each keeps its
// own, equal to what it had, however close the two are.
func TestInternerSharesOnlyEqualValues(t *testing.T) {
	fsPV := func(set func(*corev1.PersistentVolume)) *corev1.PersistentVolume {
		pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv"}, Spec: corev1.PersistentVolumeSpec{
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "d", VolumeHandle: "h"}}}}
		set(pv)
		return pv
	}
	localPV := func(set func(*corev1.PersistentVolume)) *corev1.PersistentVolume {
		pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv"}, Spec: corev1.PersistentVolumeSpec{
			PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/mnt"}}}}
		set(pv)
		return pv
	}
	claim := func(set func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
		c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}}
		set(c)
		return c
	}
	ptr := func(s string) *string { return &s }
	mode := func(s string) *corev1.PersistentVolumeMode { m := corev1.PersistentVolumeMode(s); return &m }
	affinity := func(terms ...[]corev1.NodeSelectorRequirement) *corev1.VolumeNodeAffinity {
		a := &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{}}
		for _, t := range terms {
			a.Required.NodeSelectorTerms = append(a.Required.NodeSelectorTerms, corev1.NodeSelectorTerm{MatchExpressions: t})
		}
		return a
	}
	host := func(values ...string) []corev1.NodeSelectorRequirement {
		return []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: values}}
	}
	for _, tc := range []struct {
		name string
		// objects returns two fresh objects, their values of the field equal if equal is set
		objects func(equal bool) (any, any)
		// field is the object's value of the field, and shared says whether two values are one
		field  func(any) any
		shared func(a, b any) bool
	}{
		{"namespace",
			func(eq bool) (any, any) {
				return claim(func(c *corev1.PersistentVolumeClaim) { c.Namespace = "team-a" }), claim(func(c *corev1.PersistentVolumeClaim) { c.Namespace = pick(eq, "team-a", "team-b") })
			},
			func(o any) any { return o.(*corev1.PersistentVolumeClaim).Namespace }, sameStrings},
		{"claim finalizers",
			func(eq bool) (any, any) {
				return claim(func(c *corev1.PersistentVolumeClaim) { c.Finalizers = []string{"a", "b"} }),
					claim(func(c *corev1.PersistentVolumeClaim) { c.Finalizers = []string{"a", pick(eq, "b", "b\x00")} })
			},
			func(o any) any { return o.(*corev1.PersistentVolumeClaim).Finalizers }, sameSlices[string]},
		{"finalizers split differently",
			func(eq bool) (any, any) {
				return claim(func(c *corev1.PersistentVolumeClaim) { c.Finalizers = []string{"a", "b"} }),
					claim(func(c *corev1.PersistentVolumeClaim) { c.Finalizers = pick(eq, []string{"a", "b"}, []string{"ab"}) })
			},
			func(o any) any { return o.(*corev1.PersistentVolumeClaim).Finalizers }, sameSlices[string]},
		{"claim access modes",
			func(eq bool) (any, any) {
				rwo := corev1.PersistentVolumeAccessMode("ReadWriteOnce")
				return claim(func(c *corev1.PersistentVolumeClaim) { c.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{rwo} }),
					claim(func(c *corev1.PersistentVolumeClaim) {
						c.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{rwo}
						if !eq {
							c.Spec.AccessModes = append(c.Spec.AccessModes, corev1.ReadOnlyMany)
						}
					})
			},
			func(o any) any { return o.(*corev1.PersistentVolumeClaim).Spec.AccessModes }, sameSlices[corev1.PersistentVolumeAccessMode]},
		{"claim status access modes",
			func(eq bool) (any, any) {
				return claim(func(c *corev1.PersistentVolumeClaim) {
						c.Status.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
					}),
					claim(func(c *corev1.PersistentVolumeClaim) {
						c.Status.AccessModes = []corev1.PersistentVolumeAccessMode{pick(eq, corev1.ReadWriteMany, corev1.ReadWriteOncePod)}
					})
			},
			func(o any) any { return o.(*corev1.PersistentVolumeClaim).Status.AccessModes }, sameSlices[corev1.PersistentVolumeAccessMode]},
		{"claim class",
			func(eq bool) (any, any) {
				return claim(func(c *corev1.PersistentVolumeClaim) { c.Spec.StorageClassName = ptr("fast") }),
					claim(func(c *corev1.PersistentVolumeClaim) { c.Spec.StorageClassName = ptr(pick(eq, "fast", "")) })
			},
			func(o any) any { return o.(*corev1.PersistentVolumeClaim).Spec.StorageClassName }, samePointers[string]},
		{"claim volume mode",
			func(eq bool) (any, any) {
				return claim(func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeMode = mode("Filesystem") }),
					claim(func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeMode = mode(pick(eq, "Filesystem", "Block")) })
			},
			func(o any) any { return o.(*corev1.PersistentVolumeClaim).Spec.VolumeMode }, samePointers[corev1.PersistentVolumeMode]},
		{"claim phase",
			func(eq bool) (any, any) {
				return claim(func(c *corev1.PersistentVolumeClaim) { c.Status.Phase = corev1.ClaimBound }),
					claim(func(c *corev1.PersistentVolumeClaim) { c.Status.Phase = pick(eq, corev1.ClaimBound, corev1.ClaimLost) })
			},
			func(o any) any { return string(o.(*corev1.PersistentVolumeClaim).Status.Phase) }, sameStrings},
		{"volume class",
			func(eq bool) (any, any) {
				return fsPV(func(v *corev1.PersistentVolume) { v.Spec.StorageClassName = "rbd" }), fsPV(func(v *corev1.PersistentVolume) { v.Spec.StorageClassName = pick(eq, "rbd", "rbd2") })
			},
			func(o any) any { return o.(*corev1.PersistentVolume).Spec.StorageClassName }, sameStrings},
		{"volume reclaim policy",
			func(eq bool) (any, any) {
				return fsPV(func(v *corev1.PersistentVolume) {
						v.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
					}),
					fsPV(func(v *corev1.PersistentVolume) {
						v.Spec.PersistentVolumeReclaimPolicy = pick(eq, corev1.PersistentVolumeReclaimRetain, corev1.PersistentVolumeReclaimDelete)
					})
			},
			func(o any) any { return string(o.(*corev1.PersistentVolume).Spec.PersistentVolumeReclaimPolicy) }, sameStrings},
		{"CSI driver",
			func(eq bool) (any, any) {
				return fsPV(func(v *corev1.PersistentVolume) { v.Spec.CSI.Driver = "rbd.csi.ceph.com" }), fsPV(func(v *corev1.PersistentVolume) {
					v.Spec.CSI.Driver = pick(eq, "rbd.csi.ceph.com", "cephfs.csi.ceph.com")
				})
			},
			func(o any) any { return o.(*corev1.PersistentVolume).Spec.CSI.Driver }, sameStrings},
		{"CSI fsType",
			func(eq bool) (any, any) {
				return fsPV(func(v *corev1.PersistentVolume) { v.Spec.CSI.FSType = "ext4" }), fsPV(func(v *corev1.PersistentVolume) { v.Spec.CSI.FSType = pick(eq, "ext4", "xfs") })
			},
			func(o any) any { return o.(*corev1.PersistentVolume).Spec.CSI.FSType }, sameStrings},
		{"CSI attributes",
			func(eq bool) (any, any) {
				return fsPV(func(v *corev1.PersistentVolume) {
						v.Spec.CSI.VolumeAttributes = map[string]string{"pool": "replicapool", "clusterID": "c"}
					}),
					fsPV(func(v *corev1.PersistentVolume) {
						v.Spec.CSI.VolumeAttributes = map[string]string{"pool": "replicapool", "clusterID": pick(eq, "c", "c2")}
					})
			},
			func(o any) any { return o.(*corev1.PersistentVolume).Spec.CSI.VolumeAttributes },
			func(a, b any) bool { return same(a, b) }},
		{"CSI node stage secret",
			func(eq bool) (any, any) {
				return fsPV(func(v *corev1.PersistentVolume) {
						v.Spec.CSI.NodeStageSecretRef = &corev1.SecretReference{Name: "rook-csi-rbd-node", Namespace: "rook-ceph"}
					}),
					fsPV(func(v *corev1.PersistentVolume) {
						v.Spec.CSI.NodeStageSecretRef = &corev1.SecretReference{Name: pick(eq, "rook-csi-rbd-node", "rook-csi-rbd-node\x00"), Namespace: pick(eq, "rook-ceph", "ook-ceph")}
					})
			},
			func(o any) any { return o.(*corev1.PersistentVolume).Spec.CSI.NodeStageSecretRef }, samePointers[corev1.SecretReference]},
		{"CSI expand secret",
			func(eq bool) (any, any) {
				return fsPV(func(v *corev1.PersistentVolume) {
						v.Spec.CSI.ControllerExpandSecretRef = &corev1.SecretReference{Name: "s", Namespace: "n"}
					}),
					fsPV(func(v *corev1.PersistentVolume) {
						v.Spec.CSI.ControllerExpandSecretRef = &corev1.SecretReference{Name: "s", Namespace: pick(eq, "n", "m")}
					})
			},
			func(o any) any { return o.(*corev1.PersistentVolume).Spec.CSI.ControllerExpandSecretRef }, samePointers[corev1.SecretReference]},
		{"volume access modes",
			func(eq bool) (any, any) {
				return fsPV(func(v *corev1.PersistentVolume) {
						v.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
					}),
					fsPV(func(v *corev1.PersistentVolume) {
						v.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{pick(eq, corev1.ReadWriteOnce, corev1.ReadOnlyMany)}
					})
			},
			func(o any) any { return o.(*corev1.PersistentVolume).Spec.AccessModes }, sameSlices[corev1.PersistentVolumeAccessMode]},
		{"volume mount options",
			func(eq bool) (any, any) {
				return fsPV(func(v *corev1.PersistentVolume) { v.Spec.MountOptions = []string{"hard", "nfsvers=4.1"} }),
					fsPV(func(v *corev1.PersistentVolume) {
						v.Spec.MountOptions = []string{"hard", pick(eq, "nfsvers=4.1", "nfsvers=4.2")}
					})
			},
			func(o any) any { return o.(*corev1.PersistentVolume).Spec.MountOptions }, sameSlices[string]},
		{"volume mode",
			func(eq bool) (any, any) {
				return fsPV(func(v *corev1.PersistentVolume) { v.Spec.VolumeMode = mode("Block") }), fsPV(func(v *corev1.PersistentVolume) { v.Spec.VolumeMode = mode(pick(eq, "Block", "Filesystem")) })
			},
			func(o any) any { return o.(*corev1.PersistentVolume).Spec.VolumeMode }, samePointers[corev1.PersistentVolumeMode]},
		{"claimRef kind, apiVersion and namespace",
			func(eq bool) (any, any) {
				return fsPV(func(v *corev1.PersistentVolume) {
						v.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: "team-a", Name: "a", UID: "1"}
					}),
					fsPV(func(v *corev1.PersistentVolume) {
						v.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: pick(eq, "team-a", "team-b"), Name: "b", UID: "2"}
					})
			},
			func(o any) any { return o.(*corev1.PersistentVolume).Spec.ClaimRef.Namespace }, sameStrings},
		{"claimRef kind",
			func(eq bool) (any, any) {
				return fsPV(func(v *corev1.PersistentVolume) {
						v.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1"}
					}),
					fsPV(func(v *corev1.PersistentVolume) {
						v.Spec.ClaimRef = &corev1.ObjectReference{Kind: pick(eq, "PersistentVolumeClaim", "Claim"), APIVersion: "v1"}
					})
			},
			func(o any) any { return o.(*corev1.PersistentVolume).Spec.ClaimRef.Kind }, sameStrings},
		{"node affinity",
			func(eq bool) (any, any) {
				return localPV(func(v *corev1.PersistentVolume) { v.Spec.NodeAffinity = affinity(host("node-01")) }),
					localPV(func(v *corev1.PersistentVolume) { v.Spec.NodeAffinity = affinity(host(pick(eq, "node-01", "node-02"))) })
			},
			func(o any) any { return o.(*corev1.PersistentVolume).Spec.NodeAffinity }, samePointers[corev1.VolumeNodeAffinity]},
		{"node affinity: one term of two values, or two terms",
			func(eq bool) (any, any) {
				return localPV(func(v *corev1.PersistentVolume) { v.Spec.NodeAffinity = affinity(host("a", "b")) }),
					localPV(func(v *corev1.PersistentVolume) {
						v.Spec.NodeAffinity = pick(eq, affinity(host("a", "b")), affinity(host("a"), host("b")))
					})
			},
			func(o any) any { return o.(*corev1.PersistentVolume).Spec.NodeAffinity }, samePointers[corev1.VolumeNodeAffinity]},
		{"node affinity: no values, or empty values",
			func(eq bool) (any, any) {
				return localPV(func(v *corev1.PersistentVolume) { v.Spec.NodeAffinity = affinity(host()) }),
					localPV(func(v *corev1.PersistentVolume) {
						v.Spec.NodeAffinity = affinity(host())
						if !eq {
							v.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions[0].Values = []string{}
						}
					})
			},
			func(o any) any { return o.(*corev1.PersistentVolume).Spec.NodeAffinity }, samePointers[corev1.VolumeNodeAffinity]},
		{"local fsType",
			func(eq bool) (any, any) {
				return localPV(func(v *corev1.PersistentVolume) { v.Spec.Local.FSType = ptr("xfs") }), localPV(func(v *corev1.PersistentVolume) { v.Spec.Local.FSType = ptr(pick(eq, "xfs", "ext4")) })
			},
			func(o any) any { return o.(*corev1.PersistentVolume).Spec.Local.FSType }, samePointers[string]},
		{"volume phase",
			func(eq bool) (any, any) {
				return fsPV(func(v *corev1.PersistentVolume) { v.Status.Phase = corev1.VolumeBound }), fsPV(func(v *corev1.PersistentVolume) { v.Status.Phase = pick(eq, corev1.VolumeBound, corev1.VolumeReleased) })
			},
			func(o any) any { return string(o.(*corev1.PersistentVolume).Status.Phase) }, sameStrings},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, eq := range []bool{true, false} {
				in := NewInterner(100)
				a, b := tc.objects(eq)
				wantA, wantB := tc.field(deepCopy(a)), tc.field(deepCopy(b))
				in.Share(a)
				in.Share(b)
				gotA, gotB := tc.field(a), tc.field(b)
				if !reflect.DeepEqual(gotA, wantA) || !reflect.DeepEqual(gotB, wantB) {
					t.Errorf("equal %v: shared to %#v and %#v, were %#v and %#v", eq, gotA, gotB, wantA, wantB)
				}
				if got := tc.shared(gotA, gotB); got != eq {
					t.Errorf("values equal %v (%#v and %#v), shared %v", eq, gotA, gotB, got)
				}
			}
		})
	}
}

func pick[T any](first bool, a, b T) T {
	if first {
		return a
	}
	return b
}

func deepCopy(o any) any { return o.(interface{ DeepCopyObject() runtime.Object }).DeepCopyObject() }

func sameStrings(a, b any) bool { return sameString(a.(string), b.(string)) }

func samePointers[T any](a, b any) bool { return a.(*T) == b.(*T) }

// sameSlices: one backing array, with no room past the end (an append copies).
func sameSlices[E any](a, b any) bool {
	x, y := a.([]E), b.([]E)
	return len(x) == len(y) && len(x) > 0 && &x[0] == &y[0] && cap(x) == len(x)
}

// TestInternerKeysTellValuesApart: values that a key without lengths would confuse (a value
// holding the separator) are not shared, whichever comes first.
func TestInternerKeysTellValuesApart(t *testing.T) {
	pairs := [][2]map[string]string{
		{{"x": "", "y": "z"}, {"x": "\x00y\x00z"}},
		{{"pv.kubernetes.io/bind-completed": "yes", "pv.kubernetes.io/bound-by-controller": "yes"}, {"pv.kubernetes.io/bind-completed": "yes\x00pv.kubernetes.io/bound-by-controller\x00yes"}},
	}
	for _, p := range pairs {
		for _, order := range [][2]int{{0, 1}, {1, 0}} {
			in := NewInterner(100)
			first, second := p[order[0]], p[order[1]]
			in.Strings(maps.Clone(first))
			if got := in.Strings(maps.Clone(second)); !maps.Equal(got, second) {
				t.Errorf("after %q, Strings(%q) = %q", first, second, got)
			}
		}
	}
}

// TestInternerTablesAreBounded: however many distinct strings, slices and node affinities go
// through it (a tenant's objects), no table holds more than its bound, and a value longer than
// maxInternKey is never kept.
func TestInternerTablesAreBounded(t *testing.T) {
	in := NewInterner(10)
	long := strings.Repeat("x", maxInternKey+1)
	for i := range 1000 {
		v := fmt.Sprint(i)
		pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: v, Finalizers: []string{v}}, Spec: corev1.PersistentVolumeSpec{
			StorageClassName: v, MountOptions: []string{long},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: long, VolumeAttributes: map[string]string{"a": long}}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "k", Operator: corev1.NodeSelectorOpIn, Values: []string{v}}}}}}}}}
		in.Share(pv)
		for name, n := range map[string]int{"maps": len(in.strings), "strings": len(in.strs), "values": len(in.values), "resources": len(in.resources)} {
			if n > 10 {
				t.Fatalf("after %d volumes the %s table holds %d, more than its bound 10", i+1, name, n)
			}
		}
	}
	for k := range in.strs {
		if len(k) > maxInternKey {
			t.Errorf("a string of %d bytes was kept", len(k))
		}
	}
	for k := range in.values {
		if len(k) > maxInternKey {
			t.Errorf("a value whose key has %d bytes was kept", len(k))
		}
	}
}

// TestTransformKeepsWhatReadersSee: objects shaped as a cluster holds them, each decoded afresh,
// come out of the transform equal to the same objects stripped alone (Strip, which the readers'
// tests hold them to), and stay so while later objects share their values.
func TestTransformKeepsWhatReadersSee(t *testing.T) {
	raw := clusterObjects(t, 3000)
	tr := fixtureShape.Transform(NewInterner(64)) // small, so that its tables start again often
	var got []any
	for _, r := range raw {
		o, err := tr(decodeObject(t, r))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, o)
	}
	var first string // the first CSI volume's driver
	shared := 0
	for i, r := range raw {
		want, _ := fixtureShape.Strip(decodeObject(t, r))
		if !reflect.DeepEqual(got[i], want) {
			t.Fatalf("object %d after the transform differs from it stripped alone:\n%#v\n%#v", i, got[i], want)
		}
		if pv, ok := got[i].(*corev1.PersistentVolume); ok && pv.Spec.CSI != nil {
			if first == "" {
				first = pv.Spec.CSI.Driver
			} else if sameString(pv.Spec.CSI.Driver, first) {
				shared++
			}
		}
	}
	if shared == 0 {
		t.Errorf("no volume shares the driver of the first: the fixture no longer exercises sharing")
	}
}
