package sequence

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/pvguard/pvguard/policy"
)

// Step builders: a step is made from the object as the world holds it now, so its patch is what
// the writer changes.

// PVUpdate makes an update (or status update) of a volume: mutate edits a copy of the current
// object. It returns false when the volume does not exist or the write would change nothing.
func PVUpdate(w *World, who Identity, verb Verb, name, what string, mutate func(*corev1.PersistentVolume)) (Step, bool) {
	old := w.PVs[name]
	if old == nil {
		return Step{}, false
	}
	cur := old.DeepCopy()
	mutate(cur)
	patch, err := MergePatch(old, cur)
	if err != nil || patch == nil {
		return Step{}, false
	}
	return Step{Who: who, Verb: verb, Kind: policy.KindPersistentVolume, Name: name, What: what, Patch: patch}, true
}

// PVCUpdate makes an update (or status update) of a claim.
func PVCUpdate(w *World, who Identity, verb Verb, namespace, name, what string, mutate func(*corev1.PersistentVolumeClaim)) (Step, bool) {
	old := w.PVC(namespace, name)
	if old == nil {
		return Step{}, false
	}
	cur := old.DeepCopy()
	mutate(cur)
	patch, err := MergePatch(old, cur)
	if err != nil || patch == nil {
		return Step{}, false
	}
	return Step{Who: who, Verb: verb, Kind: policy.KindPersistentVolumeClaim, Namespace: namespace, Name: name, What: what, Patch: patch}, true
}

// PVCreate and PVCCreate make creates; the object is recorded whole.
func PVCreate(who Identity, pv *corev1.PersistentVolume, what string) Step {
	data, err := json.Marshal(pruneObject(pv))
	if err != nil {
		panic(fmt.Sprintf("encoding PersistentVolume %s: %v", pv.Name, err))
	}
	return Step{Who: who, Verb: Create, Kind: policy.KindPersistentVolume, Name: pv.Name, What: what, Patch: data}
}

func PVCCreate(who Identity, pvc *corev1.PersistentVolumeClaim, what string) Step {
	data, err := json.Marshal(pruneObject(pvc))
	if err != nil {
		panic(fmt.Sprintf("encoding PersistentVolumeClaim %s/%s: %v", pvc.Namespace, pvc.Name, err))
	}
	return Step{Who: who, Verb: Create, Kind: policy.KindPersistentVolumeClaim, Namespace: pvc.Namespace, Name: pvc.Name, What: what, Patch: data}
}

// PVDelete and PVCDelete make deletes.
func PVDelete(who Identity, name, what string) Step {
	return Step{Who: who, Verb: Delete, Kind: policy.KindPersistentVolume, Name: name, What: what}
}

func PVCDelete(who Identity, namespace, name, what string) Step {
	return Step{Who: who, Verb: Delete, Kind: policy.KindPersistentVolumeClaim, Namespace: namespace, Name: name, What: what}
}

func pruneObject(obj any) any {
	m, err := toMap(obj)
	if err != nil {
		panic(err)
	}
	return prune(m)
}

// Trace is a run of steps from a starting world: each step's outcome, the world after the last
// step run, and the first violation with the index of the step that caused it (-1 for none).
type Trace struct {
	Start     *World
	Outcomes  []Outcome
	End       *World
	Violation []Violation
	At        int
}

// Run applies the steps in order and checks the oracle after every write that changed the
// world; it stops at the first step that breaks an invariant or makes the engine fail.
func Run(e *policy.Engine, start *World, steps []Step) Trace {
	t := Trace{Start: start, End: start, At: -1}
	for _, s := range steps {
		if !t.step(e, s) {
			break
		}
	}
	return t
}

// Explore runs a random sequence of 5 to 20 steps from a random cluster, both from one seed,
// and stops at the first violation.
func Explore(e *policy.Engine, seed uint64) Trace { return ExploreWith(e, seed, Gates{}) }

// ExploreWith is Explore on an apiserver with the feature gates. With MutablePVNodeAffinity on,
// the starting cluster also has pods using some of its claims (Gen.Pods), whose nodes a change of
// a volume's node affinity must keep (I12). With no gate on it is Explore, seed for seed.
func ExploreWith(e *policy.Engine, seed uint64, gates Gates) Trace {
	g := NewGen(seed)
	start := g.World()
	if gates.MutablePVNodeAffinity {
		start.Gates = gates
		g.Pods(start)
	}
	t := Trace{Start: start, End: start, At: -1}
	for range 5 + g.R.IntN(16) {
		if !t.step(e, g.NextStep(t.End)) {
			break
		}
	}
	return t
}

// ExploreUpstream runs a random interleaving of the upstream flows' moves (controllers,
// provisioner, resizer, protection controllers, tenants and admins as the flows have them) from a
// random cluster, and stops at the first move the engine refuses or warns about although the
// oracle sees nothing wrong with it, or that breaks an invariant. A move the oracle objects to
// (upstream's own races can misbind: the PV controller matching a free volume that another
// claim completed its binding to) is rightly refused; upstream retries, and the sequence goes on.
func ExploreUpstream(e *policy.Engine, seed uint64) Trace {
	g := NewGen(seed)
	start := g.World()
	t := Trace{Start: start, End: start, At: -1}
	for range 5 + g.R.IntN(26) {
		s, ok := g.NextUpstreamStep(t.End)
		if !ok {
			break
		}
		before := t.End
		if !t.step(e, s) {
			break
		}
		o := t.Outcomes[len(t.Outcomes)-1]
		if (o.Result == Refused || len(o.Decision.Warn) > 0) && !Unsafe(before, s) {
			t.At = len(t.Outcomes) - 1
			break
		}
	}
	return t
}

// Unguarded returns an engine with every rule off: what the world would be without pvguard.
func Unguarded() *policy.Engine { return unguarded }

var unguarded = func() *policy.Engine {
	var b strings.Builder
	b.WriteString("rules:\n")
	for _, rl := range policy.Catalogue() {
		fmt.Fprintf(&b, "  %s: {action: off}\n", rl.ID)
	}
	c, err := policy.ParseConfig([]byte(b.String()))
	if err != nil {
		panic(fmt.Sprintf("a config with every rule off: %v", err))
	}
	return policy.NewEngine(c)
}()

// Unsafe reports whether the oracle objects to a step, were it admitted.
func Unsafe(w *World, s Step) bool {
	next, out := Apply(unguarded, w, s)
	return out.Result == Admitted && s.Verb != Delete && len(Check(w, next, s)) > 0
}

// step applies one step to the end of the trace and judges it; false means it broke an
// invariant (or the engine failed) and the trace ends there.
func (t *Trace) step(e *policy.Engine, s Step) bool {
	before := t.End
	next, out := Apply(e, before, s)
	t.Outcomes = append(t.Outcomes, out)
	t.End = next
	switch {
	case out.Result == Errored:
		t.Violation = []Violation{{Invariant: "I10", Message: "the engine returned an error: " + out.Reason}}
	case out.Result == Admitted && s.Verb != Delete:
		t.Violation = Check(before, next, s)
	}
	if len(t.Violation) > 0 {
		t.At = len(t.Outcomes) - 1
		return false
	}
	return true
}

// Steps lists the trace's steps.
func (t Trace) Steps() []Step {
	out := make([]Step, 0, len(t.Outcomes))
	for _, o := range t.Outcomes {
		out = append(out, o.Step)
	}
	return out
}

// Invariants lists the invariants of the trace's violation, for comparing shrunk traces.
func (t Trace) Invariants() string {
	var ids []string
	for _, v := range t.Violation {
		ids = append(ids, v.Invariant)
	}
	return strings.Join(ids, ",")
}

// Report renders a trace for a failure message: the starting world, each step with its
// outcome, and the violation.
func (t Trace) Report() string {
	var b strings.Builder
	b.WriteString("starting world:\n")
	for _, line := range Describe(t.Start) {
		b.WriteString("    " + line + "\n")
	}
	b.WriteString("steps:\n")
	for i, o := range t.Outcomes {
		fmt.Fprintf(&b, "  %2d. %s\n", i+1, o)
	}
	if t.At >= 0 {
		fmt.Fprintf(&b, "after step %d:\n", t.At+1)
		for _, v := range t.Violation {
			b.WriteString("    " + v.String() + "\n")
		}
	}
	return b.String()
}

// Shrink looks for a shorter sequence from a smaller world that still breaks one of the same
// invariants: it drops the steps after the violation, then single steps and single objects for
// as long as the violation stays.
func Shrink(e *policy.Engine, start *World, steps []Step, want string) (*World, []Step) {
	if t := Run(e, start, steps); t.At >= 0 {
		steps = steps[:t.At+1]
	}
	return ShrinkWhile(e, start, steps, func(t Trace) bool {
		return t.At >= 0 && sharesInvariant(t.Invariants(), want)
	})
}

// ShrinkWorld drops the objects of the starting world that no step names, for as long as the
// run still satisfies keep. The steps stay as they are: a sequence of upstream moves, shortened,
// is no longer what upstream would do.
func ShrinkWorld(e *policy.Engine, start *World, steps []Step, keep func(Trace) bool) *World {
	named := map[string]bool{}
	for _, s := range steps {
		named[string(s.Kind)+"/"+s.Namespace+"/"+s.Name] = true
	}
	for _, o := range start.Objects() {
		var key string
		switch t := o.(type) {
		case *corev1.PersistentVolume:
			key = string(policy.KindPersistentVolume) + "//" + t.Name
		case *corev1.PersistentVolumeClaim:
			key = string(policy.KindPersistentVolumeClaim) + "/" + t.Namespace + "/" + t.Name
		}
		if named[key] {
			continue
		}
		cand := start.Clone()
		cand.remove(o)
		if keep(Run(e, cand, steps)) {
			start = cand
		}
	}
	return start
}

// ShrinkWhile looks for a shorter sequence from a smaller world whose run still satisfies keep.
func ShrinkWhile(e *policy.Engine, start *World, steps []Step, keep func(Trace) bool) (*World, []Step) {
	still := func(w *World, ss []Step) bool { return keep(Run(e, w, ss)) }
	for changed := true; changed; {
		changed = false
		for i := 0; i < len(steps); i++ {
			cand := append(append([]Step{}, steps[:i]...), steps[i+1:]...)
			if still(start, cand) {
				steps, changed = cand, true
				i--
			}
		}
		for _, o := range start.Objects() {
			cand := start.Clone()
			cand.remove(o)
			if still(cand, steps) {
				start, changed = cand, true
			}
		}
		// Fields of a multi-field update that the violation does not need.
		for i := range steps {
			if steps[i].Verb != Update && steps[i].Verb != UpdateStatus {
				continue
			}
			for _, smaller := range smallerPatches(steps[i].Patch) {
				cand := append([]Step{}, steps...)
				cand[i].Patch = smaller
				cand[i].What = strings.TrimSuffix(steps[i].What, shrunkMark) + shrunkMark
				if still(start, cand) {
					steps, changed = cand, true
					break
				}
			}
		}
	}
	return start, steps
}

const shrunkMark = " [some fields shrunk away]"

// smallerPatches lists the patches with one leaf of a patch removed (empty objects left behind
// are removed too); a patch with a single leaf has none.
func smallerPatches(patch json.RawMessage) []json.RawMessage {
	var p map[string]any
	if err := json.Unmarshal(patch, &p); err != nil {
		return nil
	}
	var paths [][]string
	var walk func(m map[string]any, at []string)
	walk = func(m map[string]any, at []string) {
		for k, v := range m {
			path := append(append([]string{}, at...), k)
			if sub, ok := v.(map[string]any); ok && len(sub) > 0 {
				walk(sub, path)
				continue
			}
			paths = append(paths, path)
		}
	}
	walk(p, nil)
	if len(paths) < 2 {
		return nil
	}
	slices.SortFunc(paths, func(a, b []string) int { return strings.Compare(strings.Join(a, "."), strings.Join(b, ".")) })
	var out []json.RawMessage
	for _, path := range paths {
		var c map[string]any
		if err := json.Unmarshal(patch, &c); err != nil {
			return nil
		}
		dropPath(c, path)
		data, err := json.Marshal(c)
		if err == nil {
			out = append(out, data)
		}
	}
	return out
}

func dropPath(m map[string]any, path []string) {
	if len(path) == 1 {
		delete(m, path[0])
		return
	}
	sub, ok := m[path[0]].(map[string]any)
	if !ok {
		return
	}
	dropPath(sub, path[1:])
	if len(sub) == 0 {
		delete(m, path[0])
	}
}

func sharesInvariant(got, want string) bool {
	for _, g := range strings.Split(got, ",") {
		for _, w := range strings.Split(want, ",") {
			if g == w {
				return true
			}
		}
	}
	return false
}
