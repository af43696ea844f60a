package app

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/pvguard/pvguard/policy"
)

// LoadManifests reads the storage objects from files and directories (recursively: .yaml, .yml,
// .json; a file named directly is read whatever its extension). A document that cannot be read
// is reported with its file and position and skipped; the rest is still loaded, including the
// documents after it in the same file. Kinds other than PersistentVolume, PersistentVolumeClaim,
// StorageClass and Node are ignored.
//
// Files are decoded in parallel and joined in walk order, so the result does not depend on
// scheduling. Each document goes from YAML to JSON once and from JSON straight into its typed
// object. Decoding is strict, as the apiserver's is: field names are case-sensitive, and an
// unknown or duplicate field makes the document unreadable rather than silently half-read.
// (go-json-experiment, the basis of encoding/json/v2, decodes these objects about twice as fast
// as encoding/json; it also refuses invalid UTF-8, where the apiserver would replace it.)
func LoadManifests(paths []string) (*policy.Snapshot, int, []error) {
	var (
		files []string
		errs  []error
	)
	for _, root := range paths {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				return nil
			}
			if path != root {
				switch strings.ToLower(filepath.Ext(path)) {
				case ".yaml", ".yml", ".json":
				default:
					return nil
				}
			}
			files = append(files, path)
			return nil
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("reading %s: %w", root, err))
		}
	}

	parts := make([]manifestFile, len(files))
	items := newItemPool(runtime.GOMAXPROCS(0))
	defer items.close()
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), max(len(files), 1)) {
		wg.Go(func() {
			w := new(worker)
			for i := range next {
				if !parts[i].streamList(files[i], items, streamMin) {
					parts[i].load(files[i], w, items)
				}
			}
		})
	}
	for i := range files {
		next <- i
	}
	close(next)
	wg.Wait()

	snap := &policy.Snapshot{}
	objects := 0
	for i := range parts {
		p := &parts[i]
		snap.PVs = append(snap.PVs, p.snap.PVs...)
		snap.PVCs = append(snap.PVCs, p.snap.PVCs...)
		snap.Nodes = append(snap.Nodes, p.snap.Nodes...)
		snap.Classes = append(snap.Classes, p.snap.Classes...)
		objects += p.objects
		errs = append(errs, p.errs...)
	}
	return snap, objects, errs
}

// manifestFile is what one file holds; each is filled by one worker.
type manifestFile struct {
	snap    policy.Snapshot
	objects int
	errs    []error
	w       *worker // while the file is read
}

// worker is what one decoding goroutine reuses from file to file: allocating them per file or
// per document cost more than some of the work they are for. Nothing decoded refers to them (the
// typed decode copies every string), so the snapshot holds neither.
type worker struct {
	scan jsontext.Decoder // finds each document's type; reset for every document
	list jsontext.Decoder // decodes a List in one pass (addList)
	buf  bytes.Buffer     // the file's bytes
	// yaml converts block YAML; js holds the JSON of the last document it converted.
	yaml blockYAML
	js   []byte
	// shared and decode (strict, sharing through shared) are made on first use.
	shared *sharedValues
	decode json.Options
}

// yamlToJSON converts a YAML document to JSON: by blockYAML into the worker's buffer, valid
// until keepJSON or the next call, or (anything that does not read) by YAMLToJSON.
func (w *worker) yamlToJSON(doc []byte) ([]byte, error) {
	if js, ok := w.yaml.toJSON(w.js[:0], doc); ok {
		w.js = js
		return js, nil
	}
	return yaml.YAMLToJSON(doc)
}

// keepJSON leaves the last converted document to an error that may hold a view of it.
func (w *worker) keepJSON(kept bool) {
	if kept {
		w.js = nil
	}
}

// options returns the options a worker decodes objects with.
func (w *worker) options() json.Options {
	if w.decode == nil {
		w.shared = newSharedValues()
		w.decode = json.JoinOptions(strict, w.shared.unmarshaler)
	}
	return w.decode
}

func (m *manifestFile) load(path string, w *worker, pool *itemPool) {
	m.w = w
	defer func() { m.w = nil }()
	data, err := w.read(path)
	if err != nil {
		m.errs = append(m.errs, err)
		return
	}
	if trimmed := bytes.TrimLeft(data, " \t\r\n"); len(trimmed) > 0 && trimmed[0] == '{' {
		// JSON needs no YAML parser: a stream of objects, as `kubectl get -o json` writes one.
		// Duplicate names are left to the typed decode, which names the object and field.
		dec := jsontext.NewDecoder(bytes.NewBuffer(trimmed), jsontext.AllowDuplicateNames(true))
		for doc := 1; ; doc++ {
			raw, err := dec.ReadValue()
			if err != nil {
				if !errors.Is(err, io.EOF) {
					// A JSON syntax error loses the position of the next value: stop here.
					m.errs = append(m.errs, fmt.Errorf("%s: document %d: %w", path, doc, err))
				}
				return
			}
			m.add(path, doc, raw)
		}
	}
	// One large document (kubectl's List) is split where it lies, not first copied out by the
	// document reader; declined, it is not offered to the splitter a second time below.
	text, one := onlyDocument(data)
	if one && len(text) >= splitMin && m.splitYAMLList(path, 1, text, pool) {
		return
	}
	docs := newYAMLDocuments(data)
	for doc := 1; ; doc++ {
		text, err := docs.Read()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			m.errs = append(m.errs, fmt.Errorf("%s: document %d: %w", path, doc, err))
			return
		}
		if !one && len(text) >= splitMin && m.splitYAMLList(path, doc, text, pool) {
			continue
		}
		js, err := w.yamlToJSON(text)
		if err != nil {
			// Documents are split on "---" before parsing, so the next one is still read.
			m.errs = append(m.errs, fmt.Errorf("%s: document %d: %w", path, doc, err))
			continue
		}
		errs := len(m.errs)
		m.add(path, doc, js)
		w.keepJSON(len(m.errs) > errs)
	}
}

// streamMin is the size from which a JSON file is streamed if it holds one List (streamList):
// below it, reading the whole file and decoding the List in one pass (addList) costs less.
const streamMin = 16 << 20

// streamList reads a large JSON file that holds one List, as `kubectl get pv,pvc -A -o json`
// writes one, without holding the file in memory, and decodes its items on every core: a List
// of 100k objects is 180 MB, and as one document it was read whole and decoded on one core. The
// items are read off the file in batches and decoded as addItems decodes them (each the careful
// way, so each problem is named as before) by the item pool, and joined in order. It keeps
// nothing and reports false for anything else (a smaller file, another kind of document, more
// than one, a syntax error anywhere), which load then reads as before.
func (m *manifestFile) streamList(path string, pool *itemPool, minSize int64) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || fi.Size() < minSize {
		return false
	}
	in := bufio.NewReaderSize(f, 1<<20)
	if first, err := in.Peek(1); err != nil || first[0] != '{' {
		return false // YAML, or JSON after whitespace: not worth the detour
	}
	items := pool.batcher(false)
	defer items.wait()
	dec := jsontext.NewDecoder(in, jsontext.AllowDuplicateNames(true))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return false
	}
	isList := false
	for dec.PeekKind() != '}' {
		name, err := dec.ReadToken()
		if err != nil {
			return false
		}
		switch name.String() {
		case "kind":
			v, err := dec.ReadToken()
			if err != nil || v.Kind() != '"' {
				return false
			}
			isList = strings.HasSuffix(v.String(), "List")
		case "apiVersion":
			// Unused, but the careful way refuses a List whose apiVersion is not a string.
			if v, err := dec.ReadToken(); err != nil || v.Kind() != '"' {
				return false
			}
		case "items":
			if dec.PeekKind() != '[' {
				return false
			}
			if _, err := dec.ReadToken(); err != nil {
				return false
			}
			for dec.PeekKind() != ']' {
				v, err := dec.ReadValue()
				if err != nil {
					return false
				}
				// v is valid only until the next read.
				items.cur.buf = append(items.cur.buf, v...)
				items.end()
			}
			if _, err := dec.ReadToken(); err != nil {
				return false
			}
		default:
			if err := dec.SkipValue(); err != nil {
				return false
			}
		}
	}
	if _, err := dec.ReadToken(); err != nil || !isList {
		return false
	}
	if _, err := dec.ReadToken(); !errors.Is(err, io.EOF) {
		return false // another document, or garbage, after the List
	}
	items.flush()
	m.collect(path, 1, items.batches)
	return true
}

// collect adds a split List's decoded batches to the file, in order, and its items' problems as
// one error for the document, as addItems and add report them.
func (m *manifestFile) collect(path string, doc int, batches []*itemBatch) {
	var errs []error
	for _, b := range batches {
		<-b.done
		m.snap.PVs = append(m.snap.PVs, b.part.snap.PVs...)
		m.snap.PVCs = append(m.snap.PVCs, b.part.snap.PVCs...)
		m.snap.Nodes = append(m.snap.Nodes, b.part.snap.Nodes...)
		m.snap.Classes = append(m.snap.Classes, b.part.snap.Classes...)
		m.objects += b.part.objects
		errs = append(errs, b.part.errs...)
	}
	if err := errors.Join(errs...); err != nil {
		m.errs = append(m.errs, fmt.Errorf("%s: document %d: %w", path, doc, err))
	}
}

// onlyDocument returns the YAML stream's one document as the document reader would return it
// (the stream itself, a "---" first line included), or false when another line starts with
// "---" or the first is a separator followed by anything but a comment.
func onlyDocument(data []byte) ([]byte, bool) {
	rest := data
	if bytes.HasPrefix(rest, []byte("---")) {
		line, after, found := bytes.Cut(rest, []byte("\n"))
		if tail := bytes.TrimSpace(line[3:]); !found || len(tail) > 0 && tail[0] != '#' {
			return nil, false
		}
		rest = after
	}
	if bytes.HasPrefix(rest, []byte("---")) || bytes.Contains(rest, []byte("\n---")) {
		return nil, false
	}
	return data, true
}

// splitMin is the size from which a YAML document is split into its List items (splitYAMLList).
const splitMin = 4 << 20

// splitYAMLList reads a large YAML document that is a List, as `kubectl get -o yaml` writes one,
// item by item: each item's lines are cut from the text and converted and decoded on its own by
// the item pool, on every core. Converted whole, a List of 100k objects took 15 s on one core and
// 3.2 GB, as YAML parsing builds the whole document in memory twice. The cut relies on YAML's
// block layout only: items are the lines from "items:" at the left margin to the next line at
// the margin that is not "- " (an item's start), a comment or blank, and each is indented
// evenly. A document that is not laid out so, is not a List, or any of whose items does not
// convert on its own (an alias to another item's anchor, say) is reported false, having kept
// nothing, and converted whole as before, so its problems are named as before.
func (m *manifestFile) splitYAMLList(path string, doc int, text []byte, pool *itemPool) bool {
	var (
		rest    []byte // the document without its items
		inItem  bool
		indent  int
		inItems bool
		seen    bool // an items: line
	)
	// Items go to the pool as the text is cut, in batches: the document's items are not all
	// held a second time.
	items := pool.batcher(true)
	defer items.wait()
	endItem := func() {
		if inItem {
			items.end()
			inItem = false
		}
	}
	for len(text) > 0 {
		line := text
		if i := bytes.IndexByte(text, '\n'); i >= 0 {
			line, text = text[:i+1], text[i+1:]
		} else {
			text = nil
		}
		content := bytes.TrimRight(line, " \t\r\n")
		switch {
		case !inItems:
			if string(content) == "items:" {
				if seen {
					return false // a second items: the whole conversion names the problem
				}
				seen, inItems = true, true
				rest = append(rest, "items: []\n"...)
				continue
			}
			rest = append(rest, line...)
		case len(content) == 0 || content[0] == '#':
			// Blank lines and comments belong to whichever item they sit in.
			if inItem {
				items.cur.buf = append(items.cur.buf, line...)
			}
		case content[0] == '-' && (len(content) == 1 || content[1] == ' '):
			endItem()
			body := bytes.TrimLeft(content[1:], " ")
			if len(body) == 0 {
				return false // "-" alone: the item's indentation is on the next line
			}
			indent, inItem = len(content)-len(body), true
			items.cur.buf = append(items.cur.buf, line[indent:]...)
		case content[0] == ' ':
			if !inItem || len(line) < indent || len(bytes.TrimLeft(line[:indent], " ")) != 0 {
				return false // less indented than its item
			}
			items.cur.buf = append(items.cur.buf, line[indent:]...)
		default:
			// Back at the margin: the next key of the List.
			endItem()
			inItems = false
			rest = append(rest, line...)
		}
	}
	endItem()
	items.flush()
	if len(items.batches) == 0 {
		return false
	}
	js, err := yaml.YAMLToJSON(rest)
	if err != nil {
		return false
	}
	if _, kind, got, err := m.typeOfDocument(js); err != nil || !strings.HasSuffix(kind, "List") || len(got) != 0 {
		return false
	}
	for _, b := range items.batches {
		if <-b.done; b.unconverted {
			return false
		}
	}
	m.collect(path, doc, items.batches)
	return true
}

// itemBatchSize is how many List items go to the item pool at a time: enough that handing them
// over costs nothing, few enough that the pool's workers share a List evenly.
const itemBatchSize = 64

// itemBatch is consecutive items of a streamed List, from index first, and what they decode to.
// The items are copied end to end into buf (item i ends at ends[i]).
type itemBatch struct {
	first int
	buf   []byte
	ends  []int
	// yaml says the items are those of a split YAML List; unconverted, that one of them did
	// not convert to JSON on its own.
	yaml        bool
	unconverted bool
	part        manifestFile
	done        chan struct{}
}

// itemPool decodes the batches of streamed Lists on GOMAXPROCS goroutines.
type itemPool struct {
	jobs chan *itemBatch
	// free holds the buffers of decoded batches for the next ones: a 180 MB List otherwise
	// copies its items into 180 MB of new memory, a tenth of the time it takes to read.
	free chan []byte
	wg   sync.WaitGroup
}

func newItemPool(n int) *itemPool {
	p := &itemPool{jobs: make(chan *itemBatch, 2*n), free: make(chan []byte, 4*n)}
	for range n {
		p.wg.Go(func() {
			w := new(worker)
			for b := range p.jobs {
				p.decode(b, w)
			}
		})
	}
	return p
}

func (p *itemPool) close() {
	close(p.jobs)
	p.wg.Wait()
}

// batch starts a batch at item index first, with a used buffer if there is one.
func (p *itemPool) batch(first int) *itemBatch {
	b := &itemBatch{first: first, ends: make([]int, 0, itemBatchSize)}
	select {
	case b.buf = <-p.free:
	default:
	}
	return b
}

// batcher cuts one List's items into batches for the pool: an item is appended to cur.buf and
// ended with end, and each batch goes to the pool as soon as it is full.
type batcher struct {
	pool    *itemPool
	yaml    bool // the items are YAML, each converted to JSON by the pool
	cur     *itemBatch
	batches []*itemBatch
}

func (p *itemPool) batcher(yaml bool) *batcher {
	return &batcher{pool: p, yaml: yaml, cur: p.batch(0)}
}

// end ends the item being appended to cur.buf.
func (s *batcher) end() {
	s.cur.ends = append(s.cur.ends, len(s.cur.buf))
	if len(s.cur.ends) == itemBatchSize {
		s.submit()
	}
}

// flush hands the last, partial batch to the pool.
func (s *batcher) flush() {
	if len(s.cur.ends) > 0 {
		s.submit()
	}
}

func (s *batcher) submit() {
	b := s.cur
	b.yaml, b.done = s.yaml, make(chan struct{})
	s.cur = s.pool.batch(b.first + len(b.ends))
	s.batches = append(s.batches, b)
	s.pool.jobs <- b // the pool's from here on
}

// wait returns once the pool is done with every batch handed over: none may be dropped or read
// before.
func (s *batcher) wait() {
	for _, b := range s.batches {
		<-b.done
	}
}

// decode adds the batch's items to its part as addItems would, with the items' own indexes.
func (p *itemPool) decode(b *itemBatch, w *worker) {
	defer close(b.done)
	b.part.w = w
	defer func() { b.part.w = nil }()
	add := func(i int, item []byte) {
		n, err := b.part.addDocument(item)
		b.part.objects += n
		if err != nil {
			b.part.errs = append(b.part.errs, fmt.Errorf("items[%d]: %w", b.first+i, err))
		}
	}
	start := 0
	for i, end := range b.ends {
		item := b.buf[start:end]
		start = end
		if b.yaml {
			js, err := w.yamlToJSON(item)
			if err != nil {
				b.unconverted = true
				break
			}
			item = js
		}
		errs := len(b.part.errs)
		add(i, item)
		w.keepJSON(len(b.part.errs) > errs)
	}
	// The decoded objects hold copies of what they read, but an error may hold a view of the
	// input; a batch with one keeps its buffer.
	if len(b.part.errs) == 0 && !b.unconverted {
		select {
		case p.free <- b.buf[:0]:
		default:
		}
	}
	b.buf, b.ends = nil, nil
}

// read returns the file's contents, valid until the next read.
func (w *worker) read(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	w.buf.Reset()
	if fi, err := f.Stat(); err == nil && fi.Size() < math.MaxInt32 {
		w.buf.Grow(int(fi.Size()) + bytes.MinRead) // ReadFrom wants MinRead free to read EOF
	}
	if _, err := w.buf.ReadFrom(f); err != nil {
		return nil, err // a *PathError, which names the file
	}
	return w.buf.Bytes(), nil
}

func (m *manifestFile) add(path string, doc int, js []byte) {
	n, err := m.addDocument(js)
	m.objects += n
	if err != nil {
		m.errs = append(m.errs, fmt.Errorf("%s: document %d: %w", path, doc, err))
	}
}

// strict makes a typed decode refuse unknown fields; duplicate names and case-insensitive
// matches are refused by default.
var strict = json.RejectUnknownMembers(true)

// addDocument adds one JSON document (or the items of a List) to the snapshot and returns how
// many objects it added. A List whose items all read cleanly is decoded in one pass (addList).
// Otherwise each object is parsed once to find its kind (stopping as soon as apiVersion and kind
// are read) and once into its typed object; a List's items are found while looking for its
// kind, which kubectl writes after them.
func (m *manifestFile) addDocument(js []byte) (int, error) {
	js = bytes.TrimSpace(js)
	if len(js) == 0 || bytes.Equal(js, []byte("null")) {
		return 0, nil // an empty document
	}
	if n, ok := m.addList(js); ok {
		return n, nil
	}
	apiVersion, kind, items, err := m.typeOfDocument(js)
	if err != nil {
		return 0, fmt.Errorf("reading apiVersion and kind: %w", err)
	}
	if strings.HasSuffix(kind, "List") {
		return m.addItems(items)
	}
	target := newObject(apiVersion, kind)
	switch {
	case target != nil:
	case kind == "":
		return 0, errors.New("no kind")
	default:
		return 0, versionError(apiVersion, kind, js)
	}
	if err := json.Unmarshal(js, target, m.w.options()); err != nil {
		// An error met while sharing a value is placed in the value, not the object: decoded
		// again without sharing, the error names the field.
		target = newObject(apiVersion, kind)
		if err := json.Unmarshal(js, target, strict); err != nil {
			return 0, fmt.Errorf("%s %s: %w", kind, nameOfDocument(js), fieldError(err))
		}
	}
	if target.GetName() == "" {
		return 0, fmt.Errorf("%s without metadata.name", kind)
	}
	m.keep(target)
	return 1, nil
}

// newObject returns an empty object of a kind the audit reads, or nil.
func newObject(apiVersion, kind string) metav1.Object {
	switch {
	case kind == "PersistentVolume" && apiVersion == "v1":
		return &corev1.PersistentVolume{}
	case kind == "PersistentVolumeClaim" && apiVersion == "v1":
		return &corev1.PersistentVolumeClaim{}
	case kind == "Node" && apiVersion == "v1":
		return &corev1.Node{}
	case kind == "StorageClass" && apiVersion == "storage.k8s.io/v1":
		return &storagev1.StorageClass{}
	}
	return nil
}

// keep adds a decoded object to the file's snapshot.
func (m *manifestFile) keep(obj metav1.Object) {
	switch t := obj.(type) {
	case *corev1.PersistentVolume:
		m.snap.PVs = append(m.snap.PVs, t)
	case *corev1.PersistentVolumeClaim:
		if t.Namespace == "" {
			t.Namespace = "default"
		}
		m.snap.PVCs = append(m.snap.PVCs, t)
	case *corev1.Node:
		m.snap.Nodes = append(m.snap.Nodes, t)
	case *storagev1.StorageClass:
		m.snap.Classes = append(m.snap.Classes, t)
	}
}

// addList is the quick way to read a List, as `kubectl get -o json` prints one: each item is
// decoded straight from the List, without first being tokenised to find where it ends (a sixth
// of the loader's time). It is all or nothing: for a document that is not a List, or has
// anything wrong with it, it adds nothing and reports false, and addDocument reads the document
// the careful way, which names each problem and keeps the items around it. Its decoder refuses
// duplicate names anywhere, as the typed decode of each item would.
func (m *manifestFile) addList(js []byte) (int, bool) {
	dec := &m.w.list
	dec.Reset(bytes.NewBuffer(js))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return 0, false
	}
	var (
		isList bool
		objs   []metav1.Object
	)
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return 0, false
		}
		switch tok.String() {
		case "kind":
			v, err := dec.ReadToken()
			if err != nil || v.Kind() != '"' || !strings.HasSuffix(v.String(), "List") {
				return 0, false
			}
			isList = true
		case "apiVersion":
			// Unused, but the careful way refuses a List whose apiVersion is not a string.
			if v, err := dec.ReadToken(); err != nil || v.Kind() != '"' {
				return 0, false
			}
		case "items":
			if dec.PeekKind() != '[' {
				return 0, false
			}
			if _, err := dec.ReadToken(); err != nil {
				return 0, false
			}
			for dec.PeekKind() != ']' {
				obj, ok := m.decodeItem(dec)
				if !ok {
					return 0, false
				}
				if obj != nil {
					objs = append(objs, obj)
				}
			}
			if _, err := dec.ReadToken(); err != nil {
				return 0, false
			}
		default:
			if err := dec.SkipValue(); err != nil {
				return 0, false
			}
		}
	}
	if _, err := dec.ReadToken(); err != nil || !isList {
		return 0, false
	}
	for _, obj := range objs {
		m.keep(obj)
	}
	return len(objs), true
}

// decodeItem decodes the List item dec is at, or skips it when the audit does not read its kind
// (nil, true). false means the item needs the careful way.
func (m *manifestFile) decodeItem(dec *jsontext.Decoder) (metav1.Object, bool) {
	// The item's type is read ahead of dec, from the input it has not consumed yet (after the
	// comma, if any, that separates it from the previous item).
	ahead := bytes.TrimLeft(dec.UnreadBuffer(), " \t\r\n,")
	apiVersion, kind, _, err := m.typeOfDocument(ahead)
	if err != nil || kind == "" || strings.HasSuffix(kind, "List") {
		return nil, false
	}
	obj := newObject(apiVersion, kind)
	if obj == nil {
		if versionError(apiVersion, kind, nil) != nil {
			return nil, false
		}
		return nil, dec.SkipValue() == nil
	}
	if err := json.UnmarshalDecode(dec, obj, m.w.options()); err != nil || obj.GetName() == "" {
		return nil, false
	}
	return obj, true
}

// readVersions are the API versions the audit reads, by kind. A document of one of these kinds
// in the same API group or the core group but another version (or with none) is refused rather
// than skipped, so that no volume or claim leaves the audit unseen; the same kind in another
// named group is another resource and is skipped with the other kinds.
var readVersions = map[string]string{
	"PersistentVolume":      "v1",
	"PersistentVolumeClaim": "v1",
	"Node":                  "v1",
	"StorageClass":          "storage.k8s.io/v1",
}

// versionError explains why a document of an audited kind was not read, or returns nil for a
// kind the audit does not read.
func versionError(apiVersion, kind string, js []byte) error {
	want, audited := readVersions[kind]
	if !audited {
		return nil
	}
	group, _ := schema.ParseGroupVersion(want)
	if apiVersion == "" {
		return fmt.Errorf("%s %s: no apiVersion (want %s)", kind, nameOfDocument(js), want)
	}
	if gv, err := schema.ParseGroupVersion(apiVersion); err != nil || gv.Group == group.Group || gv.Group == "" {
		return fmt.Errorf("%s %s: apiVersion %q is not read by pvguard (want %s)", kind, nameOfDocument(js), apiVersion, want)
	}
	return nil
}

// typeOfDocument reads a JSON object's apiVersion and kind, skipping the values of the other
// members unread and stopping once it has both, unless it is a List. The elements of an "items" array met on the
// way are returned, as views of js: a List's kind comes after them in kubectl's output, and they
// would otherwise be read once to be skipped and once more to be added.
func (m *manifestFile) typeOfDocument(js []byte) (apiVersion, kind string, items [][]byte, err error) {
	dec := &m.w.scan
	dec.Reset(bytes.NewBuffer(js), jsontext.AllowDuplicateNames(true))
	if tok, err := dec.ReadToken(); err != nil {
		return "", "", nil, err
	} else if tok.Kind() != '{' {
		return "", "", nil, fmt.Errorf("%s, not an object", jsonKind(tok.Kind()))
	}
	var haveVersion, haveKind bool
	for dec.PeekKind() != '}' {
		// A List is read to its end, for items that come after its kind.
		if haveVersion && haveKind && !strings.HasSuffix(kind, "List") {
			break
		}
		tok, err := dec.ReadToken()
		if err != nil {
			return "", "", nil, err
		}
		// A token is valid only until the next read.
		switch name := tok.String(); name {
		case "apiVersion", "kind":
			v, err := dec.ReadToken()
			if err != nil {
				return "", "", nil, err
			}
			if v.Kind() != '"' {
				return "", "", nil, fmt.Errorf("%s is %s, not a string", name, jsonKind(v.Kind()))
			}
			if name == "kind" {
				kind, haveKind = v.String(), true
			} else {
				apiVersion, haveVersion = v.String(), true
			}
		case "items":
			// A repeated items member (the apiserver would refuse it) adds its items too, so
			// that none is left unaudited.
			more, err := readItems(dec, js)
			if err != nil {
				return "", "", nil, err
			}
			items = append(items, more...)
		default:
			if err := dec.SkipValue(); err != nil {
				return "", "", nil, err
			}
		}
	}
	return apiVersion, kind, items, nil
}

// readItems reads the value of an "items" member: the elements of an array, as views of js (the
// decoder's whole input), or nothing for a value of another kind.
func readItems(dec *jsontext.Decoder, js []byte) ([][]byte, error) {
	if dec.PeekKind() != '[' {
		return nil, dec.SkipValue()
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, err
	}
	var items [][]byte
	for i := 0; dec.PeekKind() != ']'; i++ {
		v, err := dec.ReadValue()
		if err != nil {
			return nil, fmt.Errorf("items[%d]: %w", i, err)
		}
		// v is valid only until the next read; the same bytes of js stay.
		end := int(dec.InputOffset())
		items = append(items, js[end-len(v):end:end])
	}
	_, err := dec.ReadToken() // ']'
	return items, err
}

// jsonKind names a JSON value's kind for an error message.
func jsonKind(k jsontext.Kind) string {
	switch k {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a " + k.String()
}

// addItems adds the items of a List.
func (m *manifestFile) addItems(items [][]byte) (int, error) {
	total := 0
	var errs []error
	for i, item := range items {
		n, err := m.addDocument(item)
		total += n
		if err != nil {
			errs = append(errs, fmt.Errorf("items[%d]: %w", i, err))
		}
	}
	return total, errors.Join(errs...)
}

// nameOfDocument is the document's metadata.name, for an error message ("" when unreadable).
func nameOfDocument(js []byte) string {
	var doc struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(js, &doc, jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	return doc.Metadata.Name
}

// fieldError restates a decoding error in terms of the object's field path
// (spec.accessModes[0]) rather than a JSON pointer (/spec/accessModes/0).
func fieldError(err error) error {
	var sem *json.SemanticError
	var syn *jsontext.SyntacticError
	switch {
	case errors.As(err, &sem) && sem.Err == json.ErrUnknownName:
		return fmt.Errorf("unknown field %q", fieldPath(sem.JSONPointer))
	case errors.As(err, &syn) && syn.Err == jsontext.ErrDuplicateName:
		return fmt.Errorf("duplicate field %q", fieldPath(syn.JSONPointer))
	case errors.As(err, &sem) && sem.JSONPointer != "" && sem.Err != nil:
		return fmt.Errorf("%s: %w", fieldPath(sem.JSONPointer), sem.Err)
	case errors.As(err, &sem) && sem.JSONPointer != "" && sem.GoType != nil:
		return fmt.Errorf("%s: a JSON %s where %s was expected", fieldPath(sem.JSONPointer), sem.JSONKind, sem.GoType)
	}
	return err
}

func fieldPath(p jsontext.Pointer) string {
	var b strings.Builder
	for tok := range p.Tokens() {
		if _, err := strconv.Atoi(tok); err == nil && b.Len() > 0 {
			b.WriteString("[" + tok + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(tok)
	}
	return b.String()
}
