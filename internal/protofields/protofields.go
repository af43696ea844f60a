// Package protofields walks the fields of a protobuf-encoded message without decoding it: the
// apiserver's protobuf lists are read this way where only a few fields are wanted (the explain
// CLI's scan of every volume and claim) or a few are cut before client-go decodes the rest (the
// informers' lists).
package protofields

import "google.golang.org/protobuf/encoding/protowire"

// Each calls f with each field of the message b, in order: its number and wire type, the whole
// field as encoded (tag included) and, for a length-delimited one, its contents (nil for the
// others). It stops at the first error f returns, and fails on a field it cannot read
// (protowire.ParseError).
func Each(b []byte, f func(num protowire.Number, typ protowire.Type, field, value []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		var value []byte
		var m int
		if typ == protowire.BytesType {
			value, m = protowire.ConsumeBytes(b[n:])
		} else {
			m = protowire.ConsumeFieldValue(num, typ, b[n:])
		}
		if m < 0 {
			return protowire.ParseError(m)
		}
		if err := f(num, typ, b[:n+m], value); err != nil {
			return err
		}
		b = b[n+m:]
	}
	return nil
}
