package cli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"

	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

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

// listItems reads every item of an encoded list with readItems, into one arena.
func listItems(body []byte, kind string) (items [][]byte, next string, err error) {
	var arena []byte
	next, err = readItems(bufio.NewReader(bytes.NewReader(body)), kind, &arena, func(b []byte) error {
		items = append(items, b)
		return nil
	})
	return items, next, err
}

// TestReadItemsReadsTheApiserversEncodings: a list as the apiserver encodes it, in protobuf or
// JSON, is read item by item, with its continue token; a list of another kind, or a list cut
// short anywhere, are an error.
func TestReadItemsReadsTheApiserversEncodings(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	list := &corev1.PersistentVolumeList{ListMeta: metav1.ListMeta{Continue: "next-page", ResourceVersion: "7", RemainingItemCount: ptr.To[int64](12)}}
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
		if mediaType == runtime.ContentTypeProtobuf {
			// An item claiming 1 GB, in a list that claims as much: an error, not an allocation.
			huge := append([]byte{}, protobufMagic...)
			huge = protowire.AppendTag(huge, 1, protowire.BytesType)
			huge = protowire.AppendBytes(huge, protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), []byte("PersistentVolumeList")))
			huge = protowire.AppendTag(huge, 2, protowire.BytesType)
			huge = protowire.AppendVarint(huge, 1<<30+8)
			huge = protowire.AppendTag(huge, 2, protowire.BytesType)
			huge = protowire.AppendVarint(huge, 1<<30)
			if _, _, err := listItems(huge, "PersistentVolumeList"); err == nil || !strings.Contains(err.Error(), "more than any object's") {
				t.Errorf("an item of 1 GB: %v, want it refused unread", err)
			}
		}
		for cut := 1; cut < buf.Len(); cut += 1 + cut/8 {
			if _, _, err := listItems(buf.Bytes()[:cut], "PersistentVolumeList"); err == nil {
				t.Errorf("%s: the list cut at byte %d of %d read without an error", mediaType, cut, buf.Len())
			}
		}
	}
}

// TestEachItemsReadsAFewBatchesAhead: the items come to f in order, the reader at most a few
// batches ahead of f, pages as large as one likes; an error of f or of a page ends the read with
// it, and the reader with it.
func TestEachItemsReadsAFewBatchesAhead(t *testing.T) {
	info, _ := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	enc := scheme.Codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion)
	const last, perPage = 6, 2000 // pages of about 1.8 MB, two batches each
	failAt := -1
	var asked atomic.Int32
	pages := func(ctx context.Context, resource string, o metav1.ListOptions) (io.ReadCloser, error) {
		i := 0
		if o.Continue != "" {
			i, _ = strconv.Atoi(o.Continue)
		}
		asked.Store(int32(i))
		if i == failAt {
			return nil, errors.New("page refused")
		}
		l := &corev1.PersistentVolumeList{}
		for j := range perPage {
			l.Items = append(l.Items, *PV(fmt.Sprintf("pv-%d-%04d", i, j), PVMeta(Annotation(lastApplied, strings.Repeat("x", 800)))))
		}
		if i < last {
			l.Continue = strconv.Itoa(i + 1)
		}
		var buf bytes.Buffer
		err := enc.Encode(l, &buf)
		return io.NopCloser(&buf), err
	}
	read := func(stopAt int) ([]string, error) {
		var got []string
		err := eachItems(context.Background(), pages, "persistentvolumes", "PersistentVolumeList", perPage, func(items [][]byte) error {
			if len(got) == 0 {
				time.Sleep(300 * time.Millisecond) // for the reader to read as far ahead as it may
			}
			for _, b := range items {
				f, err := scanVolume(b)
				if err != nil {
					return err
				}
				got = append(got, f.name)
			}
			// Batches of 1 MiB, about 1,100 of these items, two a page: f holds one, one waits
			// for f and the reader reads into the third, at most a page ahead of f's.
			if a, at := int(asked.Load()), (len(got)-1)/perPage; a > at+2 {
				t.Errorf("page %d asked for while f reads page %d", a, at)
			}
			if len(got) > stopAt && stopAt >= 0 {
				return errors.New("f stops")
			}
			return nil
		})
		return got, err
	}
	got, err := read(-1)
	if err != nil || len(got) != (last+1)*perPage || got[0] != "pv-0-0000" || got[len(got)-1] != fmt.Sprintf("pv-%d-%04d", last, perPage-1) {
		t.Fatalf("read %d items (%v): want pv-0-0000 to pv-%d-%04d", len(got), err, last, perPage-1)
	}
	for i := 1; i < len(got); i++ {
		if got[i] <= got[i-1] {
			t.Fatalf("item %s after %s", got[i], got[i-1])
		}
	}
	if got, err := read(2 * perPage); err == nil || err.Error() != "f stops" || len(got) > 3*perPage {
		t.Errorf("f failing on the third page: read %d items, %v", len(got), err)
	}
	failAt = 4
	if got, err := read(-1); err == nil || err.Error() != "page refused" || len(got) != 4*perPage {
		t.Errorf("the fifth page refused: read %d items, %v", len(got), err)
	}
}

// TestRestPagesForbiddenIsForbidden: a list the user may not read is the apiserver's 403, as
// the typed client gives it, so that explain tells the user to ask the pvguard server.
func TestRestPagesForbiddenIsForbidden(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403,`+
			`"message":"persistentvolumes is forbidden: User \"tenant\" cannot list resource \"persistentvolumes\" in API group \"\" at the cluster scope"}`)
	}))
	defer srv.Close()
	rc := &rest.Config{Host: srv.URL}
	rc.AcceptContentTypes, rc.ContentType = runtime.ContentTypeProtobuf+","+runtime.ContentTypeJSON, runtime.ContentTypeProtobuf
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	err = eachItems(context.Background(), restPages(cs.CoreV1().RESTClient()), "persistentvolumes", "PersistentVolumeList", 10, func([][]byte) error {
		t.Error("items read from a forbidden list")
		return nil
	})
	if !forbidden(fmt.Errorf("reading: %w", err)) {
		t.Errorf("err %v, want the apiserver's forbidden", err)
	}
}
