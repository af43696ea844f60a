package cachelist

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"

	"google.golang.org/protobuf/encoding/protowire"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"

	"github.com/pvguard/pvguard/internal/protofields"
)

// PageReader lists a resource's pages as an informer of a typed object does (controller-runtime's
// list function: the same request, parameters and decoding), but cuts each item's
// metadata.managedFields and one annotation (kubectl's last-applied configuration) out of the
// page's protobuf bytes first (cutList), and decodes the page where it was read.
//
// Why: the cache transforms of the kinds read this way drop both anyway, after decoding; at
// 100,000 volumes and claims they are about a third of what a list's objects hold once decoded
// (docs/benchmarks.md, "What the cache keeps"), so decoding them, and collecting them a moment
// later, was a share of the start's CPU that the apiserver, on the same cores, waited for. And
// client-go reads a whole response into a new slice before decoding it, growing it as it arrives
// (about twice the page's bytes allocated): here a page is read into a pooled buffer, sized from
// the longest page read so far (the apiserver's lists come without a length), which goes back to
// the pool once the page is decoded (docs/benchmarks.md, "Each page decoded where it arrived").
// Decoding copies every string and byte field out of the buffer.
//
// A page that is not a protobuf list the cut can read (JSON, or bytes the apiserver does not
// send) is decoded as it came, and the decoder says what is wrong with it.
type PageReader struct {
	client     rest.Interface
	resource   string
	list       runtime.Object
	params     runtime.ParameterCodec
	decoder    runtime.Decoder
	annotation []byte
	bufs       sync.Pool
	// largest is the longest page read so far: a new buffer (the pool's are dropped by the
	// collector) made this large at once is not grown and copied a dozen times while a page
	// arrives.
	largest atomic.Int64
}

// maxPresize bounds the buffer made for a page before it arrives; a longer page grows it.
const maxPresize = 64 << 20

// NewPageReader reads the pages of resource (as the API names it: "persistentvolumes", every
// namespace's) through client, with options encoded by params, each cut of its items' managed
// fields and their annotation named annotation and decoded by decoder into a copy of list (e.g.
// an empty *corev1.PersistentVolumeList). The cut is sound only for a kind whose cache transform
// drops both: the caller says which.
func NewPageReader(client rest.Interface, resource string, list runtime.Object, params runtime.ParameterCodec, decoder runtime.Decoder, annotation string) *PageReader {
	return &PageReader{client: client, resource: resource, list: list, params: params, decoder: decoder, annotation: []byte(annotation)}
}

// List reads the page options ask for. An answer other than success is the error client-go makes
// of it (a *errors.StatusError when the apiserver said why), so that the reflector sees what it
// would have: an expired continue token among them. A page that fails to arrive whole fails the
// list.
func (r *PageReader) List(ctx context.Context, options metav1.ListOptions) (runtime.Object, error) {
	body, err := r.client.Get().Resource(r.resource).VersionedParams(&options, r.params).Stream(ctx)
	if err != nil {
		return nil, err
	}
	buf := r.buffer()
	defer r.bufs.Put(buf) // after decoding, which copies what it keeps
	_, err = buf.ReadFrom(body)
	_ = body.Close()
	if err != nil {
		return nil, fmt.Errorf("reading a page of %s: %w", r.resource, err)
	}
	page := buf.Bytes()
	if n := int64(len(page)); n > r.largest.Load() {
		r.largest.Store(n) // two pages at once keep either length: a hint
	}
	if cut, items, ok := cutList(page, r.annotation); ok {
		got, decoded, err := r.decodeCut(cut, items)
		if err != nil {
			return nil, fmt.Errorf("decoding a page of %s: %w", r.resource, err)
		}
		if decoded {
			return got, nil
		}
		page = cut
	}
	got, _, err := r.decoder.Decode(page, nil, r.list.DeepCopyObject())
	if err != nil {
		return nil, fmt.Errorf("decoding a page of %s: %w", r.resource, err)
	}
	return got, nil
}

// unmarshaler is a generated protobuf type's own decoding, which appends a list's items to its
// Items where proto.Unmarshal would start the list again.
type unmarshaler interface{ Unmarshal([]byte) error }

// decodeCut decodes cut, a cut page of items items: the decoder reads its envelope with the list
// left out (the list's kind, which it sets or clears as for a whole page), then the list's own
// Unmarshal reads the list where it lies into Items made for all of its items at once.
//
// Why: the decoder copies the list out of its envelope first, and its Items grow as the items
// come (about twice their size, copied at each growth). Both are fresh memory the kernel zeroes
// as it is first touched: at 100,000 volumes a tenth of the start's CPU (docs/benchmarks.md,
// "Each page decoded once"). decoded is false, and cut is to be decoded whole, when the list
// is not a generated type with Items.
func (r *PageReader) decodeCut(cut []byte, items int) (obj runtime.Object, decoded bool, err error) {
	head := append(make([]byte, 0, 64), protobufMagic...)
	var raw []byte
	err = protofields.Each(cut[len(protobufMagic):], func(num protowire.Number, _ protowire.Type, field, value []byte) error {
		if num == unknownRaw {
			raw = value
		} else {
			head = append(head, field...)
		}
		return nil
	})
	if err != nil {
		return nil, false, nil // cutList read it: not reached
	}
	obj, _, err = r.decoder.Decode(head, nil, r.list.DeepCopyObject())
	if err != nil {
		return nil, true, err
	}
	u, isGenerated := obj.(unmarshaler)
	v := reflect.ValueOf(obj)
	if !isGenerated || v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return nil, false, nil
	}
	f := v.Elem().FieldByName("Items")
	if !f.IsValid() || f.Kind() != reflect.Slice || !f.CanSet() {
		return nil, false, nil
	}
	f.Set(reflect.MakeSlice(f.Type(), 0, items))
	if err := u.Unmarshal(raw); err != nil {
		return nil, true, err
	}
	return obj, true, nil
}

// buffer is an empty buffer from the pool, or a new one as large as the longest page read.
func (r *PageReader) buffer() *bytes.Buffer {
	if b, ok := r.bufs.Get().(*bytes.Buffer); ok {
		b.Reset()
		return b
	}
	b := new(bytes.Buffer)
	if n := r.largest.Load(); n > 0 {
		b.Grow(int(min(n, maxPresize)) + bytes.MinRead)
	}
	return b
}
