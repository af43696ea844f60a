package app

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"testing"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/pvguard/pvguard/hack/bench/auditgen"
	"github.com/pvguard/pvguard/policy"
)

// blockYAMLCases are documents the block converter reads (read: true) or leaves to go-yaml.
var blockYAMLCases = []struct {
	name string
	doc  string
	read bool
}{
	{"kubectl's layout", "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  annotations:\n    pv.kubernetes.io/bind-completed: \"yes\"\n  creationTimestamp: \"2026-08-25T12:00:00Z\"\n  labels:\n    app: db\n  name: data-0\n  namespace: team-a\nspec:\n  accessModes:\n  - ReadWriteOnce\n  resources:\n    requests:\n      storage: 100Gi\n  storageClassName: local-ssd\n  volumeMode: Filesystem\nstatus:\n  phase: Pending\n", true},
	{"keys out of order, sequences indented", "spec:\n  z: 1\n  a:\n    - x\n    - q: 2\n      b: []\n      a: '<&>'\nkind: k\napiVersion: v\n", true},
	{"y is a boolean key", "a:\n  - y: 2\n", false},
	{"an empty flow sequence with a space", "a: [ ]\n", true},
	{"flow sequences", "accessModes: [ReadWriteOnce, \"ReadOnlyMany\" ,'x''s']\nb: [1, true, ~, null, a b] # c\nc:\n- [x]\n", true},
	{"sequences of mappings", "items:\n- name: a\n  values:\n  - x\n  - \"y\"\n- name: b\n  values: []\n- {}\n", true},
	{"comments and a first separator", "--- # first\n# a comment\na: b # trailing\n\nc: # nested next\n  d: 'it''s'\n", true},
	{"CRLF line ends", "a: b\r\nc:\r\n  - d\r\n", true},
	{"empty values", "a:\nb: ~\nc: null\nd:\n-\n- e\n", true},
	{"numbers and booleans", "replicas: 3\nzero: 0\nready: true\nfailed: false\n", true},
	{"quantities", "a: 100Gi\nb: 1.5Ti\nc: 500m\nd: 2k\ne: 0Mi\n", true},
	{"escapes", "a: \"x\\\"y\\\\z\\n\\t\"\nb: <tag> & co\nc: 'single \"q\"'\nd: \"ünïcode ✓\"\ne: plain ünïcode\n", true},
	{"wide characters", "a: 数据卷 🚀\nb: '🚀 x'\nc: \"✓\"\nd: |\n  行 🚀\n键: 值\n", true},
	{"managedFields", "metadata:\n  managedFields:\n  - apiVersion: v1\n    fieldsType: FieldsV1\n    fieldsV1:\n      f:metadata:\n        f:finalizers:\n          .: {}\n          v:\"kubernetes.io/pvc-protection\": {}\n      f:spec:\n        f:accessModes: {}\n    manager: kube-controller-manager\n    operation: Update\n    time: \"2026-11-23T10:00:00Z\"\n  name: a\n", true},
	{"dots", "a: .x\nb: ..\n.c: d\n", true},
	{"floats after a dot", "a: .5\n", false},
	{"infinity, any case", "a: .iNf\n", false},
	{"a document end marker as a key", "a: 1\n...: 2\n", false},
	{"quoted keys", "\"a b\": 1\n'c': 2\n\"yes\": 3\n", true},
	{"a URL and colons without spaces", "url: http://example.com:8080/x\nk: a:b\n", true},
	{"deep nesting", "a:\n  b:\n    c:\n      d:\n        - e:\n            f: g\n", true},
	{"a key that is a sequence item's only mapping", "- a: 1\n", true},
	{"a multi-line plain scalar", "message: error getting deleter volume plugin for volume: no\n  deletable volume plugin\n  matched\nnext: 1\n", false},
	{"a long plain scalar folded", "message: error getting deleter volume plugin for volume no\n  deletable volume plugin\n  # a comment ends it\nnext: 1\n", true},
	{"a multi-line quoted scalar", "a: \"one\n  two \\\"2\\\"\n    three\"\nb: 'it''s\n  folded' # done\n", true},
	{"kubectl's last-applied-configuration", "metadata:\n  annotations:\n    kubectl.kubernetes.io/last-applied-configuration: |\n      {\"apiVersion\":\"v1\",\"kind\":\"PersistentVolumeClaim\",\"metadata\":{\"annotations\":{},\"name\":\"data\"}}\n  name: data\n", true},
	{"block scalars", "a: |\n  one\n    indented\n\n  # not a comment\n  three  \n\n\nb: |- # stripped\n  x\n  y\nc:\n- |\n  in a sequence\n- d\n", true},
	{"a block scalar with a tab", "a: |\n  one\ttwo\n", true},

	// Left to go-yaml (whatever it makes of them).
	{"yes is a boolean", "a: yes\n", false},
	{"on is a boolean", "a: On\n", false},
	{"a float", "a: 1.5\n", false},
	{"an exponent", "a: 1e3\n", false},
	{"hex", "a: 0x1F\n", false},
	{"octal", "a: 012\n", false},
	{"a negative number", "a: -1\n", false},
	{"underscores", "a: 1_000\n", false},
	{"a timestamp", "a: 2026-01-01\n", false},
	{"an exa quantity (E without an exponent is no float)", "a: 1E\n", true},
	{"infinity", "a: .inf\n", false},
	{"a boolean key", "true: 1\n", false},
	{"an integer key", "1: a\n", false},
	{"a merge key", "<<: {}\n", false},
	{"a folded scalar", "a: >\n  text\n", false},
	{"a blank line in a quoted scalar", "a: 'one\n\n  two'\n", false},
	{"a blank line in a plain scalar", "a: one\n\n  two\n", false},
	{"a quoted scalar's line ending in a backslash", "a: \"one\\\n  two\"\n", false},
	{"a quoted scalar continued at its key's indentation", "a: 'one\ntwo'\n", false},
	{"a kept block scalar", "a: |+\n  text\n\n", false},
	{"an indentation indicator", "a: |2\n   text\n", false},
	{"a block scalar less indented after its first line", "a: |\n    one\n  two\n", false},
	{"a block scalar with leading blank lines", "a: |\n\n  text\n", false},
	{"an empty block scalar", "a: |\nb: 1\n", false},
	{"an anchor and alias", "a: &x 1\nb: *x\n", false},
	{"a tag", "a: !!str 1\n", false},
	{"a nested flow sequence", "a: [[1], 2]\n", false},
	{"a flow sequence with a trailing comma", "a: [1, ]\n", false},
	{"a flow sequence with an empty item", "a: [1,,2]\n", false},
	{"a flow sequence over two lines", "a: [1,\n  2]\n", false},
	{"a flow sequence with a boolean word", "a: [yes]\n", false},
	{"a flow sequence with a colon", "a: [a:b]\n", false},
	{"text after a flow sequence", "a: [a]b\n", false},
	{"a flow mapping", "a: {b: c}\n", false},
	{"a duplicate key", "a: 1\na: 2\n", false},
	{"a duplicate key out of order", "a: 1\nb: 2\na: 3\n", false},
	{"a tab", "a:\tb\n", false},
	{"tab indentation", "a:\n\tb: c\n", false},
	{"a second document", "a: 1\n---\nb: 2\n", false},
	{"a document end", "a: 1\n...\n", false},
	{"a directive", "%YAML 1.1\n---\na: 1\n", false},
	{"a complex key", "? a\n: b\n", false},
	{"a nested sequence on one line", "- - a\n", false},
	{"bad indentation", "a:\n    b: 1\n  c: 2\n", false},
	{"a top-level scalar", "just text\n", false},
	{"an indented document", "  a: 1\n", false},
	{"a mapping value on the key's line", "a: b: c\n", false},
	{"an unknown escape", "a: \"\\x41\"\n", false},
	{"a control character", "a: \"\x01\"\n", false},
	{"NEL", "a: x\u0085y\n", false},
	{"a line separator", "a: x\u2028y\n", false},
	{"invalid UTF-8", "a: \xff\n", false},
	{"an empty document", "# nothing\n", false},
	{"text after a quoted scalar", "a: \"b\" c\n", false},
	{"a comment without a space", "a: \"b\"#c\n", false},
}

// TestBlockYAMLAgreesWithYAMLToJSON: what the block converter reads, it converts to exactly what
// YAMLToJSON makes of it; and it reads what it should.
func TestBlockYAMLAgreesWithYAMLToJSON(t *testing.T) {
	for _, tc := range blockYAMLCases {
		t.Run(tc.name, func(t *testing.T) {
			checkBlockYAML(t, []byte(tc.doc))
			if _, read := conv.toJSON(nil, []byte(tc.doc)); read != tc.read {
				t.Errorf("read: %v, want %v", read, tc.read)
			}
		})
	}
}

// TestBlockYAMLReadsTheGenerator: every document the benchmark generator writes, in both of its
// YAML layouts, is read by the block converter, as YAMLToJSON reads it.
func TestBlockYAMLReadsTheGenerator(t *testing.T) {
	for _, doc := range generatorYAML(t) {
		checkBlockYAML(t, doc)
		if _, read := conv.toJSON(nil, doc); !read {
			t.Fatalf("not read:\n%s", doc)
		}
	}
}

func generatorYAML(t testing.TB) [][]byte {
	t.Helper()
	snap := auditgen.Generate(300)
	var docs [][]byte
	for _, write := range []func(*policy.Snapshot, string, int) ([]string, error){auditgen.WriteYAML, auditgen.WriteYAMLList} {
		files, err := write(snap, t.TempDir(), 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
			for {
				doc, err := r.Read()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				docs = append(docs, doc)
			}
		}
	}
	return docs
}

// conv is shared by all the tests, as a worker's is by every document it reads: nothing may
// carry over from one document to the next.
var conv blockYAML

func checkBlockYAML(t *testing.T, doc []byte) {
	t.Helper()
	got, read := conv.toJSON([]byte("prefix"), doc)
	if !read {
		if string(got) != "prefix" {
			t.Fatalf("declined, but appended %q", got[len("prefix"):])
		}
		return
	}
	want, err := yaml.YAMLToJSON(doc)
	if err != nil {
		t.Fatalf("read a document YAMLToJSON refuses (%v):\n%s", err, doc)
	}
	if string(got[len("prefix"):]) != string(want) {
		t.Fatalf("converted\n%s\nto\n%s\nYAMLToJSON makes\n%s", doc, got[len("prefix"):], want)
	}
}

// FuzzBlockYAML holds the block converter to YAMLToJSON on any input: whatever it reads, it
// converts to the same bytes, and it never panics. Seeds are the cases above and the generator's
// documents.
//
//	go test -run '^$' -fuzz FuzzBlockYAML -fuzztime 2m ./cmd/pvguard/app/
func FuzzBlockYAML(f *testing.F) {
	for _, tc := range blockYAMLCases {
		f.Add([]byte(tc.doc))
	}
	for _, doc := range generatorYAML(f)[:20] {
		f.Add(doc)
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		checkBlockYAML(t, doc)
	})
}
