package cachelist

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
)

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestACutBodyIsDecodedWhereItLies: what a PageReader decodes of a body the cut read is that
// body's own buffer, from where its reader stands, not a copy; and the cut sizes the next body's
// buffer from the longest it read, the apiserver's lists coming without a length.
func TestACutBodyIsDecodedWhereItLies(t *testing.T) {
	list := &corev1.PersistentVolumeClaimList{Items: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "team-a"}}}}
	var enc bytes.Buffer
	if err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Encode(list, &enc); err != nil {
		t.Fatal(err)
	}
	rt := CutListedMetadata(roundTripFunc(func(*http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {protobufMedia}},
			Body: io.NopCloser(bytes.NewReader(enc.Bytes())), ContentLength: -1}, nil
	}), "kubectl.kubernetes.io/last-applied-configuration", "persistentvolumeclaims")
	req, err := http.NewRequest(http.MethodGet, "https://apiserver/api/v1/persistentvolumeclaims", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	pb, ok := resp.Body.(*pooledBody)
	if !ok {
		t.Fatalf("the cut's body is a %T", resp.Body)
	}
	if got := rt.(*metaCutter).largest.Load(); got != int64(enc.Len()) {
		t.Errorf("the longest body read is %d bytes, want %d", got, enc.Len())
	}
	var head [3]byte
	if _, err := io.ReadFull(resp.Body, head[:]); err != nil {
		t.Fatal(err)
	}
	got, err := bodyBytes(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, enc.Bytes()[3:]) {
		t.Fatalf("bodyBytes after 3 bytes read: %q, want %q", got, enc.Bytes()[3:])
	}
	if &got[0] != &pb.body[3] {
		t.Fatal("bodyBytes copied the cut body")
	}
}
