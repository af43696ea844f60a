package manifests

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strconv"

	yamlnodes "go.yaml.in/yaml/v3"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// The YAML reader: a stream is cut into documents and each is converted to JSON by
// sigs.k8s.io/yaml, the library kubectl and the apiserver convert YAML with, so that `yes`, `012`
// and every other YAML 1.1 quirk mean here what they mean to the cluster. The JSON reader then
// decodes it.

// yamlDocuments calls emit with each document of a YAML stream, cut where kubectl cuts it
// (apimachinery's YAMLReader: at lines that start with "---"). Documents are cut before they are
// parsed, so a broken one does not hide the ones after it; a bad separator ends the stream.
func yamlDocuments(data []byte, emit func([]byte)) error {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read() // a new slice each time
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		emit(doc)
	}
}

// yamlToJSON converts one YAML document to JSON. A key repeated in a mapping, which YAMLToJSON
// silently resolves to its last value, fails the strict conversion; the document is then
// converted as kubectl converts it and the repeated keys' paths are returned with it, so that the
// JSON reader refuses just the objects that repeat a key (one item of a List of thousands, say)
// and names the field.
func yamlToJSON(doc []byte) ([]byte, []string, error) {
	js, err := yaml.YAMLToJSONStrict(doc)
	if err == nil {
		return js, nil, nil
	}
	js, err = yaml.YAMLToJSON(doc)
	if err != nil {
		return nil, nil, err // broken YAML: the same message as before strictness
	}
	// No repeated key means go-yaml's strictness took a merge key's override ("<<: *base"
	// then one of base's keys) for a repeat. YAML says the explicit key wins, and the plain
	// conversion, which kubectl uses, gives it.
	return js, DuplicateKeys(doc), nil
}

// DuplicateKeys returns the field paths of the keys a YAML document repeats in one mapping
// ("items[3].spec.volumeMode"). It is only called for a document that failed the strict
// conversion, so its cost (go-yaml v3 builds the document's node tree, which has the positions
// and keys that the strict conversion's error only gives as a line number) is paid once per
// broken document. Aliases and merge keys are not followed: a repeat inside an anchored mapping
// is found where the anchor is, and a key that overrides a merged one is no repeat.
func DuplicateKeys(doc []byte) []string {
	var root yamlnodes.Node
	if yamlnodes.Unmarshal(doc, &root) != nil {
		return nil
	}
	var dups []string
	var walk func(n *yamlnodes.Node, path string)
	walk = func(n *yamlnodes.Node, path string) {
		switch n.Kind {
		case yamlnodes.DocumentNode:
			for _, c := range n.Content {
				walk(c, path)
			}
		case yamlnodes.SequenceNode:
			for i, c := range n.Content {
				walk(c, path+"["+strconv.Itoa(i)+"]")
			}
		case yamlnodes.MappingNode:
			seen := make(map[string]bool, len(n.Content)/2)
			for i := 0; i+1 < len(n.Content); i += 2 {
				key := n.Content[i].Value
				p := key
				if path != "" {
					p = path + "." + key
				}
				if seen[key] {
					dups = append(dups, p)
				}
				seen[key] = true
				walk(n.Content[i+1], p)
			}
		}
	}
	walk(&root, "")
	return dups
}
