package manifests

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"

	"github.com/pvguard/pvguard/clusterstate"
)

// Load reads the objects the audit reads from files and directories (recursively: .yaml, .yml,
// .json; a file named directly is read whatever its extension). It returns them, how many there
// are, and an error for each document that cannot be read, naming its file and place; the rest is
// still read, the documents after a broken one and a List's other items included. Kinds other
// than PersistentVolume, PersistentVolumeClaim, StorageClass, Node and those of
// clusterstate.Readables are ignored. Objects are
// read as strictly as the apiserver reads them: an unknown field, or a key repeated in JSON or
// in YAML, makes the object unreadable rather than half-read.
//
// Documents, and the items of each List, are decoded on GOMAXPROCS goroutines and joined in walk
// order, then document order, then item order, so the result does not depend on scheduling.
func Load(paths []string) (*clusterstate.State, int, []error) {
	return load(paths, runtime.GOMAXPROCS(0), itemBatch)
}

// itemBatch is how many of a List's items are handed to a goroutine at a time: enough that
// handing them over costs nothing, few enough that a List is shared evenly.
const itemBatch = 64

func load(paths []string, workers, batch int) (*clusterstate.State, int, []error) {
	files, errs := walk(paths)
	p := startPipeline(workers, batch)
	// queue holds the documents in order while they are decoded; its size bounds how far reading
	// runs ahead of decoding.
	queue := make(chan *document, 4*workers)
	go func() {
		defer close(queue)
		for _, path := range files {
			p.split(path, queue)
		}
	}()
	var read lists
	objects := 0
	for d := range queue {
		n, err := d.collect(&read)
		objects += n
		if err != nil {
			errs = append(errs, err)
		}
	}
	p.stop() // every document and batch handed over has been collected
	return read.state(), objects, errs
}

// walk lists the files to read, in lexical order within each path.
func walk(paths []string) ([]string, []error) {
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
	return files, errs
}

// document is one document of a file on its way through the pipeline. The fields below done are
// written by the goroutine that decodes it and read by the collector once done is closed.
type document struct {
	path  string
	index int // from 1, in its file
	text  []byte
	yaml  bool
	done  chan struct{}

	objs    []metav1.Object
	batches []*batch // a List's items, decoded on every goroutine
	err     error
}

// batch is consecutive items of a List, from index first, and what they decode to.
type batch struct {
	first int
	items []item
	done  chan struct{}

	objs []metav1.Object
	errs []error
}

// pipeline decodes documents on one pool of goroutines and the items of Lists on another. A
// document's goroutine may wait to hand a List's batches to the item pool, whose goroutines wait
// on nothing but their next batch, so no goroutine can end up waiting for itself. (One pool for
// both could fill with documents waiting to hand over items that none of them is free to take.)
type pipeline struct {
	docs  chan *document
	items chan *batch
	batch int
	wg    sync.WaitGroup
}

func startPipeline(workers, batchSize int) *pipeline {
	p := &pipeline{docs: make(chan *document, workers), items: make(chan *batch, 2*workers), batch: batchSize}
	for range workers {
		p.wg.Go(func() {
			dec := new(decoder)
			for d := range p.docs {
				p.decode(d, dec)
			}
		})
		p.wg.Go(func() {
			dec := new(decoder)
			for b := range p.items {
				b.decode(dec)
			}
		})
	}
	return p
}

func (p *pipeline) stop() {
	close(p.docs)
	close(p.items)
	p.wg.Wait()
}

// split reads a file and cuts it into documents, which go to the decoders and, in order, to the
// queue. A file that cannot be read, or the end of a stream that cannot be cut, is an error in
// the queue.
func (p *pipeline) split(path string, queue chan<- *document) {
	data, err := os.ReadFile(path)
	if err != nil {
		queue <- &document{err: err} // a *PathError, which names the file
		return
	}
	index := 0
	asYAML := !isJSON(data)
	emit := func(text []byte) {
		index++
		d := &document{path: path, index: index, text: text, yaml: asYAML, done: make(chan struct{})}
		queue <- d
		p.docs <- d
	}
	if asYAML {
		err = yamlDocuments(data, emit)
	} else {
		err = jsonDocuments(data, emit)
	}
	if err != nil {
		queue <- &document{err: fmt.Errorf("%s: document %d: %w", path, index+1, err)}
	}
}

// decode converts a document to JSON if it is YAML and reads it: its object, or its List's items
// in batches for the item pool.
func (p *pipeline) decode(d *document, dec *decoder) {
	defer close(d.done)
	doc := item{js: d.text}
	d.text = nil
	if d.yaml {
		js, dups, err := yamlToJSON(doc.js)
		if err != nil {
			d.err = err
			return
		}
		doc = item{js: js, dups: dups}
	}
	obj, items, err := dec.read(doc)
	d.objs, d.err = nonNil(obj), err
	for first := 0; first < len(items); first += p.batch {
		b := &batch{first: first, items: items[first:min(first+p.batch, len(items))], done: make(chan struct{})}
		d.batches = append(d.batches, b)
		p.items <- b
	}
}

// decode reads a batch's items, each with all it holds (a List in a List is read in place).
func (b *batch) decode(dec *decoder) {
	defer close(b.done)
	for i, it := range b.items {
		objs, err := dec.readAll(it)
		b.objs = append(b.objs, objs...)
		if err != nil {
			b.errs = append(b.errs, itemError(b.first+i, err))
		}
	}
	b.items = nil
}

// collect waits for a document to be decoded and adds its objects to read. Its problems are one
// error naming the file and the document (a List's bad items each named inside it).
func (d *document) collect(read *lists) (int, error) {
	if d.done == nil {
		return 0, d.err // a file or stream that could not be read: already named
	}
	<-d.done
	n := read.keep(d.objs)
	errs := []error{d.err}
	for _, b := range d.batches {
		<-b.done
		n += read.keep(b.objs)
		errs = append(errs, b.errs...)
	}
	if err := errors.Join(errs...); err != nil {
		return n, fmt.Errorf("%s: document %d: %w", d.path, d.index, err)
	}
	return n, nil
}

// lists are the objects read so far, each kind in reading order.
type lists struct {
	volumes []*corev1.PersistentVolume
	claims  []*corev1.PersistentVolumeClaim
	nodes   []*corev1.Node
	classes []*storagev1.StorageClass
	// listed are the objects of clusterstate.Readables, by kind.
	listed map[clusterstate.Kind][]apiruntime.Object
}

// keep adds decoded objects to the lists, each to its kind's.
func (l *lists) keep(objs []metav1.Object) int {
	for _, obj := range objs {
		switch t := obj.(type) {
		case *corev1.PersistentVolume:
			l.volumes = append(l.volumes, t)
		case *corev1.PersistentVolumeClaim:
			l.claims = append(l.claims, t)
		case *corev1.Node:
			l.nodes = append(l.nodes, t)
		case *storagev1.StorageClass:
			l.classes = append(l.classes, t)
		case apiruntime.Object:
			if r, ok := clusterstate.ReadableOf(t); ok {
				if l.listed == nil {
					l.listed = map[clusterstate.Kind][]apiruntime.Object{}
				}
				l.listed[r.Kind] = append(l.listed[r.Kind], t)
			}
		}
	}
	return len(objs)
}

// state is the State of the objects read, which holds every kind of clusterstate.Readables: the
// files are the whole truth.
func (l *lists) state() *clusterstate.State {
	st := clusterstate.New(l.claims, l.volumes, l.classes, l.nodes)
	for _, r := range clusterstate.Readables() {
		st = st.WithKind(r.Kind, l.listed[r.Kind])
	}
	return st
}
