package protofields_test

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/pvguard/pvguard/internal/protofields"
)

type field struct {
	num          protowire.Number
	typ          protowire.Type
	field, value []byte
}

func TestEach(t *testing.T) {
	varint := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 300)
	text := protowire.AppendString(protowire.AppendTag(nil, 2, protowire.BytesType), "pv-1")
	fixed := protowire.AppendFixed32(protowire.AppendTag(nil, 3, protowire.Fixed32Type), 7)
	cases := []struct {
		name string
		msg  []byte
		want []field
		fail bool
	}{
		{name: "empty"},
		{name: "three kinds", msg: bytes.Join([][]byte{varint, text, fixed}, nil), want: []field{
			{1, protowire.VarintType, varint, nil},
			{2, protowire.BytesType, text, []byte("pv-1")},
			{3, protowire.Fixed32Type, fixed, nil},
		}},
		{name: "truncated contents", msg: append(slices.Clone(varint), text[:len(text)-1]...), want: []field{
			{1, protowire.VarintType, varint, nil},
		}, fail: true},
		{name: "a wire type that does not exist", msg: []byte{0x0f}, fail: true},
		{name: "a tag cut short", msg: []byte{0x80}, fail: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got []field
			err := protofields.Each(c.msg, func(num protowire.Number, typ protowire.Type, f, v []byte) error {
				got = append(got, field{num, typ, f, v})
				return nil
			})
			if (err != nil) != c.fail {
				t.Fatalf("error %v, want failure %v", err, c.fail)
			}
			if len(got) != len(c.want) {
				t.Fatalf("%d fields, want %d: %+v", len(got), len(c.want), got)
			}
			for i := range got {
				g, w := got[i], c.want[i]
				if g.num != w.num || g.typ != w.typ || !bytes.Equal(g.field, w.field) || !bytes.Equal(g.value, w.value) {
					t.Fatalf("field %d: %+v, want %+v", i, g, w)
				}
			}
		})
	}
}

func TestEachStopsAtTheFirstError(t *testing.T) {
	msg := bytes.Repeat(protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 1), 3)
	stop, calls := errors.New("stop"), 0
	err := protofields.Each(msg, func(protowire.Number, protowire.Type, []byte, []byte) error {
		calls++
		return stop
	})
	if !errors.Is(err, stop) || calls != 1 {
		t.Fatalf("error %v after %d calls, want %v after one", err, calls, stop)
	}
}
