package cachelist_test

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/randfill"

	"github.com/pvguard/pvguard/internal/cachelist"
)

// TestPageReaderDecodesAsTheDecoder: pages of volumes and of claims with every field filled at
// random, read by a PageReader, are what the decoder makes of the same cut page.
func TestPageReaderDecodesAsTheDecoder(t *testing.T) {
	fill := randfill.NewWithSeed(7).NilChance(0.2).NumElements(0, 3).Funcs(
		func(q *resource.Quantity, c randfill.Continue) {
			*q = *resource.NewQuantity(c.Int63n(1<<40), resource.BinarySI)
		},
		func(tm *metav1.Time, c randfill.Continue) {
			*tm = metav1.NewTime(time.Unix(c.Int63n(1<<31), 0).UTC())
		},
		func(m *metav1.ObjectMeta, c randfill.Continue) {
			c.FillNoCustom(m)
			m.ManagedFields = nil // the cut drops them: compared apart (TestPageReaderReadsPagesCut)
			delete(m.Annotations, lastApplied)
		},
	)
	decoder := pageDecoder()
	for _, tc := range []struct {
		resource string
		list     runtime.Object
		fill     func() runtime.Object
	}{
		{"persistentvolumes", &corev1.PersistentVolumeList{}, func() runtime.Object {
			l := &corev1.PersistentVolumeList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeList"}}
			l.Items = make([]corev1.PersistentVolume, 37)
			for i := range l.Items {
				fill.Fill(&l.Items[i])
			}
			fill.Fill(&l.ListMeta)
			return l
		}},
		{"persistentvolumeclaims", &corev1.PersistentVolumeClaimList{}, func() runtime.Object {
			l := &corev1.PersistentVolumeClaimList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaimList"}}
			l.Items = make([]corev1.PersistentVolumeClaim, 37)
			for i := range l.Items {
				fill.Fill(&l.Items[i])
			}
			fill.Fill(&l.ListMeta)
			return l
		}},
	} {
		t.Run(tc.resource, func(t *testing.T) {
			for range 20 {
				body := encoded(t, tc.fill())
				got := readPage(t, body, tc.resource, tc.list)
				cut, ok := cachelist.CutList(body, lastApplied)
				if !ok {
					t.Fatal("the page could not be cut")
				}
				want, _, err := decoder.Decode(cut, nil, tc.list.DeepCopyObject())
				if err != nil {
					t.Fatal(err)
				}
				read, ok := got.(*metainternalversion.List)
				if !ok {
					t.Fatalf("read as a %T", got)
				}
				items, err := meta.ExtractList(want)
				if err != nil {
					t.Fatal(err)
				}
				wantMeta := reflect.ValueOf(want).Elem().FieldByName("ListMeta").Interface()
				if !equality.Semantic.DeepEqual(read.ListMeta, wantMeta) || read.GetObjectKind().GroupVersionKind() != want.GetObjectKind().GroupVersionKind() {
					t.Fatalf("list read as %#v, %v; decoded %#v, %v", read.ListMeta, read.GetObjectKind().GroupVersionKind(), wantMeta, want.GetObjectKind().GroupVersionKind())
				}
				if !equality.Semantic.DeepEqual(read.Items, items) {
					t.Fatalf("read by the PageReader\n%#v\ndecoded\n%#v", read.Items, items)
				}
			}
		})
	}
}
