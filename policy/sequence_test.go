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

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/test/sequence"
	"github.com/pvguard/pvguard/test/testobj"
)

// The stateful tests of the deny invariants: random sequences of writes from generated clusters,
// judged by an oracle of the invariants (test/sequence), the regression cases they found
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
	seqStrict = flag.Bool("seq.strict", os.Getenv("PVGUARD_SEQ_STRICT") != "", "fail on the regression cases still marked open (Case.Open) too")
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

// kindOf groups violations for the report: the invariants broken and the verb and kind of the
// write that broke them.
func kindOf(inv string, s sequence.Step) string {
	return fmt.Sprintf("%s by %s of a %s", inv, s.Verb, s.Kind)
}

func TestSequenceExplorer(t *testing.T) {
	e := policy.NewEngine(policy.DefaultConfig())
	type found struct {
		inv   string
		count int
		seed  uint64
		trace sequence.Trace
		steps []sequence.Step
	}
	byKind := map[string]*found{}
	var deadline time.Time
	if *seqTime > 0 {
		deadline = time.Now().Add(*seqTime)
	}
	runs, admitted := 0, 0
	refusedBy := map[string]int{}
	// The status writes apart: the status strategies keep metadata, so a status write can remove
	// a protection finalizer or a binder annotation, which the rules must refuse as on the object.
	statusAdmitted, statusRefusedBy := 0, map[string]int{}
	for i := 0; ; i++ {
		if deadline.IsZero() && i >= *seqRuns || !deadline.IsZero() && time.Now().After(deadline) {
			break
		}
		seed := *seqSeed + uint64(i)
		tr := sequence.Explore(e, seed)
		runs++
		for _, o := range tr.Outcomes {
			status := o.Step.Verb == sequence.UpdateStatus
			switch o.Result {
			case sequence.Admitted:
				admitted++
				if status {
					statusAdmitted++
				}
			case sequence.Refused:
				for _, id := range strings.Split(o.Reason, ",") {
					refusedBy[id]++
					if status {
						statusRefusedBy[id]++
					}
				}
			case sequence.APIServer:
				refusedBy["apiserver"]++
			}
		}
		if tr.At < 0 {
			continue
		}
		inv, steps := tr.Invariants(), tr.Steps()
		key := kindOf(inv, tr.Outcomes[tr.At].Step)
		f := byKind[key]
		if f == nil {
			f = &found{inv: inv}
			byKind[key] = f
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
		if deadline.IsZero() && *seqRuns <= 1000 {
			// The default, small run stops at the first failure: one report is enough.
			break
		}
	}
	var refused []string
	for _, why := range slices.Sorted(maps.Keys(refusedBy)) {
		refused = append(refused, fmt.Sprintf("%s %d", why, refusedBy[why]))
	}
	t.Logf("explorer: %d sequences from seed %d, %d writes admitted; refusals (a write may count for several rules): %s", runs, *seqSeed, admitted, strings.Join(refused, ", "))
	refused = nil
	for _, why := range slices.Sorted(maps.Keys(statusRefusedBy)) {
		refused = append(refused, fmt.Sprintf("%s %d", why, statusRefusedBy[why]))
	}
	t.Logf("explorer: of them status writes: %d admitted; refusals: %s", statusAdmitted, strings.Join(refused, ", "))
	for _, key := range slices.Sorted(maps.Keys(byKind)) {
		f := byKind[key]
		inv := f.inv
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
		report := fmt.Sprintf("invariant %s broken in %d sequences (%s); the shortest (seed %d, replay: go test ./policy/ -run TestSequenceExplorer -seq.seed=%d -seq.runs=1 -v):\n%s\ncase file for policy/testdata/sequence/%s.yaml:\n%s",
			inv, f.count, key, f.seed, f.seed, f.trace.Report(), name, data)
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

// TestUpstreamFlows runs the upstream storage flows by their real identities on a default
// install: every write is admitted with no deny and no warning, and breaks no invariant.
func TestUpstreamFlows(t *testing.T) {
	e := policy.NewEngine(policy.DefaultConfig())
	for _, f := range sequence.Flows() {
		t.Run(f.Name, func(t *testing.T) {
			s := sequence.NewScript(e, f.Start())
			f.Run(s)
			var problems []string
			for _, b := range s.Broken {
				problems = append(problems, "the flow is broken: "+b)
			}
			var steps strings.Builder
			for i, o := range s.Outcomes {
				fmt.Fprintf(&steps, "  %2d. %s\n", i+1, o)
				if o.Result != sequence.Admitted {
					problems = append(problems, fmt.Sprintf("write %d not admitted: %s", i+1, o))
				}
				for _, f := range append(append([]policy.Finding{}, o.Decision.Deny...), o.Decision.Warn...) {
					problems = append(problems, fmt.Sprintf("write %d (%s %s %s) has a %s finding: %s", i+1, o.Step.Who, o.Step.Verb, o.Step.Name, f.Action, f))
				}
			}
			for _, v := range s.Violations {
				problems = append(problems, "the oracle objects to an upstream flow (a bug in the oracle or the flow): "+v)
			}
			if len(problems) > 0 {
				t.Errorf("%s\nflow:\n%s", strings.Join(problems, "\n"), steps.String())
			}
		})
	}
}

// TestOracle holds the oracle to the invariants on hand-made writes: it must see each kind of
// violation (or the explorer could pass by seeing nothing), and must not object to the upstream
// exceptions. The writes are applied with every rule off (sequence.Unguarded), so nothing refuses them.
func TestOracle(t *testing.T) {
	e := sequence.Unguarded()
	// podOnNode is a bound pair on node-a and node-b, and a pod of the claim on node in phase,
	// with the MutablePVNodeAffinity gate on.
	podOnNode := func(node string, phase corev1.PodPhase) func() *sequence.World {
		return func() *sequence.World {
			w := sequence.BaseWorld()
			pv, c := sequence.Volume("pv-1", "1Gi", ""), sequence.Claim("team-a", "data", "uid-data", "1Gi", "")
			pv.Spec.ClaimRef, pv.Status.Phase, pv.Spec.NodeAffinity = sequence.RefTo(c), corev1.VolumeBound, sequence.HostAffinity("node-a", "node-b")
			c.Spec.VolumeName, c.Status.Phase = "pv-1", corev1.ClaimBound
			sequence.SetAnn(&c.ObjectMeta, sequence.AnnBindCompleted, "yes")
			w.Put(pv)
			w.Put(c)
			w.Put(testobj.Pod("team-a", "app-0", node, phase, "data"))
			w.Gates.MutablePVNodeAffinity = true
			return w
		}
	}

	pair := func(pvName, ns, name, uid string) (*corev1.PersistentVolume, *corev1.PersistentVolumeClaim) {
		pv, c := sequence.Volume(pvName, "1Gi", ""), sequence.Claim(ns, name, uid, "1Gi", "")
		pv.Spec.ClaimRef, pv.Status.Phase = sequence.RefTo(c), corev1.VolumeBound
		c.Spec.VolumeName, c.Status.Phase = pvName, corev1.ClaimBound
		c.Status.Capacity = pv.Spec.Capacity.DeepCopy()
		sequence.SetAnn(&c.ObjectMeta, sequence.AnnBindCompleted, "yes")
		return pv, c
	}
	bound := func() *sequence.World {
		pv, c := pair("pv-1", "team-a", "data", "uid-data")
		return sequence.NewWorld(pv, c)
	}
	pvStep := func(who sequence.Identity, verb sequence.Verb, name string, m func(*corev1.PersistentVolume)) func(*sequence.World) (sequence.Step, bool) {
		return func(w *sequence.World) (sequence.Step, bool) { return sequence.PVUpdate(w, who, verb, name, "", m) }
	}
	pvcStep := func(who sequence.Identity, name string, m func(*corev1.PersistentVolumeClaim)) func(*sequence.World) (sequence.Step, bool) {
		return func(w *sequence.World) (sequence.Step, bool) {
			return sequence.PVCUpdate(w, who, sequence.Update, "team-a", name, "", m)
		}
	}
	cases := []struct {
		name  string
		world func() *sequence.World
		step  func(*sequence.World) (sequence.Step, bool)
		want  string // the invariants the oracle reports, comma separated; "" for none
	}{
		{"clear claimRef of a bound pair", bound, pvStep(sequence.Tenant, sequence.Update, "pv-1", func(pv *corev1.PersistentVolume) { pv.Spec.ClaimRef = nil }), "I1,I3"},
		{"drop the uid of a bound pair", bound, pvStep(sequence.Admin, sequence.Update, "pv-1", func(pv *corev1.PersistentVolume) { pv.Spec.ClaimRef.UID = "" }), "I1,I2,I3"},
		{"link a volume a completed claim names to another claim", func() *sequence.World {
			pv, c := pair("pv-1", "team-a", "data", "uid-data")
			pv.Spec.ClaimRef = nil
			return sequence.NewWorld(pv, c, sequence.Claim("team-a", "other", "uid-other", "1Gi", ""))
		}, pvStep(sequence.Admin, sequence.Update, "pv-1", func(pv *corev1.PersistentVolume) { pv.Spec.ClaimRef = sequence.RefByName("team-a", "other") }), "I2"},
		{"clear the link to a live pending claim", func() *sequence.World {
			pv, c := pair("pv-1", "team-a", "data", "uid-data")
			c.Spec.VolumeName, c.Annotations = "", nil
			return sequence.NewWorld(pv, c)
		}, pvStep(sequence.Admin, sequence.Update, "pv-1", func(pv *corev1.PersistentVolume) { pv.Spec.ClaimRef = nil }), "I3"},
		{"a uid of nobody", func() *sequence.World { return sequence.NewWorld(sequence.Volume("pv-1", "1Gi", "")) },
			pvStep(sequence.Admin, sequence.Update, "pv-1", func(pv *corev1.PersistentVolume) {
				pv.Spec.ClaimRef = sequence.RefByName("team-a", "gone")
				pv.Spec.ClaimRef.UID = "uid-gone"
			}), "I4"},
		{"a claim names a volume linked to another live claim", func() *sequence.World {
			pv, c := pair("pv-1", "team-a", "data", "uid-data")
			return sequence.NewWorld(pv, c, sequence.Claim("team-a", "thief", "uid-thief", "1Gi", ""))
		}, pvcStep(sequence.Tenant, "thief", func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeName = "pv-1" }), "I5"},
		{"a volume linked to a claim bound elsewhere", func() *sequence.World {
			pv, c := pair("pv-1", "team-a", "data", "uid-data")
			return sequence.NewWorld(pv, c, sequence.Volume("pv-2", "1Gi", ""))
		}, pvStep(sequence.Admin, sequence.Update, "pv-2", func(pv *corev1.PersistentVolume) {
			pv.Spec.ClaimRef = sequence.RefByName("team-a", "data")
		}), "I5"},
		{"a populator's hand-off to the claim its claim was made for", handOffWorld(true), pvStep(sequence.Populator, sequence.Update, "pv-1", func(pv *corev1.PersistentVolume) {
			pv.Spec.ClaimRef = &corev1.ObjectReference{Namespace: "team-a", Name: "db", UID: handOffUID}
		}), ""},
		{"a forged hand-off: the claim the volume leaves was not made for the target", handOffWorld(false), pvStep(sequence.Tenant, sequence.Update, "pv-1", func(pv *corev1.PersistentVolume) {
			pv.Spec.ClaimRef = &corev1.ObjectReference{Namespace: "team-a", Name: "db", UID: handOffUID}
		}), "I1,I2,I3"},
		{"a hand-off to a target that waits for no data", func() *sequence.World {
			w := handOffWorld(true)()
			db := w.PVC("team-a", "db").DeepCopy()
			db.Spec.DataSourceRef = nil
			w.Put(db)
			return w
		}, pvStep(sequence.Populator, sequence.Update, "pv-1", func(pv *corev1.PersistentVolume) {
			pv.Spec.ClaimRef = &corev1.ObjectReference{Namespace: "team-a", Name: "db", UID: handOffUID}
		}), "I1,I2,I3"},
		{"a second volume linked to a claim another volume is linked to", func() *sequence.World {
			pv, c := pair("pv-1", "team-a", "data", "uid-data")
			c.Spec.VolumeName, c.Annotations, c.Status.Phase = "", nil, corev1.ClaimPending
			return sequence.NewWorld(pv, c, sequence.Volume("pv-2", "1Gi", ""))
		}, pvStep(sequence.PVBinder, sequence.Update, "pv-2", func(pv *corev1.PersistentVolume) {
			pv.Spec.ClaimRef = &corev1.ObjectReference{Namespace: "team-a", Name: "data", UID: "uid-data"}
		}), "I11"},
		{"bind-completed removed", bound, pvcStep(sequence.Tenant, "data", func(c *corev1.PersistentVolumeClaim) { c.Annotations = nil }), "I6"},
		{"a volume too small at bind", func() *sequence.World {
			return sequence.NewWorld(sequence.Volume("pv-1", "1Gi", ""), sequence.Claim("team-a", "data", "uid-data", "2Gi", ""))
		}, pvcStep(sequence.Tenant, "data", func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeName = "pv-1" }), "I7"},
		{"a confirmation left by an earlier write", func() *sequence.World {
			w := bound()
			pv := w.PVs["pv-1"].DeepCopy()
			sequence.SetAnn(&pv.ObjectMeta, sequence.AnnConfirm, "Delete")
			w.Put(pv)
			return w
		}, pvStep(sequence.Admin, sequence.Update, "pv-1", func(pv *corev1.PersistentVolume) {
			pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimDelete
		}), "I8"},
		{"a tenant removes pv-protection from a bound volume", bound, pvStep(sequence.Tenant, sequence.Update, "pv-1", func(pv *corev1.PersistentVolume) {
			pv.Finalizers = nil
		}), "I9"},
		{"a claimRef without a name", func() *sequence.World { return sequence.NewWorld(sequence.Volume("pv-1", "1Gi", "")) },
			pvStep(sequence.Admin, sequence.Update, "pv-1", func(pv *corev1.PersistentVolume) { pv.Spec.ClaimRef = sequence.RefByName("team-a", "") }), "I10"},

		{"the provisioner saves a volume for a claim that is gone", sequence.BaseWorld, func(*sequence.World) (sequence.Step, bool) {
			return sequence.PVCreate(sequence.Provisioner, sequence.Provisioned(sequence.Claim("team-a", "gone", "uid-gone", "1Gi", sequence.ClassFast)), ""), true
		}, ""},
		{"rollback: the claim is bound elsewhere", func() *sequence.World {
			pv, c := pair("pv-1", "team-a", "data", "uid-data")
			other := sequence.Volume("pv-2", "1Gi", "")
			other.Spec.ClaimRef = sequence.RefTo(c)
			return sequence.NewWorld(pv, c, other)
		}, pvStep(sequence.PVBinder, sequence.Update, "pv-2", func(pv *corev1.PersistentVolume) { pv.Spec.ClaimRef.UID = "" }), ""},
		{"re-link a lost claimRef mid-expansion", func() *sequence.World {
			pv, c := pair("pv-1", "team-a", "data", "uid-data")
			pv.Spec.ClaimRef = nil
			c.Spec.Resources.Requests[corev1.ResourceStorage] = sequence.Quantity("5Gi")
			return sequence.NewWorld(pv, c)
		}, pvStep(sequence.PVBinder, sequence.Update, "pv-1", func(pv *corev1.PersistentVolume) {
			pv.Spec.ClaimRef = sequence.RefTo(sequence.Claim("team-a", "data", "uid-data", "1Gi", ""))
		}), ""},
		{"the provisioner removes its finalizer from a deleted volume whose claim is gone", func() *sequence.World {
			pv := sequence.Provisioned(sequence.Claim("team-a", "gone", "uid-gone", "1Gi", sequence.ClassFast))
			pv.Status.Phase = corev1.VolumeReleased
			pv.DeletionTimestamp = &metav1.Time{}
			return sequence.NewWorld(pv)
		}, pvStep(sequence.Provisioner, sequence.Update, "pvc-uid-gone", func(pv *corev1.PersistentVolume) { pv.Finalizers = nil }), ""},
		{"the provisioner removes its finalizer from a deleted volume whose claim went elsewhere", func() *sequence.World {
			pv, c := pair("pv-1", "team-a", "data", "uid-data")
			stale := sequence.Provisioned(c)
			stale.Status.Phase = corev1.VolumeReleased
			stale.DeletionTimestamp = &metav1.Time{}
			return sequence.NewWorld(pv, c, stale)
		}, pvStep(sequence.Provisioner, sequence.Update, "pvc-uid-data", func(pv *corev1.PersistentVolume) { pv.Finalizers = nil }), ""},
		{"the provisioner drops its finalizer from a Bound volume kept under Retain", func() *sequence.World {
			c := sequence.Claim("team-a", "data", "uid-data", "1Gi", sequence.ClassFast)
			pv := sequence.Provisioned(c)
			pv.Spec.PersistentVolumeReclaimPolicy, pv.Status.Phase = corev1.PersistentVolumeReclaimRetain, corev1.VolumeBound
			c.Spec.VolumeName = pv.Name
			return sequence.NewWorld(pv, c)
		}, pvStep(sequence.Provisioner, sequence.Update, "pvc-uid-data", func(pv *corev1.PersistentVolume) {
			sequence.DelFin(&pv.ObjectMeta, sequence.FinProvisioner)
		}), ""},
		{"a tenant removes the provisioner's finalizer from a Bound Delete volume", func() *sequence.World {
			c := sequence.Claim("team-a", "data", "uid-data", "1Gi", sequence.ClassFast)
			pv := sequence.Provisioned(c)
			pv.Status.Phase = corev1.VolumeBound
			c.Spec.VolumeName = pv.Name
			return sequence.NewWorld(pv, c)
		}, pvStep(sequence.Tenant, sequence.Update, "pvc-uid-data", func(pv *corev1.PersistentVolume) {
			sequence.DelFin(&pv.ObjectMeta, sequence.FinProvisioner)
		}), "I9"},
		{"with MutablePVNodeAffinity, a bound volume narrowed away from its claim's running pod", podOnNode("node-a", corev1.PodRunning),
			pvStep(sequence.Admin, sequence.Update, "pv-1", func(pv *corev1.PersistentVolume) { pv.Spec.NodeAffinity = sequence.HostAffinity("node-b") }), "I12"},
		{"with MutablePVNodeAffinity, a bound volume narrowed to its claim's running pod's node", podOnNode("node-a", corev1.PodRunning),
			pvStep(sequence.Admin, sequence.Update, "pv-1", func(pv *corev1.PersistentVolume) { pv.Spec.NodeAffinity = sequence.HostAffinity("node-a") }), ""},
		{"with MutablePVNodeAffinity, a bound volume narrowed away from a finished pod's node", podOnNode("node-a", corev1.PodSucceeded),
			pvStep(sequence.Admin, sequence.Update, "pv-1", func(pv *corev1.PersistentVolume) { pv.Spec.NodeAffinity = sequence.HostAffinity("node-b") }), ""},
		{"with MutablePVNodeAffinity, a bound volume narrowed away from a node it already excluded", podOnNode("node-c", corev1.PodRunning),
			pvStep(sequence.Admin, sequence.Update, "pv-1", func(pv *corev1.PersistentVolume) { pv.Spec.NodeAffinity = sequence.HostAffinity("node-b") }), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := tc.world()
			st, ok := tc.step(w)
			if !ok {
				t.Fatal("the step changes nothing")
			}
			next, out := sequence.Apply(e, w, st)
			if out.Result != sequence.Admitted {
				t.Fatalf("not applied: %s", out)
			}
			var got []string
			for _, v := range sequence.Check(w, next, st) {
				got = append(got, v.Invariant)
			}
			if g := strings.Join(slices.Compact(got), ","); g != tc.want {
				t.Errorf("oracle reports %q, want %q: %v", g, tc.want, sequence.Check(w, next, st))
			}
		})
	}
}

// TestUpstreamExplorer runs random interleavings of the upstream flows' moves from random
// clusters: every move is admitted with no deny and no warning, and breaks no invariant. It finds
// the flows TestUpstreamFlows does not list.
func TestUpstreamExplorer(t *testing.T) {
	e := policy.NewEngine(policy.DefaultConfig())
	type found struct {
		count int
		seed  uint64
		trace sequence.Trace
	}
	byKind := map[string]*found{}
	var deadline time.Time
	if *seqTime > 0 {
		deadline = time.Now().Add(*seqTime)
	}
	runs, moves := 0, 0
	justified := map[string]int{}
	for i := 0; ; i++ {
		if deadline.IsZero() && i >= *seqRuns || !deadline.IsZero() && time.Now().After(deadline) {
			break
		}
		seed := *seqSeed + uint64(i)
		tr := sequence.ExploreUpstream(e, seed)
		runs++
		moves += len(tr.Outcomes)
		for i, o := range tr.Outcomes {
			if o.Result == sequence.Refused && i != tr.At {
				justified[o.Reason]++
			}
		}
		if tr.At < 0 {
			continue
		}
		key := upstreamKind(tr.Outcomes[tr.At])
		f := byKind[key]
		if f == nil {
			f = &found{}
			byKind[key] = f
		}
		f.count++
		if f.trace.Start == nil || tr.At+1 < len(f.trace.Outcomes) {
			steps := tr.Steps()[:tr.At+1]
			startW := sequence.ShrinkWorld(e, tr.Start, steps, func(t sequence.Trace) bool {
				return len(t.Outcomes) == len(steps) && upstreamKind(t.Outcomes[len(steps)-1]) == key
			})
			f.seed, f.trace = seed, sequence.Run(e, startW, steps)
		}
	}
	var refused []string
	for _, why := range slices.Sorted(maps.Keys(justified)) {
		refused = append(refused, fmt.Sprintf("%s %d", why, justified[why]))
	}
	t.Logf("upstream explorer: %d sequences from seed %d, %d moves; refused as the oracle also objects (upstream's races): %s",
		runs, *seqSeed, moves, strings.Join(refused, ", "))
	for _, key := range slices.Sorted(maps.Keys(byKind)) {
		f := byKind[key]
		report := fmt.Sprintf("%d sequences of upstream moves stop at %q; the shortest (seed %d, replay: go test ./policy/ -run TestUpstreamExplorer -seq.seed=%d -seq.runs=1 -v):\n%s",
			f.count, key, f.seed, f.seed, f.trace.Report())
		t.Error(report)
	}
}

// upstreamKind names a move that stopped an upstream sequence: who, what, and the rules that
// refused or warned (or the invariant it broke).
func upstreamKind(o sequence.Outcome) string {
	why := o.Reason
	if w := o.Warned(); w != "" {
		why += " warns " + w
	}
	if o.Result == sequence.Admitted && why == "" {
		return ""
	}
	return fmt.Sprintf("%s %s: %s %s", o.Step.Who, o.Step.What, o.Result, strings.TrimSpace(why))
}

// TestStepReplaysTheWrite holds the model to what a write does: a step recorded as a merge
// patch and applied to the object it was made from gives the object the writer sent (for the
// main resource; a status write changes the status and the metadata but not the spec, as the
// status strategies do, an update of the main resource all but the status; neither changes the
// object's identity).
func TestStepReplaysTheWrite(t *testing.T) {
	e := sequence.Unguarded()
	base := func() *corev1.PersistentVolume {
		pv := sequence.Volume("pv-1", "1Gi", "", corev1.ReadWriteOnce, corev1.ReadOnlyMany)
		pv.Spec.ClaimRef = sequence.RefTo(sequence.Claim("team-a", "data", "uid-data", "1Gi", ""))
		sequence.SetAnn(&pv.ObjectMeta, sequence.AnnBoundBy, "yes")
		sequence.AddFin(&pv.ObjectMeta, sequence.FinProvisioner)
		pv.Status.Phase = corev1.VolumeBound
		return pv
	}
	for _, tc := range []struct {
		name   string
		verb   sequence.Verb
		mutate func(*corev1.PersistentVolume)
		// want edits the original into what the apiserver stores; nil means the mutation itself.
		want func(*corev1.PersistentVolume)
	}{
		{"clear claimRef", sequence.Update, func(pv *corev1.PersistentVolume) { pv.Spec.ClaimRef = nil }, nil},
		{"drop the uid", sequence.Update, func(pv *corev1.PersistentVolume) { pv.Spec.ClaimRef.UID = "" }, nil},
		{"remove the only annotation", sequence.Update, func(pv *corev1.PersistentVolume) { pv.Annotations = nil }, nil},
		{"remove one finalizer of two", sequence.Update, func(pv *corev1.PersistentVolume) { sequence.DelFin(&pv.ObjectMeta, sequence.FinPV) }, nil},
		{"one access mode less", sequence.Update, func(pv *corev1.PersistentVolume) { pv.Spec.AccessModes = pv.Spec.AccessModes[:1] }, nil},
		{"capacity and reclaim policy", sequence.Update, func(pv *corev1.PersistentVolume) {
			pv.Spec.Capacity[corev1.ResourceStorage] = sequence.Quantity("5Gi")
			pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimDelete
		}, nil},
		{"status through the main resource is dropped", sequence.Update, func(pv *corev1.PersistentVolume) {
			pv.Status.Phase = corev1.VolumeReleased
			pv.Spec.ClaimRef = nil
		}, func(pv *corev1.PersistentVolume) { pv.Spec.ClaimRef = nil }},
		{"spec through status is dropped", sequence.UpdateStatus, func(pv *corev1.PersistentVolume) {
			pv.Status.Phase = corev1.VolumeReleased
			pv.Spec.ClaimRef = nil
		}, func(pv *corev1.PersistentVolume) { pv.Status.Phase = corev1.VolumeReleased }},
		{"metadata through status is kept", sequence.UpdateStatus, func(pv *corev1.PersistentVolume) {
			pv.Status.Phase = corev1.VolumeReleased
			sequence.DelFin(&pv.ObjectMeta, sequence.FinProvisioner)
			sequence.DelAnn(&pv.ObjectMeta, sequence.AnnBoundBy)
			pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimDelete
		}, func(pv *corev1.PersistentVolume) {
			pv.Status.Phase = corev1.VolumeReleased
			sequence.DelFin(&pv.ObjectMeta, sequence.FinProvisioner)
			sequence.DelAnn(&pv.ObjectMeta, sequence.AnnBoundBy)
		}},
		{"identity through status is kept", sequence.UpdateStatus, func(pv *corev1.PersistentVolume) {
			pv.Status.Phase = corev1.VolumeReleased
			pv.UID, pv.Generation = "uid-other", 7
		}, func(pv *corev1.PersistentVolume) { pv.Status.Phase = corev1.VolumeReleased }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := sequence.NewWorld(base())
			st, ok := sequence.PVUpdate(w, sequence.Admin, tc.verb, "pv-1", tc.name, tc.mutate)
			if !ok {
				t.Fatal("the write changes nothing")
			}
			next, out := sequence.Apply(e, w, st)
			if out.Result != sequence.Admitted {
				t.Fatalf("not applied: %s", out)
			}
			want := base()
			if tc.want != nil {
				tc.want(want)
			} else {
				tc.mutate(want)
			}
			if got := next.PVs["pv-1"]; !equality.Semantic.DeepEqual(got, want) {
				t.Errorf("patch %s gave\n%s\nwant\n%s", st.Patch, sequence.DescribeObject(got), sequence.DescribeObject(want))
			}
		})
	}
}

// handOffUID is the uid of a claim a populator fills.
const handOffUID = "0f5c3f5e-6b0a-4c47-9d43-7c2f2b1e9a10"

// handOffWorld is a volume bound to a populator's claim (made for team-a/db, named after its uid,
// when madeFor) and team-a/db waiting for its data.
func handOffWorld(madeFor bool) func() *sequence.World {
	return func() *sequence.World {
		name := "prime-" + handOffUID
		if !madeFor {
			name = "data"
		}
		pv, c := sequence.Volume("pv-1", "1Gi", ""), sequence.Claim("populators", name, "uid-prime", "1Gi", "")
		pv.Spec.ClaimRef, pv.Status.Phase = sequence.RefTo(c), corev1.VolumeBound
		c.Spec.VolumeName, c.Status.Phase = "pv-1", corev1.ClaimBound
		sequence.SetAnn(&c.ObjectMeta, sequence.AnnBindCompleted, "yes")
		target := sequence.Claim("team-a", "db", handOffUID, "1Gi", "")
		group := "example.io"
		target.Spec.DataSourceRef = &corev1.TypedObjectReference{APIGroup: &group, Kind: "Hello", Name: "hello"}
		return sequence.NewWorld(pv, c, target)
	}
}

// TestSequenceExplorerMutableNodeAffinity explores with the apiserver's MutablePVNodeAffinity
// gate on, from clusters whose claims have pods: node affinity changes of linked volumes are then
// admitted by the apiserver, and must keep the nodes the claims are used on (I12). The explorer
// must reach both kinds of change: refused, and admitted by the apiserver and the rules.
func TestSequenceExplorerMutableNodeAffinity(t *testing.T) {
	e := policy.NewEngine(policy.DefaultConfig())
	gates := sequence.Gates{MutablePVNodeAffinity: true}
	changes := map[string]int{}
	for i := range *seqRuns {
		seed := *seqSeed + uint64(i)
		tr := sequence.ExploreWith(e, seed, gates)
		for _, o := range tr.Outcomes {
			if o.Step.Kind != policy.KindPersistentVolume || !strings.HasPrefix(o.Step.What, "node affinity") || o.Review == nil ||
				o.Review.OldPV == nil || o.Review.OldPV.Spec.ClaimRef == nil || o.Review.OldPV.Spec.NodeAffinity == nil {
				continue
			}
			changes[string(o.Result)+" "+o.Reason]++
		}
		if tr.At < 0 {
			continue
		}
		startW, small := sequence.Shrink(e, tr.Start, tr.Steps(), tr.Invariants())
		c, err := sequence.NewCase(fmt.Sprintf("explorer-gated-%s-seed-%d", tr.Invariants(), seed), "found by the explorer with MutablePVNodeAffinity on", startW, small, sequence.Run(e, startW, small).Violation)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := c.YAML()
		t.Fatalf("invariant %s broken (seed %d, replay: go test ./policy/ -run TestSequenceExplorerMutableNodeAffinity -seq.seed=%d -seq.runs=1 -v):\n%s\ncase:\n%s",
			tr.Invariants(), seed, seed, sequence.Run(e, startW, small).Report(), data)
	}
	t.Logf("changes of a linked volume's node affinity, by outcome: %v", changes)
	admitted, refused := 0, 0
	for k, n := range changes {
		switch {
		case strings.HasPrefix(k, string(sequence.Admitted)):
			admitted += n
		case strings.Contains(k, "PVG009"):
			refused += n
		}
	}
	if *seqRuns >= 200 && (admitted == 0 || refused == 0) {
		t.Errorf("the explorer made %d admitted and %d PVG009-refused changes of a linked volume's node affinity; want both", admitted, refused)
	}
}
