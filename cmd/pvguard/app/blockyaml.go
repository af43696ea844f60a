package app

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// toJSON converts a YAML document written in the block style that kubectl and most
// hand-written manifests use to exactly the JSON sigs.k8s.io/yaml.YAMLToJSON makes of it
// (compact, keys sorted, strings escaped as encoding/json escapes them), appending it to dst.
// It reads block mappings and sequences, plain and quoted scalars (also over several lines, as
// go-yaml folds long ones), literal block scalars (| and |-, as kubectl writes
// last-applied-configuration), flow sequences of scalars on one line, {}, and comments. It
// reports false, having judged nothing, for anything else: other flow collections, folded
// block scalars, anchors, aliases, tags, directives, tabs, duplicate keys, blank lines inside
// flow scalars, and every plain scalar YAML 1.1 would read as other than a string, an integer
// written plainly, true, false or null (yes, on, 1.5, 0x1F, 2026-01-01, .inf, and so on). The
// caller then converts the document with YAMLToJSON, so the result, and every error, is the
// same either way.
//
// YAML is the slow part of auditing manifests: go-yaml builds a node tree, then a tree of
// interfaces, which encoding/json walks again; two thirds of the CPU of auditing 100k objects
// from YAML files went there. This reads each line once.
//
// c holds buffers for the next call; its zero value is ready.
func (c *blockYAML) toJSON(dst, doc []byte) ([]byte, bool) {
	*c = blockYAML{out: dst, lines: c.lines[:0], ents: c.ents[:0], key: c.key[:0], val: c.val[:0]}
	if !yamlText(doc) {
		return dst, false
	}
	c.split(doc)
	c.skip()
	if c.i < len(c.lines) && c.lines[c.i].indent == 0 && bytes.HasPrefix(c.lines[c.i].text, []byte("---")) {
		// The document reader leaves a first "---" line in, perhaps with a comment.
		if t := c.lines[c.i].text; len(t) > 3 && !(t[3] == ' ' && bytes.TrimLeft(t[3:], " ")[0] == '#') {
			return dst, false
		}
		c.i++
		c.skip()
	}
	for _, ln := range c.lines[c.i:] {
		if ln.indent == 0 && (bytes.HasPrefix(ln.text, []byte("---")) || bytes.HasPrefix(ln.text, []byte("..."))) {
			return dst, false // a document marker, or close enough to one
		}
	}
	if c.i == len(c.lines) || c.lines[c.i].indent != 0 || !c.block(0, 0) {
		return dst, false
	}
	if c.skip(); c.i != len(c.lines) {
		return dst, false
	}
	return c.out, true
}

// blockMaxKey is the longest key read, in bytes: YAML takes a longer one (over 1024 characters)
// for no key at all.
const blockMaxKey = 1000

// blockMaxDepth bounds nesting; storage objects are a few levels deep.
const blockMaxDepth = 64

type blockLine struct {
	indent int    // leading spaces
	text   []byte // after them, without trailing spaces; empty for a blank line
	raw    []byte // the whole line, without its line break
}

type blockEntry struct {
	key        []byte // the key as a Go string, unescaped
	start, end int    // the entry's JSON ("key":value) in out
}

type blockYAML struct {
	lines []blockLine
	i     int // the next line
	out   []byte
	ents  []blockEntry // a stack of the entries of the mappings being read
	key   []byte       // unescaped quoted keys
	val   []byte       // scalars' values
	// broken says the document's last line ends in a line break.
	broken bool
}

func (c *blockYAML) split(doc []byte) {
	c.broken = len(doc) > 0 && (doc[len(doc)-1] == '\n' || doc[len(doc)-1] == '\r') // a lone \r ends a line too
	for len(doc) > 0 {
		line := doc
		if i := bytes.IndexByte(doc, '\n'); i >= 0 {
			line, doc = doc[:i], doc[i+1:]
		} else {
			doc = nil
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		text := bytes.TrimLeft(line, " ")
		indent := len(line) - len(text)
		c.lines = append(c.lines, blockLine{indent: indent, text: bytes.TrimRight(text, " "), raw: line})
	}
}

// skip moves past blank lines and comments.
func (c *blockYAML) skip() {
	for c.i < len(c.lines) && (len(c.lines[c.i].text) == 0 || c.lines[c.i].text[0] == '#') {
		c.i++
	}
}

// line is the next line that holds something, if it is indented by at least min.
func (c *blockYAML) line(min int) (blockLine, bool) {
	c.skip()
	if c.i == len(c.lines) || c.lines[c.i].indent < min {
		return blockLine{}, false
	}
	return c.lines[c.i], true
}

func seqItem(text []byte) bool {
	return text[0] == '-' && (len(text) == 1 || text[1] == ' ')
}

// block reads the mapping or sequence whose first line, the next, is at indent.
func (c *blockYAML) block(indent, depth int) bool {
	if depth > blockMaxDepth {
		return false
	}
	if seqItem(c.lines[c.i].text) {
		return c.seq(indent, depth)
	}
	return c.mapping(indent, depth)
}

// nested reads the value of a key or sequence item that ends its line: the block on the lines
// below, more indented than indent, or (for a key, sameSeq) a sequence at indent, as kubectl
// writes them; or null.
func (c *blockYAML) nested(indent, depth int, sameSeq bool) bool {
	if next, ok := c.line(indent); ok {
		if next.indent > indent {
			return c.block(next.indent, depth+1)
		}
		if sameSeq && seqItem(next.text) {
			return c.seq(indent, depth+1)
		}
	}
	c.out = append(c.out, "null"...)
	return true
}

// ended says nothing more indented than indent follows a scalar (a continuation would be).
func (c *blockYAML) ended(indent int) bool {
	_, more := c.line(indent + 1)
	return !more
}

func (c *blockYAML) mapping(indent, depth int) bool {
	start, base := len(c.out), len(c.ents)
	defer func() { c.ents = c.ents[:base] }()
	c.out = append(c.out, '{')
	for {
		ln, ok := c.line(indent)
		if !ok || ln.indent == indent && seqItem(ln.text) {
			break
		}
		if ln.indent > indent {
			return false // bad indentation
		}
		key, rest, isKey, ok := c.splitKey(ln.text)
		if !isKey || !ok {
			return false
		}
		if len(c.ents) > base {
			c.out = append(c.out, ',')
		}
		estart := len(c.out)
		c.out = append(appendJSONString(c.out, key), ':')
		if len(rest) == 0 {
			c.i++
			if !c.nested(indent, depth, true) {
				return false
			}
		} else if !c.scalar(rest, indent) || !c.ended(indent) {
			return false
		}
		c.ents = append(c.ents, blockEntry{key: key, start: estart, end: len(c.out)})
	}
	c.out = append(c.out, '}')
	// encoding/json writes a map's keys sorted. kubectl writes them so; a YAML mapping written
	// by hand may hold them in any order, and its entries are then put in order.
	ents := c.ents[base:]
	cmp := func(a, b blockEntry) int { return bytes.Compare(a.key, b.key) }
	if !slices.IsSortedFunc(ents, cmp) {
		slices.SortStableFunc(ents, cmp)
		end := len(c.out)
		c.out = append(c.out, '{')
		for i, e := range ents {
			if i > 0 {
				c.out = append(c.out, ',')
			}
			c.out = append(c.out, c.out[e.start:e.end]...)
		}
		c.out = append(c.out, '}')
		n := copy(c.out[start:], c.out[end:])
		c.out = c.out[:start+n]
	}
	for i := 1; i < len(ents); i++ {
		if bytes.Equal(ents[i].key, ents[i-1].key) {
			return false // go-yaml keeps the last; left to it
		}
	}
	return true
}

func (c *blockYAML) seq(indent, depth int) bool {
	c.out = append(c.out, '[')
	for first := true; ; first = false {
		ln, ok := c.line(indent)
		if !ok || ln.indent == indent && !seqItem(ln.text) {
			break // the next key of the mapping the sequence is in, or the sequence's end
		}
		if ln.indent > indent {
			return false
		}
		if !first {
			c.out = append(c.out, ',')
		}
		body := bytes.TrimLeft(ln.text[1:], " ")
		if len(body) == 0 || body[0] == '#' {
			c.i++
			if !c.nested(indent, depth, false) {
				return false
			}
			continue
		}
		if seqItem(body) {
			return false // "- - x"
		}
		if _, _, isKey, ok := c.splitKey(body); isKey {
			if !ok {
				return false
			}
			// "- key: value": a mapping whose keys line up with this one's.
			c.lines[c.i].indent, c.lines[c.i].text = indent+len(ln.text)-len(body), body
			if !c.mapping(c.lines[c.i].indent, depth+1) {
				return false
			}
			continue
		}
		if !c.scalar(body, indent) || !c.ended(indent) {
			return false
		}
	}
	c.out = append(c.out, ']')
	return true
}

// splitKey reads "key: rest" or "key:". isKey says the line is a mapping entry; ok, that this
// one can be read here (its key is a string). rest is empty when the value is on later lines.
func (c *blockYAML) splitKey(text []byte) (key, rest []byte, isKey, ok bool) {
	var after []byte
	switch text[0] {
	case '"', '\'':
		var closed bool
		c.key, after, closed, ok = unquote(c.key[:0], text[1:], text[0])
		if !ok || !closed || len(after) == 0 || after[0] != ':' || len(after) > 1 && after[1] != ' ' {
			return nil, nil, false, true // a quoted scalar, not a key (or not one read here)
		}
		if !printable(c.key, false) {
			return nil, nil, true, false
		}
		key = bytes.Clone(c.key)
		after = after[1:]
	default:
		end := -1
		for j := 0; j < len(text); j++ {
			if text[j] == ':' && (j+1 == len(text) || text[j+1] == ' ') {
				end = j
				break
			}
			if text[j] == '#' && j > 0 && text[j-1] == ' ' {
				break // a comment
			}
		}
		if end < 0 {
			return nil, nil, false, true
		}
		key = text[:end]
		if len(key) == 0 || key[len(key)-1] == ' ' || !plainString(key) {
			return nil, nil, true, false
		}
		after = text[end+1:]
	}
	if len(text)-len(after) > blockMaxKey {
		return nil, nil, true, false
	}
	rest = bytes.TrimLeft(after, " ")
	if len(rest) > 0 && rest[0] == '#' {
		if len(rest) == len(after) {
			return nil, nil, true, false
		}
		rest = nil
	}
	return key, rest, true, true
}

// scalar appends the JSON of the value that starts with text on the next line, reading the
// lines it continues on (more indented than indent).
func (c *blockYAML) scalar(text []byte, indent int) bool {
	c.i++
	switch text[0] {
	case '"', '\'':
		val, after, closed, ok := unquote(c.val[:0], text[1:], text[0])
		for ok && !closed {
			// Folded: the line break and the indentation are one space.
			if c.i == len(c.lines) || len(c.lines[c.i].text) == 0 || c.lines[c.i].indent <= indent {
				return false // a blank line (a newline in the value) or bad indentation
			}
			val, after, closed, ok = unquote(append(val, ' '), c.lines[c.i].text, text[0])
			c.i++
		}
		c.val = val
		if !ok || !endOfLine(after) || !printable(val, true) {
			return false
		}
		c.out = appendJSONString(c.out, val)
		return true
	case '[':
		return c.flowSeq(text)
	case '{':
		if len(text) >= 2 && text[1] == '}' && endOfLine(text[2:]) {
			c.out = append(c.out, "{}"...)
			return true
		}
		return false
	case '|':
		return c.literal(text, indent)
	}
	// A plain scalar ends at a comment, or continues on more indented lines.
	commented := false
	for j := 1; j < len(text); j++ {
		if text[j] == '#' && text[j-1] == ' ' {
			text, commented = bytes.TrimRight(text[:j], " "), true
			break
		}
	}
	val := append(c.val[:0], text...)
	for !commented && c.i < len(c.lines) {
		next := c.lines[c.i]
		if len(next.text) == 0 || next.indent <= indent || next.text[0] == '#' {
			break
		}
		if bytes.Contains(next.text, []byte(" #")) {
			return false
		}
		val = append(append(val, ' '), next.text...)
		c.i++
	}
	c.val = val
	if bytes.Contains(val, []byte(": ")) || val[len(val)-1] == ':' || bytes.IndexByte(val, '\t') >= 0 {
		return false
	}
	return c.plain(val, len(val) == len(text))
}

// plain appends the JSON of a plain scalar: a string, or, written on one line, an integer, a
// boolean or null.
func (c *blockYAML) plain(val []byte, oneLine bool) bool {
	if oneLine {
		switch string(val) {
		case "true", "false", "null":
			c.out = append(c.out, val...)
			return true
		case "~":
			c.out = append(c.out, "null"...)
			return true
		}
		if plainInteger(val) {
			c.out = append(c.out, val...)
			return true
		}
	}
	if !plainString(val) {
		return false
	}
	c.out = appendJSONString(c.out, val)
	return true
}

// flowSeq appends the JSON of a flow sequence of scalars on one line, such as
// [ReadWriteOnce, "ReadOnlyMany"]. Nested collections, plain scalars with a quote, colon or #
// in them, and empty items are declined.
func (c *blockYAML) flowSeq(text []byte) bool {
	c.out = append(c.out, '[')
	i := 1
	for n := 0; ; n++ {
		for i < len(text) && text[i] == ' ' {
			i++
		}
		if i == len(text) {
			return false // continued on the next line
		}
		if text[i] == ']' && n == 0 {
			i++
			break
		}
		if n > 0 {
			c.out = append(c.out, ',')
		}
		if q := text[i]; q == '"' || q == '\'' {
			val, after, closed, ok := unquote(c.val[:0], text[i+1:], q)
			c.val = val
			if !ok || !closed || !printable(val, true) {
				return false
			}
			c.out = appendJSONString(c.out, val)
			i = len(text) - len(after)
		} else {
			j := i
			for j < len(text) && text[j] != ',' && text[j] != ']' {
				if bytes.IndexByte([]byte("[]{}#:\"'"), text[j]) >= 0 {
					return false
				}
				j++
			}
			item := bytes.TrimRight(text[i:j], " ")
			if len(item) == 0 || !c.plain(item, true) {
				return false
			}
			i = j
		}
		for i < len(text) && text[i] == ' ' {
			i++
		}
		if i < len(text) && text[i] == ',' {
			i++
			continue
		}
		if i < len(text) && text[i] == ']' {
			i++
			break
		}
		return false
	}
	c.out = append(c.out, ']')
	return endOfLine(text[i:])
}

// literal reads a literal block scalar ("|", or "|-" without its last line break): the lines
// below, more indented than indent, as they are.
func (c *blockYAML) literal(header []byte, indent int) bool {
	strip := len(header) > 1 && header[1] == '-'
	if rest := header[1:]; strip {
		header = rest
	}
	if !endOfLine(header[1:]) {
		return false // |+, an indentation indicator, or anything else
	}
	if c.i == len(c.lines) || len(c.lines[c.i].text) == 0 || c.lines[c.i].indent <= indent {
		return false // leading blank lines, or nothing
	}
	n := c.lines[c.i].indent
	val, blanks, last := c.val[:0], 0, 0
	for ; c.i < len(c.lines); c.i++ {
		ln := c.lines[c.i]
		if len(bytes.TrimLeft(ln.raw, " ")) == 0 {
			if len(ln.raw) > n {
				return false // spaces beyond the indentation are content; left to go-yaml
			}
			blanks++
			continue
		}
		if ln.text[0] == '\t' {
			return false // a tab where go-yaml wants indentation
		}
		if ln.indent < n {
			if ln.indent > indent {
				return false // less indented than the first line
			}
			break
		}
		if len(val) > 0 {
			val = append(val, '\n')
		}
		for ; blanks > 0; blanks-- {
			val = append(val, '\n')
		}
		val, last = append(val, ln.raw[n:]...), c.i
	}
	// Clipped, the value keeps the line break after its last line, if that line has one.
	if !strip && (last < len(c.lines)-1 || c.broken) {
		val = append(val, '\n')
	}
	c.val = val
	if !printable(val, true) {
		return false
	}
	c.out = appendJSONString(c.out, val)
	return true
}

// endOfLine says nothing but a comment follows a quoted scalar.
func endOfLine(after []byte) bool {
	rest := bytes.TrimLeft(after, " ")
	return len(rest) == 0 || rest[0] == '#' && len(rest) < len(after)
}

// plainInteger is an integer YAML 1.1 reads as written: no sign, no leading zero (octal), no
// underscores, and small enough for an int64.
func plainInteger(s []byte) bool {
	if len(s) == 0 || len(s) > 18 || s[0] == '0' && len(s) > 1 {
		return false
	}
	for _, b := range s {
		if b < '0' || b > '9' {
			return false
		}
	}
	return true
}

// plainString says a plain scalar is a string to YAML 1.1 as go-yaml v2 resolves it, and one
// that is sure to be: it does not start with an indicator or a sign, nor with a dot unless it is
// no float; if it starts with a digit, it is no number of any base or form and no date (so
// 100Gi and a uid are strings, 1e3 and 2026-01-01 are not); it is not one of the words YAML
// reads as a boolean, null or merge key; and it is printable text that encoding/json leaves
// unchanged or escapes simply.
func plainString(s []byte) bool {
	switch s[0] {
	case '-', '?', ':', ',', '[', ']', '{', '}', '#', '&', '*', '!', '|', '>', '\'', '"', '%', '@', '`', '+', '~':
		return false
	case '.':
		// A float (.5, .inf, .NaN) or a string (".", as managedFields writes "." keys).
		if _, err := strconv.ParseFloat(string(s), 64); err == nil || bytes.EqualFold(s, []byte(".inf")) || bytes.EqualFold(s, []byte(".nan")) {
			return false
		}
	}
	if s[0] >= '0' && s[0] <= '9' && !digitString(string(s)) {
		return false
	}
	switch string(s) {
	case "y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "on", "On", "ON", "off", "Off", "OFF",
		"true", "True", "TRUE", "false", "False", "FALSE", "null", "Null", "NULL", "<<":
		return false
	}
	return printable(s, false)
}

// yamlDateLayouts are the forms of date go-yaml v2 reads a plain scalar that starts YYYY- as.
var yamlDateLayouts = []string{"2006-1-2T15:4:5.999999999Z07:00", "2006-1-2t15:4:5.999999999Z07:00", "2006-1-2 15:4:5.999999999", "2006-1-2"}

// digitString says a plain scalar that starts with a digit is none of what go-yaml v2 tries
// before taking it for a string: a date (in one of its layouts), an integer of any base (underscores
// ignored), a float, a binary number. ParseFloat reads more forms than YAML's floats do; those
// are declined too.
func digitString(s string) bool {
	// Most are sure to be strings at a glance: a letter no number or date has (100Gi, a uid).
	for i := 0; i < len(s); i++ {
		if b := s[i] | 0x20; b >= 'a' && b <= 'z' && !strings.ContainsRune("abcdefotxz", rune(b)) {
			return true
		}
	}
	if len(s) > 4 && s[4] == '-' && strings.IndexFunc(s[:4], func(r rune) bool { return r < '0' || r > '9' }) < 0 {
		for _, layout := range yamlDateLayouts {
			if _, err := time.Parse(layout, s); err == nil {
				return false
			}
		}
	}
	plain := strings.ReplaceAll(s, "_", "")
	if _, err := strconv.ParseInt(plain, 0, 64); err == nil {
		return false
	}
	if _, err := strconv.ParseUint(plain, 0, 64); err == nil {
		return false
	}
	if _, err := strconv.ParseFloat(plain, 64); err == nil {
		return false
	}
	return !strings.HasPrefix(plain, "0b")
}

// yamlText says go-yaml reads the whole document, comments too, as text with only the line
// breaks split knows: valid UTF-8 of the characters YAML allows, with no control characters but
// tab and line feed, no carriage return but before a line feed, and none of YAML 1.1's other
// line breaks.
func yamlText(doc []byte) bool {
	for i := 0; i < len(doc); {
		b := doc[i]
		if b < utf8.RuneSelf {
			if b < 0x20 && b != '\t' && b != '\n' && b != '\r' || b == 0x7f {
				return false
			}
			if b == '\r' && i+1 < len(doc) && doc[i+1] != '\n' {
				return false // a line break of its own
			}
			i++
			continue
		}
		r, n := utf8.DecodeRune(doc[i:])
		// NEL, LS and PS are line breaks to go-yaml, even in a comment.
		if r == utf8.RuneError || r < 0xa0 || r == 0x2028 || r == 0x2029 || r >= 0xd800 && r < 0xe000 || r >= 0xfffe && r < 0x10000 {
			return false
		}
		i += n
	}
	return true
}

// printable is text go-yaml accepts and encoding/json writes without replacing anything: no
// control characters, valid UTF-8 of printable characters, and none of YAML 1.1's other line
// breaks (U+0085, U+2028, U+2029). breaks allows \t, \n and \r, which a quoted scalar's escapes
// and a block scalar's lines put in a value, and encoding/json escapes as such.
func printable(s []byte, breaks bool) bool {
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if (b < 0x20 || b == 0x7f) && !(breaks && (b == '\t' || b == '\n' || b == '\r')) {
				return false
			}
			i++
			continue
		}
		r, n := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError || r < 0xa0 || r == 0x2028 || r == 0x2029 || r >= 0xd800 && r < 0xe000 || r == 0xfeff || r >= 0xfffe && r < 0x10000 {
			return false
		}
		i += n
	}
	return true
}

// unquote reads a quoted scalar's text up to its closing quote q, appending its value to dst;
// closed is false if it continues on the next line. Double-quoted scalars may use the escapes
// \" \\ \/ \n \t and \r; ok is false for any other, or a line ending in one.
func unquote(dst, text []byte, q byte) (value, after []byte, closed, ok bool) {
	for i := 0; i < len(text); i++ {
		b := text[i]
		switch {
		case b == q && q == '\'' && i+1 < len(text) && text[i+1] == '\'':
			dst = append(dst, '\'')
			i++
		case b == q:
			return dst, text[i+1:], true, true
		case b == '\\' && q == '"':
			if i+1 == len(text) {
				return dst, nil, false, false
			}
			i++
			switch text[i] {
			case '"', '\\', '/':
				dst = append(dst, text[i])
			case 'n':
				dst = append(dst, '\n')
			case 't':
				dst = append(dst, '\t')
			case 'r':
				dst = append(dst, '\r')
			default:
				return dst, nil, false, false
			}
		default:
			dst = append(dst, b)
		}
	}
	return dst, nil, false, true
}

// appendJSONString appends s as encoding/json writes a string: quoted, with ", \, <, > and &
// escaped, and \n, \r and \t as such. s is printable text, breaks allowed.
func appendJSONString(dst, s []byte) []byte {
	dst = append(dst, '"')
	start := 0
	for i, b := range s {
		var esc string
		switch b {
		case '"':
			esc = `\"`
		case '\\':
			esc = `\\`
		case '\n':
			esc = `\n`
		case '\r':
			esc = `\r`
		case '\t':
			esc = `\t`
		case '<':
			esc = `\u003c`
		case '>':
			esc = `\u003e`
		case '&':
			esc = `\u0026`
		default:
			continue
		}
		dst = append(dst, s[start:i]...)
		dst = append(dst, esc...)
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
