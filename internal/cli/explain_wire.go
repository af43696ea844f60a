package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// This file reads the two large lists of a claim's local explanation, claims and volumes,
// from their protobuf encoding without decoding every object: of most objects the explanation
// needs a few fields (whose claim a volume names, which volume a claim names), and decoding the
// whole of 200,000 objects, managed fields and annotations included, only to drop them was most
// of the read's CPU and all of its garbage. Each item is scanned for those fields first and
// decoded whole (by its generated Unmarshal) only when it is kept.

// pageReader opens one page of the cluster-wide list of resource ("persistentvolumeclaims" or
// "persistentvolumes"), as the apiserver sends it: protobuf when it can, else JSON (readItems
// reads both).
type pageReader func(ctx context.Context, resource string, o metav1.ListOptions) (io.ReadCloser, error)

// restPages opens pages through c, a client of the core group whose requests accept protobuf.
func restPages(c rest.Interface) pageReader {
	return func(ctx context.Context, resource string, o metav1.ListOptions) (io.ReadCloser, error) {
		return c.Get().Resource(resource).VersionedParams(&o, scheme.ParameterCodec).Stream(ctx)
	}
}

// batchBytes and batches bound what eachItems holds of the lists: items are read into batches
// of about batchBytes (one item larger than that makes a batch of its own), of which it holds
// batches: the one f reads, the next, handed over when f is done, and the one being read.
const (
	batchBytes = 1 << 20
	batches    = 3
)

// eachItems reads the cluster-wide list of resource, of kind, through pages, limit objects a
// page, and calls f with its items (each a protobuf encoding, valid only during the call), in
// order, a batch at a time. A page is read as it streams in, never held whole: a reader goroutine
// reads items into batches while f reads the ones before, and asks for the next page as soon as
// it has read the last, so that the apiserver's work, the network and the client's overlap. It
// holds at most batches batches (about 3 MB, whatever the page size).
func eachItems(ctx context.Context, pages pageReader, resource, kind string, limit int64, f func(items [][]byte) error) error {
	readCtx, cancel := context.WithCancel(ctx)
	var reader sync.WaitGroup
	defer reader.Wait() // so that nothing reads through pages once this returns
	defer cancel()      // ends the reader when f fails
	r := &batchReader{ctx: readCtx, pages: pages, resource: resource, kind: kind, limit: limit,
		out: make(chan itemBatch), free: make(chan []byte, batches)}
	for range batches {
		r.free <- nil // grown as items are read into it, then reused
	}
	reader.Go(r.run)
	for b := range r.out {
		if b.err != nil {
			return b.err
		}
		if err := f(b.items); err != nil {
			return err
		}
		r.free <- b.arena
	}
	return ctx.Err() // the reader stops without a batch when ctx ends
}

// itemBatch is a batch of a list's items that eachItems hands to its caller.
type itemBatch struct {
	arena []byte // the items' bytes
	items [][]byte
	err   error
}

// batchReader is eachItems' reader goroutine: it reads the list's pages into batches, taking
// arenas from free and handing full batches to out.
type batchReader struct {
	ctx            context.Context
	pages          pageReader
	resource, kind string
	limit          int64
	out            chan itemBatch
	free           chan []byte
	cur            itemBatch
}

// take starts the next batch in a free arena; false when the read is cancelled.
func (r *batchReader) take() bool {
	select {
	case a := <-r.free:
		r.cur = itemBatch{arena: a[:0]}
		return true
	case <-r.ctx.Done():
		return false
	}
}

// send hands the current batch over; false when the read is cancelled.
func (r *batchReader) send() bool {
	select {
	case r.out <- r.cur:
		return true
	case <-r.ctx.Done():
		return false
	}
}

// run reads every page into batches until the list ends, fails or is cancelled, then closes out.
func (r *batchReader) run() {
	defer close(r.out)
	if !r.take() {
		return
	}
	br := bufio.NewReaderSize(nil, 64<<10)
	o := metav1.ListOptions{Limit: r.limit}
	for {
		next, err := r.readPage(br, o)
		if err != nil {
			r.cur.err = err
			r.send()
			return
		}
		// A page's last items are handed over as a batch of their own, for f to read while
		// the next page is asked for.
		if len(r.cur.items) > 0 && (!r.send() || !r.take()) {
			return
		}
		if next == "" {
			return
		}
		o.Continue = next
	}
}

// readPage reads the page o asks for into batches, handing each full one over, and returns the
// list's continue token.
func (r *batchReader) readPage(br *bufio.Reader, o metav1.ListOptions) (string, error) {
	body, err := r.pages(r.ctx, r.resource, o)
	if err != nil {
		return "", err
	}
	defer func() { _ = body.Close() }()
	br.Reset(body)
	return readItems(br, r.kind, &r.cur.arena, func(item []byte) error {
		r.cur.items = append(r.cur.items, item)
		if len(r.cur.arena) < batchBytes {
			return nil
		}
		if !r.send() || !r.take() {
			return r.ctx.Err()
		}
		return nil
	})
}

// protobufMagic starts the apiserver's protobuf encoding of an object (apimachinery's protobuf
// serializer): a runtime.Unknown holding the object's encoding follows, its fields in order
// (typeMeta, raw, contentEncoding, contentType).
var protobufMagic = []byte{0x6b, 0x38, 0x73, 0x00}

// readItems reads an encoded list of kind from r, item by item, appending each item's protobuf
// encoding to *arena and calling item with it (which may replace *arena), and returns the list's
// continue token. A list in JSON (a server that does not speak protobuf) is read whole and each
// item encoded in protobuf, so that one path reads both.
func readItems(r *bufio.Reader, kind string, arena *[]byte, item func([]byte) error) (next string, err error) {
	head, err := r.Peek(len(protobufMagic))
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("reading a %s: %w", kind, err)
	}
	if !bytes.Equal(head, protobufMagic) {
		body, err := io.ReadAll(r)
		if err != nil {
			return "", fmt.Errorf("reading a %s: %w", kind, err)
		}
		items, next, err := jsonListItems(body, kind)
		if err != nil {
			return "", err
		}
		for _, b := range items {
			if err := item(b); err != nil {
				return "", err
			}
		}
		return next, nil
	}
	_, _ = r.Discard(len(protobufMagic))
	s := &stream{r: r, left: -1}
	var gotKind, encoding string
	listRead := false
	for {
		num, n, err := s.field()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", fmt.Errorf("decoding a %s: %w", kind, err)
		}
		switch num {
		case 1: // typeMeta
			b, err := s.appendN(nil, n)
			if err != nil {
				return "", fmt.Errorf("decoding a %s: %w", kind, err)
			}
			err = eachField(b, func(num protowire.Number, v []byte) error {
				if num == 2 { // kind
					gotKind = string(v)
				}
				return nil
			})
			if err != nil {
				return "", fmt.Errorf("decoding a %s: %w", kind, err)
			}
		case 2: // raw: the list
			if gotKind != kind {
				return "", fmt.Errorf("decoding a %s: the server sent a %q", kind, gotKind)
			}
			if next, err = s.list(n, arena, item); err != nil {
				return "", fmt.Errorf("decoding a %s: %w", kind, err)
			}
			listRead = true
		case 3: // contentEncoding
			b, err := s.appendN(nil, n)
			if err != nil {
				return "", fmt.Errorf("decoding a %s: %w", kind, err)
			}
			encoding = string(b)
		default:
			if err := s.skip(n); err != nil {
				return "", fmt.Errorf("decoding a %s: %w", kind, err)
			}
		}
	}
	switch {
	case !listRead:
		return "", fmt.Errorf("decoding a %s: no list in the answer", kind)
	case encoding != "":
		return "", fmt.Errorf("decoding a %s: content encoding %q", kind, encoding)
	}
	return next, nil
}

// stream reads protobuf fields from a buffered stream.
type stream struct {
	r *bufio.Reader
	// left is what is left of the message being read, -1 for the rest of the stream.
	left int64
}

// ReadByte reads one byte of the message: io.EOF at its end, io.ErrUnexpectedEOF when the
// stream ends before it.
func (s *stream) ReadByte() (byte, error) {
	if s.left == 0 {
		return 0, io.EOF
	}
	b, err := s.r.ReadByte()
	switch {
	case errors.Is(err, io.EOF) && s.left > 0:
		return 0, io.ErrUnexpectedEOF
	case err != nil:
		return 0, err
	}
	if s.left > 0 {
		s.left--
	}
	return b, nil
}

// field reads fields up to the next length-delimited one, and returns its number and length;
// other fields (scalars, which no reader here needs) are skipped. io.EOF at the message's end.
func (s *stream) field() (protowire.Number, int64, error) {
	for {
		tag, err := binary.ReadUvarint(s)
		if err != nil {
			return 0, 0, err // io.EOF only before a tag's first byte
		}
		num, typ := protowire.DecodeTag(tag)
		var skip int64
		switch typ {
		case protowire.BytesType:
			n, err := binary.ReadUvarint(s)
			switch {
			case err != nil:
				return 0, 0, unexpected(err)
			case n > math.MaxInt32 || s.left >= 0 && int64(n) > s.left:
				return 0, 0, fmt.Errorf("field %d: length %d beyond its message", num, n)
			}
			return num, int64(n), nil
		case protowire.VarintType:
			if _, err := binary.ReadUvarint(s); err != nil {
				return 0, 0, unexpected(err)
			}
			continue
		case protowire.Fixed32Type:
			skip = 4
		case protowire.Fixed64Type:
			skip = 8
		default:
			return 0, 0, fmt.Errorf("field %d: wire type %d not read", num, typ)
		}
		if err := s.skip(skip); err != nil {
			return 0, 0, err
		}
	}
}

// unexpected is err, but io.EOF within a field is io.ErrUnexpectedEOF.
func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// maxField is the largest field appendN reads: an object the apiserver stores is at most a few
// MB (etcd's request limit), so a larger length is a broken or hostile answer, not memory to
// allocate.
const maxField = 16 << 20

// appendN appends the next n bytes of the message to dst.
func (s *stream) appendN(dst []byte, n int64) ([]byte, error) {
	switch {
	case n > maxField:
		return nil, fmt.Errorf("a field of %d bytes, more than any object's", n)
	case s.left >= 0 && n > s.left:
		return nil, io.ErrUnexpectedEOF
	}
	start := len(dst)
	dst = slices.Grow(dst, int(n))[:start+int(n)]
	if _, err := io.ReadFull(s.r, dst[start:]); err != nil {
		return nil, unexpected(err)
	}
	if s.left > 0 {
		s.left -= n
	}
	return dst, nil
}

// skip skips the next n bytes of the message.
func (s *stream) skip(n int64) error {
	if s.left >= 0 && n > s.left {
		return io.ErrUnexpectedEOF
	}
	if _, err := s.r.Discard(int(n)); err != nil {
		return unexpected(err)
	}
	if s.left > 0 {
		s.left -= n
	}
	return nil
}

// list reads a list message of n bytes (ListMeta 1, items 2): each item into *arena, then item;
// it returns the continue token.
func (s *stream) list(n int64, arena *[]byte, item func([]byte) error) (next string, err error) {
	outer := s.left
	if outer >= 0 {
		outer -= n
	}
	s.left = n
	for {
		num, m, err := s.field()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", err
		}
		switch num {
		case 1: // metadata: ListMeta
			b, err := s.appendN(nil, m)
			if err != nil {
				return "", err
			}
			err = eachField(b, func(num protowire.Number, v []byte) error {
				if num == 3 { // continue
					next = string(v)
				}
				return nil
			})
			if err != nil {
				return "", err
			}
		case 2: // an item
			start := len(*arena)
			a, err := s.appendN(*arena, m)
			if err != nil {
				return "", err
			}
			*arena = a
			if err := item(a[start:]); err != nil {
				return "", err
			}
		default:
			if err := s.skip(m); err != nil {
				return "", err
			}
		}
	}
	s.left = outer
	return next, nil
}

// jsonListItems decodes a list of kind in JSON and encodes each of its items in protobuf.
func jsonListItems(body []byte, kind string) (items [][]byte, next string, err error) {
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, nil)
	if err != nil {
		return nil, "", fmt.Errorf("decoding a %s: %w", kind, err)
	}
	var encoded [][]byte
	switch l := obj.(type) {
	case *corev1.PersistentVolumeClaimList:
		for i := range l.Items {
			b, err := l.Items[i].Marshal()
			if err != nil {
				return nil, "", err
			}
			encoded = append(encoded, b)
		}
		next = l.Continue
	case *corev1.PersistentVolumeList:
		for i := range l.Items {
			b, err := l.Items[i].Marshal()
			if err != nil {
				return nil, "", err
			}
			encoded = append(encoded, b)
		}
		next = l.Continue
	default:
		return nil, "", fmt.Errorf("decoding a %s: the server sent a %T", kind, obj)
	}
	if obj.GetObjectKind().GroupVersionKind().Kind != kind {
		return nil, "", fmt.Errorf("decoding a %s: the server sent a %q", kind, obj.GetObjectKind().GroupVersionKind().Kind)
	}
	return encoded, next, nil
}
