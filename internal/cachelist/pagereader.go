package cachelist

import (
	"context"
	"fmt"
	"io"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
)

// PageReader lists a resource's pages as an informer of a typed object does (controller-runtime's
// list function: the same request, parameters and decoding), but decodes each page where its
// body already lies instead of client-go copying it first.
//
// Why: client-go reads a whole response into a new slice before decoding it, growing it as it
// arrives (io.ReadAll: about twice the page's bytes allocated). At 100,000 volumes and claims that
// was a fifth of what a page allocates and, with the informers' lists at once, a share of the
// collections during the start (docs/benchmarks.md, "Each page decoded where it arrived"). A body that
// CutListedMetadata read and cut is decoded from its own buffer, which goes back to the
// transport's pool once the page is decoded; any other body is read whole first, as client-go
// would.
type PageReader struct {
	client   rest.Interface
	resource string
	list     runtime.Object
	params   runtime.ParameterCodec
	decoder  runtime.Decoder
}

// NewPageReader reads the pages of resource (as the API names it: "persistentvolumes", every
// namespace's) through client, with options encoded by params, each decoded by decoder into a
// copy of list (e.g. an empty *corev1.PersistentVolumeList).
func NewPageReader(client rest.Interface, resource string, list runtime.Object, params runtime.ParameterCodec, decoder runtime.Decoder) *PageReader {
	return &PageReader{client: client, resource: resource, list: list, params: params, decoder: decoder}
}

// List reads the page options ask for. An answer other than success is the error client-go makes
// of it (a *errors.StatusError when the apiserver said why), so that the reflector sees what it
// would have: an expired continue token among them.
func (r *PageReader) List(ctx context.Context, options metav1.ListOptions) (runtime.Object, error) {
	body, err := r.client.Get().Resource(r.resource).VersionedParams(&options, r.params).Stream(ctx)
	if err != nil {
		return nil, err
	}
	defer body.Close() // after decoding: a pooled body's buffer is then handed back
	data, err := bodyBytes(body)
	if err != nil {
		return nil, fmt.Errorf("reading a page of %s: %w", r.resource, err)
	}
	out := r.list.DeepCopyObject()
	got, _, err := r.decoder.Decode(data, nil, out)
	if err != nil {
		return nil, fmt.Errorf("decoding a page of %s: %w", r.resource, err)
	}
	return got, nil
}

// bodyBytes is what is left to read of body: a pooled body's bytes as they lie (decoding copies
// every string and byte field out of them), any other body's read whole.
func bodyBytes(body io.Reader) ([]byte, error) {
	if b, ok := body.(*pooledBody); ok {
		return b.unread(), nil
	}
	return io.ReadAll(body)
}
