package cachelist

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"

	"google.golang.org/protobuf/encoding/protowire"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
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
// Decoding copies every string and byte field out of the buffer. A cut page's items are each
// decoded into an object of their own, and the page is the list client-go's pager makes of pages
// (a metainternalversion.List of pointers to them: decodeCut).
//
// A page that is not a protobuf list the cut can read (JSON, or bytes the apiserver does not
// send) is decoded as it came, into a copy of the list given, and the decoder says what is wrong
// with it.
type PageReader struct {
	client     rest.Interface
	resource   string
	list       runtime.Object
	itemType   reflect.Type // list's items' (itemType), nil when they are decoded in the list
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
// fields and their annotation named annotation, list (e.g. an empty *corev1.PersistentVolumeList)
// saying the type of its items and what decoder decodes a page as it came into. The cut is sound
// only for a kind whose cache transform drops both: the caller says which.
func NewPageReader(client rest.Interface, resource string, list runtime.Object, params runtime.ParameterCodec, decoder runtime.Decoder, annotation string) *PageReader {
	return &PageReader{client: client, resource: resource, list: list, itemType: itemType(list), params: params, decoder: decoder, annotation: []byte(annotation)}
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

// unmarshaler is a generated protobuf type's own decoding.
type unmarshaler interface{ Unmarshal([]byte) error }

// itemType is the type of the items of list (e.g. corev1.PersistentVolume for a
// *corev1.PersistentVolumeList) when a pointer to one is an object that decodes itself; nil
// otherwise.
func itemType(list runtime.Object) reflect.Type {
	v := reflect.ValueOf(list)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return nil
	}
	f, ok := v.Elem().Type().FieldByName("Items")
	if !ok || f.Type.Kind() != reflect.Slice || f.Type.Elem().Kind() != reflect.Struct {
		return nil
	}
	ptr := reflect.PointerTo(f.Type.Elem())
	if !ptr.Implements(reflect.TypeFor[runtime.Object]()) || !ptr.Implements(reflect.TypeFor[unmarshaler]()) {
		return nil
	}
	return f.Type.Elem()
}

// decodeCut decodes cut, a cut page of items items, each item into an object of its own, into
// the list client-go's pager makes of a list's pages (a metainternalversion.List of pointers to
// them). The decoder reads the envelope with the list left out: the list's kind, which it sets or
// clears as for a whole page. decoded is false, and cut is to be decoded whole, when the list's
// items are not of a generated type (itemType).
//
// Why: decoded whole, a page is copied out of its envelope and its items decoded into one array,
// grown as they come (about twice their size, copied at each growth); client-go's pager then
// copies each item out of the array into an object of its own, so that the cache does not keep
// whole arrays alive, and drops the array. Each of those is fresh memory the kernel zeroes as it
// is first touched, and at 100,000 volumes they were a tenth of the start's CPU
// (docs/benchmarks.md, "Each item decoded where it is kept"). Here each item is decoded once,
// where the cache keeps it.
func (r *PageReader) decodeCut(cut []byte, items int) (obj runtime.Object, decoded bool, err error) {
	if r.itemType == nil {
		return nil, false, nil
	}
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
	kind, _, err := r.decoder.Decode(head, nil, r.list.DeepCopyObject())
	if err != nil {
		return nil, true, err
	}
	list := &metainternalversion.List{Items: make([]runtime.Object, items)}
	list.GetObjectKind().SetGroupVersionKind(kind.GetObjectKind().GroupVersionKind())
	// The page's objects are made one after the other before any is decoded, so that they lie
	// side by side in the allocator's spans: decoded one at a time, each object would lie among
	// the maps and strings decoded for the one before, which the cache's transform replaces by
	// shared ones, and their spans would stay in use, part empty, long after that garbage is
	// collected (about 50 MB more heap in use at 100,000 pairs).
	for i := range list.Items {
		list.Items[i] = reflect.New(r.itemType).Interface().(runtime.Object)
	}
	n := 0
	err = protofields.Each(raw, func(num protowire.Number, typ protowire.Type, _, value []byte) error {
		switch {
		case typ != protowire.BytesType:
		case num == listMeta:
			return list.ListMeta.Unmarshal(value)
		case num == listItems:
			if n == len(list.Items) { // cutList counted them: not reached
				return fmt.Errorf("item %d: more items than the page's %d", n, len(list.Items))
			}
			if err := list.Items[n].(unmarshaler).Unmarshal(value); err != nil {
				return fmt.Errorf("item %d: %w", n, err)
			}
			n++
		}
		return nil
	})
	if err != nil {
		return nil, true, err
	}
	list.Items = list.Items[:n]
	return list, true, nil
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
