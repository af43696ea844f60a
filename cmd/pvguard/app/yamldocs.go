package app

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// yamlDocuments returns a YAML stream's documents one by one, exactly as apimachinery's
// YAMLReader does (the stream is cut at lines that start with "---", a first such line stays in
// its document, and anything but a comment after the dashes is an error that ends the stream),
// but as slices of data rather than copies made line by line, which cost as much as converting
// the documents. A stream with a carriage return, whose line ends YAMLReader rewrites, is read
// by YAMLReader itself.
type yamlDocuments struct {
	data   []byte
	reader *utilyaml.YAMLReader
	tail   []byte // the last document, when its last line has no line break to end it
}

func newYAMLDocuments(data []byte) *yamlDocuments {
	d := &yamlDocuments{data: data}
	if bytes.IndexByte(data, '\r') >= 0 {
		d.reader = utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	}
	return d
}

// Read returns the next document, valid until the next call, or io.EOF.
func (d *yamlDocuments) Read() ([]byte, error) {
	if d.reader != nil {
		return d.reader.Read()
	}
	// The next document is d.data[:pos], as far as it has been read.
	pos := 0
	for pos < len(d.data) {
		end := pos
		if i := bytes.IndexByte(d.data[pos:], '\n'); i >= 0 {
			end += i + 1
		} else {
			end = len(d.data)
		}
		line := d.data[pos:end]
		if bytes.HasPrefix(line, []byte("---")) {
			if rest := strings.TrimSpace(string(line[3:])); len(rest) > 0 && rest[0] != '#' {
				d.data = nil
				return nil, fmt.Errorf("invalid Yaml document separator: %s", rest)
			}
			if pos > 0 {
				doc := d.data[:pos]
				d.data = d.data[end:]
				return doc, nil
			}
		}
		pos = end
	}
	doc := d.data
	d.data = nil
	if len(doc) == 0 {
		return nil, io.EOF
	}
	if doc[len(doc)-1] != '\n' {
		d.tail = append(append(d.tail[:0], doc...), '\n')
		return d.tail, nil
	}
	return doc, nil
}
