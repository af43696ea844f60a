package cachelist

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestPageReaderSizesItsBuffersFromTheLongestPage: the apiserver's lists come without a length,
// so a PageReader remembers the longest page it read and makes a new buffer that large at once;
// a buffer it takes from its pool is empty.
func TestPageReaderSizesItsBuffersFromTheLongestPage(t *testing.T) {
	list := &corev1.PersistentVolumeClaimList{Items: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "team-a"}}}}
	var enc bytes.Buffer
	if err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Encode(list, &enc); err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/vnd.kubernetes.protobuf"}},
			Body: io.NopCloser(bytes.NewReader(enc.Bytes())), ContentLength: -1}, nil
	})}
	rc, err := apiutil.RESTClientForGVK(schema.GroupVersionKind{Version: "v1", Kind: "PersistentVolumeClaim"}, false, false,
		&rest.Config{Host: "https://apiserver", RateLimiter: flowcontrol.NewFakeAlwaysRateLimiter()}, scheme.Codecs, hc)
	if err != nil {
		t.Fatal(err)
	}
	r := NewPageReader(rc, "persistentvolumeclaims", &corev1.PersistentVolumeClaimList{}, scheme.ParameterCodec,
		runtime.WithoutVersionDecoder{Decoder: scheme.Codecs.UniversalDeserializer()}, "kubectl.kubernetes.io/last-applied-configuration")
	if _, err := r.List(context.Background(), metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := r.largest.Load(); got != int64(enc.Len()) {
		t.Errorf("the longest page read is %d bytes, want %d", got, enc.Len())
	}
	// The page's own buffer back from the pool, or a new one (a pool may drop what it holds).
	if b := r.buffer(); b.Cap() < enc.Len() || b.Len() != 0 {
		t.Errorf("a new buffer holds %d bytes of %d, want none of at least %d", b.Len(), b.Cap(), enc.Len())
	}
}
