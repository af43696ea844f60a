package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"

	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/pvguard/pvguard/storage"
	. "github.com/pvguard/pvguard/test/testobj"
)

// randomWireVolume is a volume with what the scan reads varied, and around it what it skips:
// labels, annotations (the beta class among them, or not), managed fields, a source, node
// affinity.
func randomWireVolume(r *rand.Rand, i int) *corev1.PersistentVolume {
	mods := []PVMod{Class([]string{"", "fast", "slow"}[r.IntN(3)]), Capacity("5Gi"), NodeAffinity("zone", "a", "b"),
		CSI("csi.example.com", fmt.Sprintf("h-%d", i), map[string]string{"pool": "p"}),
		PVMeta(Label("app", "x"), Annotation(lastApplied, strings.Repeat("{}", 50)), Annotation("pv.kubernetes.io/provisioned-by", "csi.example.com")),
		Phase([]corev1.PersistentVolumePhase{"", corev1.VolumeAvailable, corev1.VolumeBound, corev1.VolumeReleased, corev1.VolumePending}[r.IntN(5)])}
	switch r.IntN(3) {
	case 0:
		mods = append(mods, NoClaimRef)
	case 1:
		mods = append(mods, ClaimRef(fmt.Sprintf("ns-%d", r.IntN(3)), fmt.Sprintf("c-%d", r.IntN(3)), ""))
	default:
		mods = append(mods, ClaimRef(fmt.Sprintf("ns-%d", r.IntN(3)), fmt.Sprintf("c-%d", r.IntN(3)), fmt.Sprintf("uid-%d", r.IntN(9))))
	}
	if r.IntN(3) == 0 {
		mods = append(mods, PVMeta(Annotation(storage.AnnBetaStorageClass, []string{"", "beta"}[r.IntN(2)])))
	}
	v := PV(fmt.Sprintf("pv-%d", i), mods...)
	now := metav1.NewTime(time.Unix(1_700_000_000, 0))
	v.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate, Time: &now,
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:storageClassName":{}}}`)}}}
	return v
}

// TestScanReadsWhatTheObjectHolds: what scanVolume and scanClaim read of random objects'
// protobuf encoding is what the objects hold (the class as storage.VolumeClass reads it), and
// decodeVolume and decodeClaim give back the objects without managed fields and the
// `kubectl apply` annotation.
func TestScanReadsWhatTheObjectHolds(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 300 {
		v := randomWireVolume(r, i)
		b, err := v.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		got, err := scanVolume(b)
		if err != nil {
			t.Fatal(err)
		}
		if want := volumeFactsOf(v); got != want {
			t.Errorf("volume %d: scanned %+v, want %+v", i, got, want)
		}
		whole, err := decodeVolume(b)
		if err != nil {
			t.Fatal(err)
		}
		want := v.DeepCopy()
		want.TypeMeta = metav1.TypeMeta{} // an encoded item carries none, as a list's items do not
		want.ManagedFields, want.Annotations = nil, withoutLastApplied(want.Annotations)
		if !equality.Semantic.DeepEqual(whole, want) {
			t.Errorf("volume %d decoded\n %+v\nwant %+v", i, whole, want)
		}

		mods := []PVCMod{ClaimClass("fast"), ClaimUID(fmt.Sprintf("uid-%d", i)), ClaimMeta(Annotation(lastApplied, "{}"), Label("app", "x"))}
		if r.IntN(2) == 0 {
			mods = append(mods, VolumeName(fmt.Sprintf("pv-%d", r.IntN(9))))
		}
		c := PVC(fmt.Sprintf("ns-%d", r.IntN(3)), fmt.Sprintf("c-%d", i), mods...)
		b, err = c.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		cf, err := scanClaim(b)
		if err != nil {
			t.Fatal(err)
		}
		if want := (claimFacts{namespace: c.Namespace, name: c.Name, uid: string(c.UID), volumeName: c.Spec.VolumeName}); cf != want {
			t.Errorf("claim %d: scanned %+v, want %+v", i, cf, want)
		}
		wc, err := decodeClaim(b)
		if err != nil {
			t.Fatal(err)
		}
		wantClaim := trimClaim(c)
		wantClaim.TypeMeta = metav1.TypeMeta{}
		if !equality.Semantic.DeepEqual(wc, wantClaim) {
			t.Errorf("claim %d decoded\n %+v\nwant %+v", i, wc, wantClaim)
		}
	}
}

// TestListItemsReadsTheApiserversEncodings: a list as the apiserver encodes it, in protobuf or
// JSON, is split into its items and its continue token; a list of another kind, or bytes that
// are no list, are an error.
func TestListItemsReadsTheApiserversEncodings(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	list := &corev1.PersistentVolumeList{ListMeta: metav1.ListMeta{Continue: "next-page", ResourceVersion: "7"}}
	for i := range 5 {
		list.Items = append(list.Items, *randomWireVolume(r, i))
	}
	for _, mediaType := range []string{runtime.ContentTypeProtobuf, runtime.ContentTypeJSON} {
		info, _ := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), mediaType)
		var buf bytes.Buffer
		if err := scheme.Codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion).Encode(list, &buf); err != nil {
			t.Fatal(err)
		}
		items, next, err := listItems(buf.Bytes(), "PersistentVolumeList")
		if err != nil {
			t.Fatalf("%s: %v", mediaType, err)
		}
		if next != "next-page" || len(items) != len(list.Items) {
			t.Fatalf("%s: %d items, continue %q; want 5 and next-page", mediaType, len(items), next)
		}
		for i, b := range items {
			f, err := scanVolume(b)
			if err != nil {
				t.Fatal(err)
			}
			if want := volumeFactsOf(&list.Items[i]); f != want {
				t.Errorf("%s: item %d scanned %+v, want %+v", mediaType, i, f, want)
			}
		}
		if _, _, err := listItems(buf.Bytes(), "PersistentVolumeClaimList"); err == nil {
			t.Errorf("%s: a PersistentVolumeList read as a PersistentVolumeClaimList", mediaType)
		}
		if _, _, err := listItems(buf.Bytes()[:buf.Len()/2], "PersistentVolumeList"); err == nil {
			t.Errorf("%s: half a list read without an error", mediaType)
		}
	}
}

// TestEachItemsPageReadsOnePageAhead: the pages come to f in order, each asked for at most one
// page ahead of f; an error of f or of a page ends the read with it, and the reader with it.
func TestEachItemsPageReadsOnePageAhead(t *testing.T) {
	info, _ := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	enc := scheme.Codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion)
	const last = 6
	failAt := -1
	var asked atomic.Int32
	pages := func(ctx context.Context, resource string, o metav1.ListOptions, buf *bytes.Buffer) error {
		i := 0
		if o.Continue != "" {
			i, _ = strconv.Atoi(o.Continue)
		}
		asked.Store(int32(i))
		if i == failAt {
			return errors.New("page refused")
		}
		l := &corev1.PersistentVolumeList{Items: []corev1.PersistentVolume{*PV(fmt.Sprintf("pv-%d", i))}}
		if i < last {
			l.Continue = strconv.Itoa(i + 1)
		}
		buf.Reset()
		return enc.Encode(l, buf)
	}
	read := func(stopAt int) ([]string, error) {
		var got []string
		err := eachItemsPage(context.Background(), pages, "persistentvolumes", "PersistentVolumeList", 1, func(items [][]byte) error {
			f, err := scanVolume(items[0])
			if err != nil {
				return err
			}
			got = append(got, f.name)
			if a := int(asked.Load()); a > len(got) {
				t.Errorf("page %d asked for while f reads page %d", a, len(got)-1)
			}
			if len(got)-1 == stopAt {
				return errors.New("f stops")
			}
			return nil
		})
		return got, err
	}
	got, err := read(-1)
	if err != nil || len(got) != last+1 || got[0] != "pv-0" || got[last] != fmt.Sprintf("pv-%d", last) {
		t.Fatalf("pages %v, %v: want pv-0 to pv-%d", got, err, last)
	}
	if got, err := read(2); err == nil || err.Error() != "f stops" || len(got) != 3 {
		t.Errorf("f failing on the third page: read %v, %v", got, err)
	}
	failAt = 4
	if got, err := read(-1); err == nil || err.Error() != "page refused" || len(got) != 4 {
		t.Errorf("the fifth page refused: read %v, %v", got, err)
	}
}
