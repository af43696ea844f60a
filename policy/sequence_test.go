package policy_test

import (
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/test/sequence"
)

// The stateful tests of issue 14: random sequences of writes from generated clusters, judged by
// an oracle of the deny invariants (test/sequence), the regression cases they found
// (testdata/sequence/*.yaml), and the upstream flows, which must pass without a finding.
//
// make test runs a small, fixed exploration. A long one:
//
//	go test ./policy/ -run TestSequenceExplorer -seq.runs=100000 -seq.seed=$RANDOM -v
//	go test ./policy/ -run TestSequenceExplorer -seq.time=10m -seq.save=/tmp/found -v
//
// or PVGUARD_SEQ_RUNS / PVGUARD_SEQ_SEED / PVGUARD_SEQ_TIME / PVGUARD_SEQ_STRICT. A violation is
// reported with its seed, the shrunk sequence as readable steps, and the case file that replays
// it; keep it under testdata/sequence/.

var (
	seqRuns   = flag.Int("seq.runs", envInt("PVGUARD_SEQ_RUNS", 200), "sequences the explorer runs")
	seqSeed   = flag.Uint64("seq.seed", uint64(envInt("PVGUARD_SEQ_SEED", 1)), "first seed of the explorer (run i uses seed+i)")
	seqTime   = flag.Duration("seq.time", envDuration("PVGUARD_SEQ_TIME", 0), "run the explorer this long instead of -seq.runs sequences")
	seqStrict = flag.Bool("seq.strict", os.Getenv("PVGUARD_SEQ_STRICT") != "", "fail on violations of invariants still open (openInvariants, Case.Open) too")
	seqSave   = flag.String("seq.save", "", "directory to write a case file for each distinct violation the explorer finds")
)

func envInt(key string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(key)); err == nil {
		return v
	}
	return def
}

func envDuration(key string, def time.Duration) time.Duration {
	if v, err := time.ParseDuration(os.Getenv(key)); err == nil {
		return v
	}
	return def
}

// openInvariants are the invariants whose fix has not reached this branch yet (the lead fixes
// the rules in main at the same time). The explorer logs their violations instead of failing,
// unless -seq.strict; every other invariant fails the test. Empty once the fixes are in.
var openInvariants = map[string]string{}

func open(inv string) bool {
	for _, i := range strings.Split(inv, ",") {
		if openInvariants[i] == "" {
			return false
		}
	}
	return true
}

// explore runs one random sequence from one seed and returns its trace; the trace stops at the
// first violation.
func explore(e *policy.Engine, seed uint64) sequence.Trace {
	g := sequence.NewGen(seed)
	start := g.World()
	n := 5 + g.R.IntN(16)
	var steps []sequence.Step
	w := start
	t := sequence.Trace{Start: start, At: -1}
	for i := range n {
		s := g.NextStep(w)
		steps = append(steps, s)
		next, out := sequence.Apply(e, w, s)
		t.Outcomes = append(t.Outcomes, out)
		switch {
		case out.Result == sequence.Errored:
			t.Violation = []sequence.Violation{{Invariant: "I10", Message: "the engine returned an error: " + out.Reason}}
		case out.Result == sequence.Admitted && s.Verb != sequence.Delete:
			t.Violation = sequence.Check(w, next, s)
		}
		w = next
		if len(t.Violation) > 0 {
			t.At = i
			break
		}
	}
	t.End = w
	return t
}

func TestSequenceExplorer(t *testing.T) {
	e := policy.NewEngine(policy.DefaultConfig())
	type found struct {
		count int
		seed  uint64
		trace sequence.Trace
		steps []sequence.Step
	}
	byInvariant := map[string]*found{}
	var deadline time.Time
	if *seqTime > 0 {
		deadline = time.Now().Add(*seqTime)
	}
	runs, admitted, refused := 0, 0, 0
	for i := 0; ; i++ {
		if deadline.IsZero() && i >= *seqRuns || !deadline.IsZero() && time.Now().After(deadline) {
			break
		}
		seed := *seqSeed + uint64(i)
		tr := explore(e, seed)
		runs++
		for _, o := range tr.Outcomes {
			switch o.Result {
			case sequence.Admitted:
				admitted++
			case sequence.Refused:
				refused++
			}
		}
		if tr.At < 0 {
			continue
		}
		inv := tr.Invariants()
		steps := make([]sequence.Step, 0, len(tr.Outcomes))
		for _, o := range tr.Outcomes {
			steps = append(steps, o.Step)
		}
		f := byInvariant[inv]
		if f == nil {
			f = &found{}
			byInvariant[inv] = f
		}
		f.count++
		// Shrinking costs many runs; keep the first of each kind and any later one that is
		// already shorter.
		if f.trace.Start == nil || len(steps) < len(f.steps) {
			startW, small := sequence.Shrink(e, tr.Start, steps, inv)
			if f.trace.Start == nil || len(small) < len(f.steps) {
				f.seed, f.steps, f.trace = seed, small, sequence.Run(e, startW, small)
			}
		}
		if !*seqStrict && open(inv) {
			continue
		}
		if deadline.IsZero() && *seqRuns <= 1000 {
			// The default, small run stops at the first failure: one report is enough.
			break
		}
	}
	t.Logf("explorer: %d sequences from seed %d, %d writes admitted, %d refused", runs, *seqSeed, admitted, refused)
	for _, inv := range slices.Sorted(maps.Keys(byInvariant)) {
		f := byInvariant[inv]
		name := fmt.Sprintf("explorer-%s-seed-%d", strings.ReplaceAll(inv, ",", "-"), f.seed)
		c, err := sequence.NewCase(name, fmt.Sprintf("found by the explorer, seed %d, shrunk to %d steps", f.seed, len(f.steps)), f.trace.Start, f.steps, f.trace.Violation)
		if err != nil {
			t.Fatal(err)
		}
		data, err := c.YAML()
		if err != nil {
			t.Fatal(err)
		}
		if *seqSave != "" {
			if err := os.MkdirAll(*seqSave, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(*seqSave, name+".yaml"), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		report := fmt.Sprintf("invariant %s broken in %d sequences; the shortest (seed %d, replay: go test ./policy/ -run TestSequenceExplorer -seq.seed=%d -seq.runs=1 -v):\n%s\ncase file for policy/testdata/sequence/%s.yaml:\n%s",
			inv, f.count, f.seed, f.seed, f.trace.Report(), name, data)
		if !*seqStrict && open(inv) {
			t.Logf("open (%s): %s", openInvariants[strings.Split(inv, ",")[0]], report)
			continue
		}
		t.Error(report)
	}
}

// TestSequenceRegressions replays every case the explorer found: none may break an invariant
// any more (a case marked open logs instead, until its fix lands, unless -seq.strict).
func TestSequenceRegressions(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "sequence", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no cases under testdata/sequence")
	}
	e := policy.NewEngine(policy.DefaultConfig())
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".yaml"), func(t *testing.T) {
			c, err := sequence.LoadCase(file)
			if err != nil {
				t.Fatal(err)
			}
			start, err := c.Start()
			if err != nil {
				t.Fatal(err)
			}
			tr := sequence.Run(e, start, c.Steps)
			for _, o := range tr.Outcomes {
				if o.Result == sequence.Skipped {
					t.Errorf("step does not apply: %s", o)
				}
			}
			switch {
			case tr.At >= 0 && c.Open != "" && !*seqStrict:
				t.Skipf("still open (%s):\n%s", c.Open, tr.Report())
			case tr.At >= 0:
				t.Errorf("%s\n%s", c.Note, tr.Report())
			case c.Open != "":
				t.Logf("passes now: drop open: from %s\n%s", file, tr.Report())
			default:
				t.Logf("\n%s", tr.Report())
			}
		})
	}
}
