package app

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"slices"
	"testing"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// readAll returns what a document reader reads from a stream: each document, and the error that
// ends it (as text; none at io.EOF).
func readAll(read func() ([]byte, error)) (docs []string, end string) {
	for {
		doc, err := read()
		if errors.Is(err, io.EOF) {
			return docs, ""
		}
		if err != nil {
			return docs, err.Error()
		}
		docs = append(docs, string(doc))
	}
}

var yamlStreams = []string{
	"",
	"a: 1\n",
	"a: 1",
	"---\na: 1\n",
	"--- # first\na: 1\n---\nb: 2\n",
	"a: 1\n---\n---\nb: 2\n---\n",
	"---\n---\n",
	"\n\n---\n\n",
	"a: 1\n--- x\nb: 2\n",
	"a: 1\n---x\n",
	"a: 1\n---\t# tab\nb: 2",
	"a: |\n  ---\n  text\n---\nb: 2\n",
	" ---\na: 1\n",
	"a: 1\r\n---\r\nb: 2\r\n",
	"a: 1\n---\u00a0\nb: 2\n",
}

// TestYAMLDocumentsReadsAsYAMLReader holds the in-place document reader to apimachinery's.
func TestYAMLDocumentsReadsAsYAMLReader(t *testing.T) {
	for _, in := range yamlStreams {
		checkYAMLDocuments(t, []byte(in))
	}
}

func checkYAMLDocuments(t *testing.T, in []byte) {
	t.Helper()
	want, wantEnd := readAll(utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(in))).Read)
	got, gotEnd := readAll(newYAMLDocuments(bytes.Clone(in)).Read)
	if !slices.Equal(got, want) || gotEnd != wantEnd {
		t.Fatalf("%q: read %q and %q; YAMLReader reads %q and %q", in, got, gotEnd, want, wantEnd)
	}
}

// FuzzYAMLDocuments holds the in-place document reader to apimachinery's on any stream.
//
//	go test -run '^$' -fuzz FuzzYAMLDocuments -fuzztime 1m ./cmd/pvguard/app/
func FuzzYAMLDocuments(f *testing.F) {
	for _, in := range yamlStreams {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		checkYAMLDocuments(t, in)
	})
}
