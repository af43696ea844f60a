package cachelist_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/pvguard/pvguard/internal/cachelist"
)

const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// roundTrip is a transport answering every request with one response.
type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// answer is a transport answering body with the given content type (and status 200).
func answer(contentType string, body []byte) http.RoundTripper {
	return roundTrip(func(*http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {contentType}},
			Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body))}, nil
	})
}

// encoded is obj as the apiserver sends it in protobuf.
func encoded(t *testing.T, obj runtime.Object) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Encode(obj, &b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// decoded is body decoded as client-go decodes a protobuf response.
func decoded(t *testing.T, body []byte, into runtime.Object) runtime.Object {
	t.Helper()
	out, _, err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Decode(body, nil, into)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// written is metadata as kubectl apply, a provisioner and kube-controller-manager leave it.
func written(name string, annotations map[string]string) metav1.ObjectMeta {
	at := metav1.NewTime(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC))
	return metav1.ObjectMeta{
		Name: name, Namespace: "team-a", UID: "uid-" + "name", ResourceVersion: "42",
		Labels: map[string]string{"app": name}, Annotations: annotations, Finalizers: []string{"kubernetes.io/pvc-protection"},
		ManagedFields: []metav1.ManagedFieldsEntry{
			{Manager: "kubectl-client-side-apply", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &at,
				FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:resources":{}}}`)}},
			{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &at,
				FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{"f:phase":{}}}`)}, Subresource: "status"},
		},
	}
}

func claims(metas ...metav1.ObjectMeta) *corev1.PersistentVolumeClaimList {
	l := &corev1.PersistentVolumeClaimList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaimList"},
		ListMeta: metav1.ListMeta{ResourceVersion: "42", Continue: "next"}}
	for _, m := range metas {
		l.Items = append(l.Items, corev1.PersistentVolumeClaim{ObjectMeta: m, Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, VolumeName: "pv-" + m.Name,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}},
		}, Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}})
	}
	return l
}

// withoutCut is l's items as the cut leaves them: no managed fields, no last-applied annotation.
func withoutCut(l *corev1.PersistentVolumeClaimList) *corev1.PersistentVolumeClaimList {
	out := l.DeepCopy()
	for i := range out.Items {
		m := &out.Items[i].ObjectMeta
		m.ManagedFields = nil
		delete(m.Annotations, lastApplied)
		if len(m.Annotations) == 0 {
			m.Annotations = nil
		}
	}
	return out
}

func TestCutListDropsWhatTheCacheDrops(t *testing.T) {
	list := claims(
		written("applied", map[string]string{lastApplied: `{"apiVersion":"v1","kind":"PersistentVolumeClaim"}`, "team": "a"}),
		written("only-applied", map[string]string{lastApplied: `{}`}),
		written("bare", nil),
		// An annotation whose value is the key, and one whose key holds it: both kept.
		written("lookalikes", map[string]string{"note": lastApplied, lastApplied + "-x": "y"}),
		// An item whose length takes three bytes before the cut and two after.
		written("large", map[string]string{lastApplied: strings.Repeat("x", 20000)}),
	)
	body := encoded(t, list)
	cut := listedCut(t, body)
	if len(cut) >= len(body) {
		t.Fatalf("cut body %d bytes, from %d", len(cut), len(body))
	}
	got := decoded(t, cut, &corev1.PersistentVolumeClaimList{})
	if want := withoutCut(list); !equality.Semantic.DeepEqual(got, want) {
		t.Fatalf("decoded after the cut:\n%#v\nwant\n%#v", got, want)
	}
	// The items' managed fields and annotation were what the decoder would have dropped.
	if whole := decoded(t, body, &corev1.PersistentVolumeClaimList{}).(*corev1.PersistentVolumeClaimList); len(whole.Items[0].ManagedFields) != 2 {
		t.Fatalf("the uncut body decodes without managed fields: %+v", whole.Items[0].ObjectMeta)
	}
}

// TestCutListLeavesWhatItCannotRead: a body that is not a protobuf list the cut can read is
// left as it came, for the decoder to say what is wrong with it.
func TestCutListLeavesWhatItCannotRead(t *testing.T) {
	list := claims(written("applied", map[string]string{lastApplied: "{}"}))
	body := encoded(t, list)
	one := encoded(t, &corev1.PersistentVolumeClaim{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: written("one", map[string]string{lastApplied: "{}"})})
	meta := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), encodedMeta(t, written("x", nil)))
	twoMetas := envelope("PersistentVolumeClaimList", protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), append(meta, meta...)))
	item := protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), meta)
	twoRaws := append(envelope("PersistentVolumeClaimList", item), protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), item)...)
	for name, b := range map[string][]byte{
		"JSON":                            []byte(`{"kind":"PersistentVolumeClaimList","apiVersion":"v1","items":[]}`),
		"one object":                      one,
		"truncated":                       body[:len(body)-3],
		"not protobuf":                    []byte("k8s?garbage"),
		"an item's metadata in two parts": twoMetas,
		"the list in two parts":           twoRaws,
		"garbage after the magic":         []byte("k8s\x00\xff\xff\xff"),
	} {
		t.Run(name, func(t *testing.T) {
			sent := slices.Clone(b)
			got, ok := cachelist.CutList(b, lastApplied)
			if !bytes.Equal(b, sent) {
				t.Fatal("the body was changed")
			}
			// An item whose metadata is in two parts is copied as it came: cut or not, the bytes
			// are the same.
			if ok && !bytes.Equal(got, b) {
				t.Fatalf("cut %d bytes to %d", len(b), len(got))
			}
		})
	}
}

// TestCutListCopiesAnItemItCannotRead: an item whose metadata cannot be read is copied as it
// came, the items around it cut.
func TestCutListCopiesAnItemItCannotRead(t *testing.T) {
	good := encoded(t, claims(written("good", map[string]string{lastApplied: "{}"})))
	// The list's items as the apiserver encodes them, and one between them whose metadata is
	// a field of a wire type that does not exist.
	_, raw := splitEnvelope(t, good)
	badMeta := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte{0x0f})
	bad := protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), badMeta)
	body := envelope("PersistentVolumeClaimList", append(append(slices.Clone(raw), bad...), raw...))
	cut := listedCut(t, body)
	goodCut := listedCut(t, good)
	_, cutRaw := splitEnvelope(t, cut)
	_, goodCutRaw := splitEnvelope(t, goodCut)
	if want := append(append(slices.Clone(goodCutRaw), bad...), goodCutRaw...); !bytes.Equal(cutRaw, want) {
		t.Fatalf("the list's items after the cut:\n%x\nwant the good ones cut and the other as it came:\n%x", cutRaw, want)
	}
}

// listedCut is body, a list of claims, as the cut leaves it.
func listedCut(t *testing.T, body []byte) []byte {
	t.Helper()
	cut, ok := cachelist.CutList(body, lastApplied)
	if !ok {
		t.Fatalf("the list of %d bytes was not cut", len(body))
	}
	return cut
}

// splitEnvelope is the kind and the object of the apiserver's protobuf envelope body (the fields
// of a list's items but its ListMeta, here: the list's field 1 is dropped).
func splitEnvelope(t *testing.T, body []byte) (kind string, items []byte) {
	t.Helper()
	var u runtime.Unknown
	if err := u.Unmarshal(bytes.TrimPrefix(body, []byte("k8s\x00"))); err != nil {
		t.Fatal(err)
	}
	b := u.Raw
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if n < 0 || m < 0 {
			t.Fatalf("list %x unreadable", u.Raw)
		}
		if num == 2 {
			items = append(items, b[:n+m]...)
		}
		b = b[n+m:]
	}
	return u.Kind, items
}

// encodedMeta is m's protobuf encoding.
func encodedMeta(t *testing.T, m metav1.ObjectMeta) []byte {
	t.Helper()
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// envelope is raw in the apiserver's protobuf envelope (runtime.Unknown) as an object of kind.
func envelope(kind string, raw []byte) []byte {
	typeMeta := protowire.AppendString(protowire.AppendTag(nil, 2, protowire.BytesType), kind)
	b := []byte("k8s\x00")
	b = protowire.AppendBytes(protowire.AppendTag(b, 1, protowire.BytesType), typeMeta)
	return protowire.AppendBytes(protowire.AppendTag(b, 2, protowire.BytesType), raw)
}

// failingBody yields its bytes, then fails.
type failingBody struct {
	r   io.Reader
	err error
}

func (b *failingBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF {
		return n, b.err
	}
	return n, err
}

func (b *failingBody) Close() error { return nil }

// TestPageReaderFailsAsThePageFailed: a page that does not arrive whole fails the list with the
// error that cut it short.
func TestPageReaderFailsAsThePageFailed(t *testing.T) {
	broken := errors.New("connection reset")
	next := roundTrip(func(*http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/vnd.kubernetes.protobuf"}},
			Body: &failingBody{r: strings.NewReader("k8s\x00part"), err: broken}}, nil
	})
	r := claimsReader(t, "https://apiserver", &http.Client{Transport: next})
	if list, err := r.List(context.Background(), metav1.ListOptions{}); !errors.Is(err, broken) {
		t.Fatalf("read %#v, %v; want %v", list, err, broken)
	}
}

// BenchmarkDecodeListPage is one page of claims as the informers list them (cachelist.PageSize,
// each with three managed fields entries and the last-applied annotation as kubectl apply and
// kube-controller-manager leave them): read and decoded whole as client-go does, and read by a
// PageReader (cut, and each item decoded where it is kept); either way client-go's pager then
// takes the page's items as objects of their own (meta.EachListItemWithAlloc), as it does for
// an informer's list.
func BenchmarkDecodeListPage(b *testing.B) {
	applied := `{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"annotations":{},"labels":{"app":"db"},` +
		`"name":"data","namespace":"team-a"},"spec":{"accessModes":["ReadWriteOnce"],"resources":{"requests":{"storage":"10Gi"}},` +
		`"storageClassName":"rbd"}}`
	var metas []metav1.ObjectMeta
	for i := range cachelist.PageSize {
		m := written(fmt.Sprintf("data-%05d", i), map[string]string{lastApplied: applied, "pv.kubernetes.io/bind-completed": "yes"})
		m.ManagedFields = append(m.ManagedFields, m.ManagedFields[1])
		m.ManagedFields[2].FieldsV1 = &metav1.FieldsV1{Raw: bytes.Repeat([]byte(`{"f:metadata":{"f:annotations":{}}}`), 8)}
		metas = append(metas, m)
	}
	t := &testing.T{}
	body := encoded(t, claims(metas...))
	s := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	whole := answer("application/vnd.kubernetes.protobuf", body)
	req, _ := http.NewRequest(http.MethodGet, "https://apiserver/api/v1/persistentvolumeclaims", nil)
	b.Run("whole", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			resp, err := whole.RoundTrip(req)
			if err != nil {
				b.Fatal(err)
			}
			page, err := io.ReadAll(resp.Body) // as client-go reads a body
			if err != nil {
				b.Fatal(err)
			}
			_ = resp.Body.Close()
			list, _, err := s.Decode(page, nil, &corev1.PersistentVolumeClaimList{})
			if err != nil {
				b.Fatal(err)
			}
			takeItems(b, list)
		}
	})
	// As a PageReader reads a page: into its pooled buffer, cut there and decoded where it lies.
	r := claimsReader(b, "https://apiserver", &http.Client{Transport: whole})
	b.Run("read by a PageReader", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			list, err := r.List(context.Background(), metav1.ListOptions{})
			if err != nil {
				b.Fatal(err)
			}
			takeItems(b, list)
		}
	})
}

// takeItems takes a page's items as client-go's pager does for an informer's list.
func takeItems(b *testing.B, list runtime.Object) {
	n := 0
	if err := meta.EachListItemWithAlloc(list, func(runtime.Object) error { n++; return nil }); err != nil || n != cachelist.PageSize {
		b.Fatalf("took %d items: %v", n, err)
	}
}
