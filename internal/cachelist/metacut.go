package cachelist

import (
	"bytes"
	"encoding/binary"
	"errors"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/pvguard/pvguard/internal/protofields"
)

// This file is the list cut a PageReader makes before decoding a page: each item's
// metadata.managedFields and one annotation removed from the protobuf bytes, in place.

// protobufMagic opens every protobuf-encoded object the apiserver sends
// (k8s.io/apimachinery/pkg/runtime/serializer/protobuf).
var protobufMagic = []byte{0x6b, 0x38, 0x73, 0x00}

// The fields cutList reads, as k8s.io/apimachinery's generated.proto numbers them.
const (
	unknownTypeMeta = 1 // runtime.Unknown: the encoded object's apiVersion and kind
	unknownRaw      = 2 // runtime.Unknown: the object
	typeMetaKind    = 2
	listMeta        = 1  // every List: its ListMeta
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
// fields and their annotation named annotation, and the result is body's first len(cut) bytes;
// items is how many items the list holds. ok is false, and body is left as it came, when body is
// not a list it can read.
//
// Each field is written where it was read or before, never past what is still to be read: a cut
// field is never longer than it was. The list's own length, which comes before its items, is
// kept as wide as it was (a varint padded with empty continuation bytes, which protobuf decoders
// read as the same number), so that the items need not move twice.
func cutList(body, annotation []byte) (cut []byte, items int, ok bool) {
	env, found := bytes.CutPrefix(body, protobufMagic)
	if !found {
		return nil, 0, false
	}
	raw, isList := listRaw(env)
	if !isList {
		return nil, 0, false
	}
	// The list's own fields are read first, so that a list that cannot be read is not half cut;
	// an item that cannot be read is copied as it came (cutter.item).
	if protofields.Each(raw, func(num protowire.Number, typ protowire.Type, _, _ []byte) error {
		if num == listItems && typ == protowire.BytesType {
			items++
		}
		return nil
	}) != nil {
		return nil, 0, false
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
	return body[:w.w], items, true
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
