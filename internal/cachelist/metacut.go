package cachelist

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"mime"
	"net/http"
	"path"
	"sync"
	"sync/atomic"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/pvguard/pvguard/internal/protofields"
)

// CutListedMetadata wraps rt, the transport of the informers' client (nil: http.DefaultTransport),
// so that the protobuf list responses of resources (as the API names them: "persistentvolumes")
// arrive without each item's metadata.managedFields and its annotation named annotation
// (kubectl's last-applied configuration), the bytes removed before client-go decodes them.
//
// Why: the cache transforms of these kinds drop both anyway, after decoding; at 100,000 volumes
// and claims they are about a third of what a list's objects hold once decoded (docs/benchmarks.md,
// "What the cache keeps"), so decoding them, and collecting them a moment later, was a share of
// the start's CPU that the apiserver, on the same cores, waited for. Cutting them is sound only for
// a kind whose cache transform drops them: the caller says which.
//
// Anything else passes as it came: another resource, a watch (its events' objects are cut by the
// transform), JSON, an error, a single object, and a body the cut cannot read (client-go then
// reports what it would have). A body that fails to arrive fails as it would have, after the
// bytes that did.
func CutListedMetadata(rt http.RoundTripper, annotation string, resources ...string) http.RoundTripper {
	if rt == nil {
		rt = http.DefaultTransport // as an http.Client without one
	}
	t := &metaCutter{next: rt, annotation: []byte(annotation), resources: map[string]bool{}, bufs: &sync.Pool{}}
	for _, r := range resources {
		t.resources[r] = true
	}
	return t
}

type metaCutter struct {
	next       http.RoundTripper
	annotation []byte
	resources  map[string]bool
	// bufs are the buffers bodies were read into, handed back when client-go closes the body
	// (having copied it): a page is several megabytes, which a new buffer would take from the
	// system, cleared, for each page.
	bufs *sync.Pool
	// largest is the longest body read so far: the apiserver streams a list without a length,
	// and a new buffer (the pool's are dropped by the collector) made this large at once is not
	// grown and copied a dozen times while a page arrives.
	largest atomic.Int64
}

// maxPresize bounds the buffer made for a body from its Content-Length alone; a longer body grows
// it as it arrives.
const maxPresize = 64 << 20

// protobufMedia is the media type of the apiserver's protobuf responses (a watch's carries a
// stream parameter).
const protobufMedia = "application/vnd.kubernetes.protobuf"

// protobufMagic opens every protobuf-encoded object the apiserver sends
// (k8s.io/apimachinery/pkg/runtime/serializer/protobuf).
var protobufMagic = []byte{0x6b, 0x38, 0x73, 0x00}

func (t *metaCutter) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || !t.cuts(req, resp) {
		return resp, err
	}
	var buf *bytes.Buffer
	if b, ok := t.bufs.Get().(*bytes.Buffer); ok {
		buf = b
		buf.Reset()
	} else {
		buf = new(bytes.Buffer)
	}
	if n := max(resp.ContentLength, t.largest.Load()); n > 0 {
		buf.Grow(int(min(n, maxPresize)) + bytes.MinRead)
	}
	_, err = buf.ReadFrom(resp.Body)
	_ = resp.Body.Close()
	body := buf.Bytes()
	if n := int64(len(body)); n > t.largest.Load() {
		t.largest.Store(n) // a race between two bodies keeps either length: a hint
	}
	if err != nil {
		resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), errReader{err}))
		return resp, nil
	}
	if cut, ok := cutList(body, t.annotation); ok {
		body = cut
		resp.ContentLength = int64(len(body))
		resp.Header.Del("Content-Length")
	}
	resp.Body = &pooledBody{Reader: bytes.NewReader(body), buf: buf, pool: t.bufs, body: body}
	return resp, nil
}

// pooledBody is a body read from a pooled buffer, handed back on Close.
type pooledBody struct {
	*bytes.Reader
	buf  *bytes.Buffer
	pool *sync.Pool
	once sync.Once
	body []byte // what the Reader reads
}

// unread is what is left to read of the body, in place (a PageReader decodes it there): valid
// until Close.
func (b *pooledBody) unread() []byte {
	return b.body[len(b.body)-b.Len():]
}

func (b *pooledBody) Close() error {
	b.once.Do(func() {
		b.Reader.Reset(nil) // nothing reads the buffer once it is handed back
		b.pool.Put(b.buf)
	})
	return nil
}

// cuts says whether the response to req is one to cut: a successful, unencoded protobuf answer
// (not a watch's stream) to a GET of one of the resources.
func (t *metaCutter) cuts(req *http.Request, resp *http.Response) bool {
	if req.Method != http.MethodGet || resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Encoding") != "" ||
		!t.resources[path.Base(req.URL.Path)] {
		return false
	}
	media, params, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return err == nil && media == protobufMedia && len(params) == 0
}

// errReader fails every read with err.
type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

// The fields cutList reads, as k8s.io/apimachinery's generated.proto numbers them.
const (
	unknownTypeMeta = 1 // runtime.Unknown: the encoded object's apiVersion and kind
	unknownRaw      = 2 // runtime.Unknown: the object
	typeMetaKind    = 2
	listItems       = 2  // every List: its items
	objectMeta      = 1  // every object: metadata
	metaAnnotations = 12 // ObjectMeta: one map entry each (key 1, value 2)
	metaManaged     = 17 // ObjectMeta: managedFields, one entry each
	mapKey          = 1
)

// errMalformed is an encoding the apiserver does not send (an object or its metadata in two
// parts, which a decoder would merge): what holds it passes as it came.
var errMalformed = errors.New("not a protobuf list")

// cutList cuts body, the protobuf encoding of a list, in place: its items lose their managed
// fields and their annotation named annotation, and the result is body's first len(cut) bytes.
// ok is false, and body is left as it came, when body is not a list it can read.
//
// Each field is written where it was read or before, never past what is still to be read: a cut
// field is never longer than it was. The list's own length, which comes before its items, is
// kept as wide as it was (a varint padded with empty continuation bytes, which protobuf decoders
// read as the same number), so that the items need not move twice.
func cutList(body, annotation []byte) (cut []byte, ok bool) {
	env, found := bytes.CutPrefix(body, protobufMagic)
	if !found {
		return nil, false
	}
	raw, isList := listRaw(env)
	if !isList {
		return nil, false
	}
	// The list's own fields are read first, so that a list that cannot be read is not half cut;
	// an item that cannot be read is copied as it came (cutter.item).
	if protofields.Each(raw, func(protowire.Number, protowire.Type, []byte, []byte) error { return nil }) != nil {
		return nil, false
	}
	w := cutter{buf: body, w: len(protobufMagic), annotation: annotation}
	_ = protofields.Each(env, func(num protowire.Number, typ protowire.Type, field, value []byte) error {
		if num != unknownRaw || typ != protowire.BytesType {
			w.put(field)
			return nil
		}
		w.put(protowire.AppendTag(nil, unknownRaw, protowire.BytesType))
		width := len(field) - len(value) - protowire.SizeTag(unknownRaw)
		at := w.w
		w.w += width
		_ = protofields.Each(value, func(num protowire.Number, typ protowire.Type, field, value []byte) error {
			if num == listItems && typ == protowire.BytesType {
				w.item(field, value)
			} else {
				w.put(field)
			}
			return nil
		})
		putPaddedVarint(body[at:at+width], uint64(w.w-at-width))
		return nil
	})
	return body[:w.w], true
}

// cutter writes a cut list into buf at w, behind what is still to be read.
type cutter struct {
	buf        []byte
	w          int
	annotation []byte
	meta       []byte // the item's cut metadata, reused
}

// put writes b at w (b may be where it is read from, at or after w).
func (c *cutter) put(b []byte) {
	c.w += copy(c.buf[c.w:], b)
}

// item writes the list item field holding item, without its metadata's managed fields and
// annotation; an item it cannot read (or whose metadata comes in two parts, which a decoder
// would merge) is written as it came. The metadata is cut first, aside: the item's length, which
// comes before it, depends on it.
func (c *cutter) item(field, item []byte) {
	var meta []byte
	c.meta = c.meta[:0]
	err := protofields.Each(item, func(num protowire.Number, typ protowire.Type, f, value []byte) error {
		if num != objectMeta || typ != protowire.BytesType {
			return nil
		}
		if meta != nil {
			return errMalformed
		}
		meta = f
		var err error
		c.meta, err = appendMeta(c.meta[:0], value, c.annotation)
		return err
	})
	if err != nil || meta == nil {
		c.put(field)
		return
	}
	size := len(item) + protowire.SizeTag(objectMeta) + protowire.SizeBytes(len(c.meta)) - len(meta)
	var head [2 * binary.MaxVarintLen64]byte
	c.put(protowire.AppendVarint(protowire.AppendTag(head[:0], listItems, protowire.BytesType), uint64(size)))
	_ = protofields.Each(item, func(num protowire.Number, typ protowire.Type, f, _ []byte) error {
		if num == objectMeta && typ == protowire.BytesType {
			c.put(protowire.AppendVarint(protowire.AppendTag(head[:0], objectMeta, protowire.BytesType), uint64(len(c.meta))))
			c.put(c.meta)
		} else {
			c.put(f)
		}
		return nil
	})
}

// putPaddedVarint writes v as a varint of exactly len(b) bytes.
func putPaddedVarint(b []byte, v uint64) {
	for i := range b {
		b[i] = byte(v & 0x7f)
		if i < len(b)-1 {
			b[i] |= 0x80
		}
		v >>= 7
	}
}

// listRaw is the object the envelope env (a runtime.Unknown) holds, when its kind is a list.
func listRaw(env []byte) (raw []byte, isList bool) {
	var kind []byte
	err := protofields.Each(env, func(num protowire.Number, typ protowire.Type, _, value []byte) error {
		switch {
		case typ != protowire.BytesType:
		case num == unknownRaw:
			if raw != nil {
				return errMalformed // the object in two parts: not the apiserver's
			}
			raw = value
		case num == unknownTypeMeta:
			return protofields.Each(value, func(num protowire.Number, typ protowire.Type, _, value []byte) error {
				if num == typeMetaKind && typ == protowire.BytesType {
					kind = value
				}
				return nil
			})
		}
		return nil
	})
	return raw, err == nil && raw != nil && bytes.HasSuffix(kind, []byte("List"))
}

// appendMeta appends the ObjectMeta fields of meta to dst but its managed fields and its
// annotation named annotation.
func appendMeta(dst, meta, annotation []byte) ([]byte, error) {
	err := protofields.Each(meta, func(num protowire.Number, typ protowire.Type, field, value []byte) error {
		switch {
		case num == metaManaged:
			return nil
		case num == metaAnnotations && typ == protowire.BytesType:
			var key []byte
			if err := protofields.Each(value, func(num protowire.Number, typ protowire.Type, _, value []byte) error {
				if num == mapKey && typ == protowire.BytesType {
					key = value
				}
				return nil
			}); err != nil {
				return err
			}
			if bytes.Equal(key, annotation) {
				return nil
			}
		}
		dst = append(dst, field...)
		return nil
	})
	return dst, err
}
