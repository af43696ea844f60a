package policytest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/yaml"

	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/webhook"
)

// Suite is a suite read and checked, ready to run.
type Suite struct {
	// File is the suite's file as it was found, Index its document in the file (from 1).
	File  string
	Index int
	Name  string
	// Fixtures are the cluster state the cases are judged in.
	Fixtures *Fixtures
	Cases    []*Case
	// Engines is the policy under test, loaded as `pvguard serve` loads it.
	Engines webhook.EngineSource
	// Now dates the audit and the explanations (zero: the time of the run).
	Now time.Time
	// Sequential: the cases run in order, each admitted write stored before the next.
	Sequential bool

	initial *world
	config  []byte // the policy config as written (nil: the default config)
}

// PolicyConfig is the policy config under test as `pvguard serve --config` reads it: the file's
// content, or the inline config as JSON; nil for the default config.
func (s *Suite) PolicyConfig() []byte { return s.config }

// Where names the suite in messages: its file, and its document when the file holds several.
func (s *Suite) Where() string {
	if s.Index > 1 {
		return fmt.Sprintf("%s#%d", s.File, s.Index)
	}
	return s.File
}

// Load reads the suites in files and directories. A directory is searched recursively for
// .yaml, .yml and .json files that hold PolicyTest documents (others, such as fixture files and
// policy configs beside them, are left alone); a file named directly must hold suites. The
// errors name the file, the document and the field; a suite with any error is not returned.
func Load(paths []string) ([]*Suite, []error) {
	var (
		suites []*Suite
		errs   []error
	)
	for _, root := range paths {
		info, err := os.Stat(root)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !info.IsDir() {
			got, fileErrs := loadFile(root, true)
			suites, errs = append(suites, got...), append(errs, fileErrs...)
			continue
		}
		err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() || !isManifest(path) {
				return nil
			}
			got, fileErrs := loadFile(path, false)
			suites, errs = append(suites, got...), append(errs, fileErrs...)
			return nil
		})
		if err != nil {
			errs = append(errs, err)
		}
	}
	return suites, errs
}

// suiteLine is an apiVersion line of pvguard.io's group, or a kind: PolicyTest line, YAML or JSON.
var suiteLine = regexp.MustCompile(`(?m)^\s*"?(apiVersion"?\s*:\s*"?pvguard\.io/|kind"?\s*:\s*"?PolicyTest\b)`)

// suiteGroup is the API group of pvguard's own documents: a file that names it holds suites.
const suiteGroup = "pvguard.io/"

// loadFile reads the suites of one file. Found in a directory walk (named false), a file is a
// suite file when a document in it has kind PolicyTest or an apiVersion of pvguard.io's group;
// any other file (fixtures, configs) is skipped.
func loadFile(path string, named bool) ([]*Suite, []error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, []error{err}
	}
	if !named && !bytes.Contains(data, []byte(suiteGroup)) && !bytes.Contains(data, []byte(Kind)) {
		return nil, nil // fixtures, configs: not read twice
	}
	docs, splitErr := splitDocuments(data)
	if !named && !anySuite(docs) {
		return nil, nil
	}
	var (
		suites []*Suite
		errs   []error
	)
	if splitErr != nil {
		errs = append(errs, fmt.Errorf("%s: %w", path, splitErr))
	}
	if len(docs) == 0 && splitErr == nil {
		errs = append(errs, fmt.Errorf("%s: no %s document in it", path, Kind))
	}
	for _, d := range docs {
		where := fmt.Sprintf("%s: document %d", path, d.index)
		if d.err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, d.err))
			continue
		}
		s, docErrs := loadSuite(path, d, where)
		for _, e := range docErrs {
			if named, ok := e.(asIs); ok {
				errs = append(errs, named.error)
				continue
			}
			errs = append(errs, fmt.Errorf("%s: %w", where, e))
		}
		if s != nil && len(docErrs) == 0 {
			suites = append(suites, s)
		}
	}
	return suites, errs
}

// anySuite reports whether a document has kind PolicyTest or names pvguard.io's API group in its
// apiVersion, or, for a document that could not be read, has a line that looks like either.
func anySuite(docs []document) bool {
	for _, d := range docs {
		if d.err != nil {
			if suiteLine.Match(d.raw) {
				return true
			}
			continue
		}
		if h, err := readHeader(d.js); err == nil && (h.Kind == Kind || strings.HasPrefix(h.APIVersion, suiteGroup)) {
			return true
		}
	}
	return false
}

// loadSuite reads one PolicyTest document: its config, fixtures and cases, each checked.
func loadSuite(path string, d document, where string) (*Suite, []error) {
	h, err := readHeader(d.js)
	if err != nil {
		return nil, []error{fmt.Errorf("reading apiVersion and kind: %w", fieldError(err, ""))}
	}
	if h.APIVersion != APIVersion || h.Kind != Kind {
		return nil, []error{fmt.Errorf("apiVersion %q kind %q: want apiVersion %s, kind %s", h.APIVersion, h.Kind, APIVersion, Kind)}
	}
	var doc suiteDoc
	if err := decodeStrict(d.js, &doc, ""); err != nil {
		return nil, []error{err}
	}
	dir := filepath.Dir(path)
	s := &Suite{File: path, Index: d.index, Name: doc.Metadata.Name, Sequential: doc.Sequential}
	var errs []error
	if s.Engines, s.config, err = loadEngine(dir, doc); err != nil {
		errs = append(errs, err)
	}
	if doc.Now != "" {
		if s.Now, err = time.Parse(time.RFC3339, doc.Now); err != nil {
			errs = append(errs, fmt.Errorf("now: %q is not an RFC 3339 time such as 2026-01-02T15:04:05Z", doc.Now))
		}
	}
	fx, fxErrs := readFixtures(dir, doc.Fixtures, where)
	// Fixture errors already name their file and document: they are reported as they are.
	for _, e := range fxErrs {
		errs = append(errs, asIs{e})
	}
	s.Fixtures = fx
	// What a sequential suite's case names is found when it runs, in the state the cases before
	// it left; the others' is found now.
	resolveIn := fx
	if s.Sequential {
		resolveIn = nil
	}
	if len(doc.Cases) == 0 {
		errs = append(errs, errors.New("cases: a suite needs at least one case"))
	}
	names := map[string]int{}
	for i, c := range doc.Cases {
		at := fmt.Sprintf("cases[%d]", i)
		if c.Name == "" {
			errs = append(errs, fmt.Errorf("%s.name: every case needs a name", at))
		} else if j, ok := names[c.Name]; ok {
			errs = append(errs, fmt.Errorf("%s.name: %q is also the name of cases[%d]", at, c.Name, j))
		}
		names[c.Name] = i
	}
	// Cases are checked and resolved on every core; their errors are reported in order.
	cases := make([]*Case, len(doc.Cases))
	caseErrs := make([]error, len(doc.Cases))
	parallel(len(doc.Cases), func(i int) {
		cases[i], caseErrs[i] = compileCase(doc.Cases[i], fmt.Sprintf("cases[%d]", i), resolveIn)
	})
	for i := range cases {
		if caseErrs[i] != nil {
			errs = append(errs, caseErrs[i])
			continue
		}
		s.Cases = append(s.Cases, cases[i])
	}
	if len(errs) > 0 {
		return nil, errs
	}
	s.initial = newWorld(fx, s.Engines)
	return s, nil
}

// asIs is an error already naming where it is, reported without the document's prefix.
type asIs struct{ error }

func (e asIs) Unwrap() error { return e.error }

// loadEngine loads the policy under test as `pvguard serve` does: --config through
// webhook.LoadConfigFile, which parses it with policy.ParseConfig; no config, the default engine.
// An inline config is parsed by the same function.
func loadEngine(dir string, doc suiteDoc) (webhook.EngineSource, []byte, error) {
	inline := !absent(doc.Config)
	switch {
	case doc.ConfigFile != "" && inline:
		return nil, nil, errors.New("configFile and config: give the policy config one way, not both")
	case doc.ConfigFile != "":
		path := doc.ConfigFile
		if !filepath.IsAbs(path) {
			path = filepath.Join(dir, path)
		}
		cf, err := webhook.LoadConfigFile(path, nil, logr.Discard())
		if err != nil {
			data, _ := os.ReadFile(path)
			return nil, nil, fmt.Errorf("configFile: %w", configFieldError(err, data))
		}
		data, err := os.ReadFile(path)
		return cf, data, err
	case inline:
		cfg, err := policy.ParseConfig(doc.Config)
		if err != nil {
			return nil, nil, fmt.Errorf("config: %w", configFieldError(err, doc.Config))
		}
		return webhook.StaticEngine{E: policy.NewEngine(cfg)}, doc.Config, nil
	}
	return webhook.StaticEngine{E: policy.NewEngine(nil)}, nil, nil
}

// unknownField is the unknown field policy.ParseConfig names, without its path.
var unknownField = regexp.MustCompile(`unknown field "([^"]*)"$`)

// configFieldError is err, policy.ParseConfig's error on the config data (YAML or JSON), with an
// unknown field named by its path in the config (rules.PVG001.actoin) rather than its name alone.
// Any other error is err as it is.
func configFieldError(err error, data []byte) error {
	const parsing = "parsing policy config: "
	msg := err.Error()
	m := unknownField.FindStringSubmatch(msg)
	i := strings.Index(msg, parsing)
	if m == nil || i < 0 {
		return err
	}
	js, jsErr := yaml.YAMLToJSON(data)
	if jsErr != nil {
		return err
	}
	strictErr := decodeStrict(js, &policy.Config{}, "")
	if strictErr == nil {
		return err
	}
	sm := unknownField.FindStringSubmatch(strictErr.Error())
	if sm == nil || (sm[1] != m[1] && !strings.HasSuffix(sm[1], "."+m[1])) {
		return err
	}
	return errors.New(msg[:i+len(parsing)] + strictErr.Error())
}
