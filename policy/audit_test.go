package policy_test

import (
	"reflect"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pvguard/pvguard/clusterstate"
	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/storage"
	"github.com/pvguard/pvguard/test/gen"
	"github.com/pvguard/pvguard/test/testobj"
)

func TestAudit(t *testing.T) {
	now := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
	block := corev1.PersistentVolumeBlock
	good := testobj.PVC("team-a", "good", testobj.ClaimBoundTo("pv-good"), testobj.ClaimPhase(corev1.ClaimBound))
	modeClaim := testobj.PVC("team-a", "block", testobj.ClaimVolumeMode(block), testobj.ClaimBoundTo("pv-fs"))
	goldClaim := testobj.PVC("team-a", "gold", testobj.ClaimVolumeAttributesClass("gold"), testobj.ClaimBoundTo("pv-silver"),
		testobj.ClaimCurrentAttributesClass("gold"))
	// modifying asked to move from gold to silver; the external-resizer has not modified the
	// volume yet.
	modifying := testobj.PVC("team-a", "modifying", testobj.ClaimVolumeAttributesClass("silver"), testobj.ClaimBoundTo("pv-gold"),
		testobj.ClaimCurrentAttributesClass("gold"), testobj.ClaimModifyingTo("silver"))
	released := func(age time.Duration) testobj.PVMod {
		return func(pv *corev1.PersistentVolume) {
			pv.Status.Phase = corev1.VolumeReleased
			at := metav1.NewTime(now.Add(-age))
			pv.Status.LastPhaseTransitionTime = &at
		}
	}
	// A claim scheduled to node-1 bound to volumes pinned to a host, in a state without nodes
	// (as `kubectl get pv,pvc,sc -A -o yaml` writes one).
	scheduledTo := func(name, volume string) *corev1.PersistentVolumeClaim {
		return testobj.PVC("team-a", name, testobj.ClaimBoundTo(volume), testobj.ClaimPhase(corev1.ClaimBound),
			testobj.ClaimMeta(testobj.Annotation(storage.AnnSelectedNode, "node-1")))
	}
	onNode2, onNode1 := scheduledTo("on-node-2", "pv-node-2"), scheduledTo("on-node-1", "pv-node-1")
	expanding := testobj.PVC("team-a", "grow", testobj.Request("20Gi"), testobj.ClaimBoundTo("pv-x"),
		testobj.ClaimBoundStatus(testobj.PV("pv-x", testobj.Capacity("10Gi"))))
	failed := testobj.PV("pv-failed", testobj.Phase(corev1.VolumeFailed))
	failed.Status.Message = "no deleter"

	for _, tc := range []struct {
		name   string
		st     *clusterstate.State
		config string
		want   []string // "RULE object" in report order
	}{
		{name: "a healthy pair reports nothing",
			st: clusterstate.New([]*corev1.PersistentVolumeClaim{good}, []*corev1.PersistentVolume{testobj.PV("pv-good", testobj.BoundTo(good))}, nil, nil)},
		{name: "a mismatched bound pair is reported once, on the claim",
			st:   clusterstate.New([]*corev1.PersistentVolumeClaim{modeClaim}, []*corev1.PersistentVolume{testobj.PV("pv-fs", testobj.BoundTo(modeClaim))}, nil, nil),
			want: []string{"PVG001 PersistentVolumeClaim team-a/block"}},
		{name: "a bound pair of different VolumeAttributesClasses is reported once, on the claim",
			st:   clusterstate.New([]*corev1.PersistentVolumeClaim{goldClaim}, []*corev1.PersistentVolume{testobj.PV("pv-silver", testobj.VolumeAttributesClass("silver"), testobj.BoundTo(goldClaim))}, nil, nil),
			want: []string{"PVG018 PersistentVolumeClaim team-a/gold"}},
		{name: "a bound pair whose VolumeAttributesClass is being modified reports nothing",
			st: clusterstate.New([]*corev1.PersistentVolumeClaim{modifying}, []*corev1.PersistentVolume{testobj.PV("pv-gold", testobj.VolumeAttributesClass("gold"), testobj.BoundTo(modifying))}, nil, nil)},
		{name: "dangling claimRef",
			st:   clusterstate.New(nil, []*corev1.PersistentVolume{testobj.PV("pv-d", testobj.ClaimRef("team-a", "gone", "u1"), testobj.Phase(corev1.VolumeBound))}, nil, nil),
			want: []string{"PVG020 PersistentVolume pv-d"}},
		{name: "lost claim and claim bound to a missing volume",
			st: clusterstate.New([]*corev1.PersistentVolumeClaim{
				testobj.PVC("team-a", "lost", testobj.ClaimPhase(corev1.ClaimLost)),
				testobj.PVC("team-a", "orphan", testobj.ClaimBoundTo("pv-missing")),
			}, nil, nil, nil),
			want: []string{"PVG021 PersistentVolumeClaim team-a/lost", "PVG021 PersistentVolumeClaim team-a/orphan"}},
		{name: "misbound pair",
			st:   clusterstate.New([]*corev1.PersistentVolumeClaim{good, testobj.PVC("team-b", "thief", testobj.ClaimBoundTo("pv-good"))}, []*corev1.PersistentVolume{testobj.PV("pv-good", testobj.BoundTo(good))}, nil, nil),
			want: []string{"PVG004 PersistentVolumeClaim team-b/thief", "PVG022 PersistentVolumeClaim team-b/thief"}},
		{name: "a completed claim whose volume lost its claimRef uid (upstream marks it Lost)",
			st:   clusterstate.New([]*corev1.PersistentVolumeClaim{good}, []*corev1.PersistentVolume{testobj.PV("pv-good", testobj.ClaimRef("team-a", "good", ""), testobj.Phase(corev1.VolumeBound))}, nil, nil),
			want: []string{"PVG015 PersistentVolume pv-good", "PVG022 PersistentVolumeClaim team-a/good"}},
		{name: "a completed claim whose volume lost its claimRef",
			st:   clusterstate.New([]*corev1.PersistentVolumeClaim{good}, []*corev1.PersistentVolume{testobj.PV("pv-good", testobj.Phase(corev1.VolumeAvailable))}, nil, nil),
			want: []string{"PVG010 PersistentVolumeClaim team-a/good", "PVG022 PersistentVolumeClaim team-a/good"}},
		{name: "a claim pre-bound by name to a volume pre-bound by name is a binding in progress",
			st: clusterstate.New([]*corev1.PersistentVolumeClaim{testobj.PVC("team-a", "pre", testobj.VolumeName("pv-good"))}, []*corev1.PersistentVolume{testobj.PV("pv-good", testobj.ClaimRef("team-a", "pre", ""))}, nil, nil)},
		{name: "a bound claim being expanded (request above its volume, status.capacity what it was given) is healthy",
			st: func() *clusterstate.State {
				pv := testobj.PV("pv-x", testobj.Capacity("10Gi"), testobj.BoundTo(expanding))
				return clusterstate.New([]*corev1.PersistentVolumeClaim{expanding}, []*corev1.PersistentVolume{pv}, nil, nil)
			}()},
		{name: "released aging past the default week, not before",
			st: clusterstate.New(nil, []*corev1.PersistentVolume{
				testobj.PV("pv-old", testobj.ClaimRef("team-a", "x", "u2"), released(8*24*time.Hour)),
				testobj.PV("pv-new", testobj.ClaimRef("team-a", "y", "u3"), released(24*time.Hour)),
			}, nil, nil),
			want: []string{"PVG023 PersistentVolume pv-old"}},
		{name: "released aging with a configured age",
			st:     clusterstate.New(nil, []*corev1.PersistentVolume{testobj.PV("pv-new", testobj.ClaimRef("team-a", "y", "u3"), released(24*time.Hour))}, nil, nil),
			config: "releasedMaxAge: 12h\n",
			want:   []string{"PVG023 PersistentVolume pv-new"}},
		{name: "without nodes, a claim scheduled to one host bound to a volume pinned to another",
			st: clusterstate.New([]*corev1.PersistentVolumeClaim{onNode2, onNode1}, []*corev1.PersistentVolume{
				testobj.PV("pv-node-2", testobj.BoundTo(onNode2), testobj.NodeAffinity(corev1.LabelHostname, "node-2")),
				testobj.PV("pv-node-1", testobj.BoundTo(onNode1), testobj.NodeAffinity(corev1.LabelHostname, "node-1")),
			}, nil, nil),
			want: []string{"PVG009 PersistentVolumeClaim team-a/on-node-2"}},
		{name: "failed volume", st: clusterstate.New(nil, []*corev1.PersistentVolume{failed}, nil, nil), want: []string{"PVG024 PersistentVolume pv-failed"}},
		{name: "two default classes",
			st:   clusterstate.New(nil, nil, testobjClasses("a", "b"), nil),
			want: []string{"PVG017 StorageClass a", "PVG017 StorageClass b"}},
		{name: "namespace exemption and rule off apply",
			st: clusterstate.New([]*corev1.PersistentVolumeClaim{
				testobj.PVC("sandbox", "lost", testobj.ClaimPhase(corev1.ClaimLost)),
			}, []*corev1.PersistentVolume{failed}, nil, nil),
			config: "exemptions:\n  namespaces: [sandbox]\nrules:\n  failed-volume: {action: off}\n"},
		{name: "transition rules are not judged on state (binder annotations set by anyone)",
			st: clusterstate.New([]*corev1.PersistentVolumeClaim{testobj.PVC("team-a", "c", testobj.ClaimMeta(testobj.Annotation(storage.AnnBoundByController, "yes")))}, nil, nil, nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := mustConfig(t, tc.config)
			got, err := policy.NewEngine(cfg).Audit(tc.st, now, nil)
			if err != nil {
				t.Fatalf("Audit: %v", err)
			}
			var keys []string
			for _, f := range got {
				keys = append(keys, string(f.Rule)+" "+f.Object.String())
				if f.Message.IsZero() || f.Name == "" || f.Action == "" {
					t.Errorf("incomplete finding %+v", f)
				}
				checkFixes(t, cfg, nil, tc.st, f)
			}
			if strings.Join(keys, "\n") != strings.Join(tc.want, "\n") {
				t.Fatalf("findings:\n%s\nwant:\n%s", strings.Join(keys, "\n"), strings.Join(tc.want, "\n"))
			}
			for _, rl := range policy.Catalogue() {
				for _, obj := range tc.st.Objects() {
					checkReads(t, rl, func(e *policy.Engine, v policy.View) { _, _ = e.AuditObject(obj, v, now) }, cfg, tc.st)
					checkStatusReads(t, rl, cfg, tc.st, nil, obj, now)
					checkCacheShape(t, rl, cfg, tc.st, nil, obj, now)
				}
			}
		})
	}
}

func testobjClasses(names ...string) []*storagev1.StorageClass {
	var out []*storagev1.StorageClass
	for _, n := range names {
		out = append(out, testobj.StorageClass(n, "csi.example.com", testobj.DefaultClass))
	}
	return out
}

// TestAuditInParallel holds the goroutines of Audit to judging one object at a time: on a
// state large enough for several of them (with more Ps than this machine may have cores), the
// findings equal Merge over AuditObject in the state's order, and progress counts up by one.
func TestAuditInParallel(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	const n = 5000
	st := gen.Inventory(n)
	objs := st.Objects()
	engine := policy.NewEngine(nil)

	var calls []int
	found, err := engine.Audit(st, gen.InventoryNow, func(done, total int) {
		if total != len(objs) {
			t.Errorf("progress total %d, want %d", total, len(objs))
		}
		calls = append(calls, done)
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, done := range calls {
		if done != i+1 {
			t.Fatalf("progress call %d says %d done", i, done)
		}
	}
	if len(calls) != len(objs) {
		t.Fatalf("%d progress calls, want %d", len(calls), len(objs))
	}
	if want := gen.InventoryFindings(n); len(found) != want {
		t.Fatalf("%d findings, want %d", len(found), want)
	}

	perObject := make([][]policy.Finding, 0, len(objs))
	for _, o := range objs {
		one, err := engine.AuditObject(o, st, gen.InventoryNow)
		if err != nil {
			t.Fatal(err)
		}
		perObject = append(perObject, one)
	}
	if want := policy.Merge(perObject); !reflect.DeepEqual(found, want) {
		t.Fatalf("Audit and Merge(AuditObject) disagree: %d and %d findings", len(found), len(want))
	}

}

// TestAuditJudgesInTurns: with a Turn, every object is judged between a call of it and the
// call of what it returned, a turn a block of objects, and behind a Turn that lets one
// goroutine through at a time (a process's one seat) the findings are as without it.
func TestAuditJudgesInTurns(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	const n = 5000
	st := gen.Inventory(n)
	engine := policy.NewEngine(nil)
	plain, err := engine.AuditEach(st, policy.AuditOptions{Now: gen.InventoryNow})
	if err != nil {
		t.Fatal(err)
	}

	var (
		seat          sync.Mutex
		inside, turns atomic.Int64
		outside       atomic.Int64 // objects judged while no turn was held
	)
	turn := func() func() {
		seat.Lock()
		turns.Add(1)
		inside.Add(1)
		return func() {
			inside.Add(-1)
			seat.Unlock()
		}
	}
	each, err := engine.AuditEach(st, policy.AuditOptions{Now: gen.InventoryNow, Turn: turn, Progress: func(done, total int) {
		if inside.Load() == 0 {
			outside.Add(1)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if o := outside.Load(); o != 0 {
		t.Errorf("%d objects judged outside a turn", o)
	}
	if objs := len(st.Objects()); turns.Load() < int64(objs/256) {
		t.Errorf("%d turns for %d objects: not one a block", turns.Load(), objs)
	}
	if !reflect.DeepEqual(each, plain) {
		t.Errorf("the audit in turns found otherwise than without them")
	}
}

// TestAuditHintsOfABoundPair: the audit reads a bound pair as if its claim had just been created,
// yet a mismatch in a pair bound long ago is not fixed by unbinding it, which other rules refuse;
// the audit's finding must say so, where an admission of the same claim says to name another volume.
func TestAuditHintsOfABoundPair(t *testing.T) {
	claim := testobj.PVC("team-a", "data", testobj.ClaimVolumeAttributesClass("gold"), testobj.ClaimBoundTo("pv-7"))
	pv := testobj.PV("pv-7", testobj.VolumeAttributesClass("silver"), testobj.CSI("csi.example.com", "h", nil), testobj.BoundTo(claim))
	st := clusterstate.New([]*corev1.PersistentVolumeClaim{claim}, []*corev1.PersistentVolume{pv}, nil, nil)
	found, err := policy.NewEngine(nil).Audit(st, time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var hint string
	for _, f := range found {
		if f.Rule == "PVG018" {
			hint = f.Hint.String()
		}
	}
	if !strings.Contains(hint, "the pair is bound") {
		t.Errorf("PVG018 hint in the audit = %q, want the bound-pair hint", hint)
	}

	// A claim scheduled to node-1 bound long ago to a volume pinned to node-2: dropping
	// spec.volumeName is PVG003's refusal, so the hint says to create the claim again.
	onNode1 := testobj.PVC("team-a", "data", testobj.ClaimBoundTo("pv-8"), testobj.ClaimMeta(testobj.Annotation(storage.AnnSelectedNode, "node-1")))
	pinned := testobj.PV("pv-8", testobj.BoundTo(onNode1), testobj.NodeAffinity(corev1.LabelHostname, "node-2"))
	found, err = policy.NewEngine(nil).Audit(clusterstate.New([]*corev1.PersistentVolumeClaim{onNode1}, []*corev1.PersistentVolume{pinned}, nil, nil), time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	hint = ""
	for _, f := range found {
		if f.Rule == "PVG009" {
			hint = f.Hint.String()
			checkFixes(t, policy.DefaultConfig(), nil, clusterstate.New([]*corev1.PersistentVolumeClaim{onNode1}, []*corev1.PersistentVolume{pinned}, nil, nil), f)
		}
	}
	if !strings.Contains(hint, "delete the claim and create it again without spec.volumeName") || strings.Contains(hint, "drop spec.volumeName") {
		t.Errorf("PVG009 hint in the audit = %q, want the bound-pair hint", hint)
	}
}

// TestAuditJudgesEachStateByItsOwnObjects: a state owns its index, so two states that share an
// object judge it each against its own neighbours, whichever was audited or looked up first.
func TestAuditJudgesEachStateByItsOwnObjects(t *testing.T) {
	claim := testobj.PVC("ns", "c", testobj.ClaimUID("uid-c"))
	pv := testobj.PV("pv-1", testobj.BoundTo(claim))
	e := policy.NewEngine(nil)
	count := func(s *clusterstate.State) int {
		each, err := e.AuditEach(s, policy.AuditOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, oa := range each {
			n += len(oa.Findings)
		}
		return n
	}
	bound := clusterstate.New([]*corev1.PersistentVolumeClaim{claim}, []*corev1.PersistentVolume{pv}, nil, nil)
	orphan := clusterstate.New(nil, []*corev1.PersistentVolume{pv}, nil, nil) // the same volume, its claim gone
	want, wantOrphan := count(clusterstate.New(bound.Claims(), bound.Volumes(), nil, nil)), count(clusterstate.New(nil, orphan.Volumes(), nil, nil))
	if want == wantOrphan {
		t.Fatal("the volume is judged alike with and without its claim: the test cannot tell the states apart")
	}
	for range 2 { // the second time, over indexes already built
		if got := count(bound); got != want {
			t.Errorf("the bound pair: %d findings, want %d", got, want)
		}
		if got := count(orphan); got != wantOrphan {
			t.Errorf("the orphan volume: %d findings, want %d", got, wantOrphan)
		}
	}
}

// TestMergeOrder: the merged findings are ordered by rule, then object; findings of one rule on
// one object keep the order they were given in; of two alike (rule and message) the first given
// is kept.
func TestMergeOrder(t *testing.T) {
	on := func(rule policy.RuleID, name, msg string) policy.Finding {
		return policy.Finding{Rule: rule, Object: policy.ObjectRef{Kind: policy.KindPersistentVolume, Name: name}, Message: policy.Plain(policy.Word(msg))}
	}
	got := policy.Merge([][]policy.Finding{
		{on("PVG020", "pv-b", "b gone"), on("PVG004", "pv-b", "taken twice")},
		{on("PVG004", "pv-a", "taken twice"), on("PVG020", "pv-a", "second"), on("PVG020", "pv-a", "first")},
		nil,
		{on("PVG001", "pv-c", "mode")},
	})
	want := []policy.Finding{
		on("PVG001", "pv-c", "mode"),
		on("PVG004", "pv-b", "taken twice"),
		on("PVG020", "pv-a", "second"), on("PVG020", "pv-a", "first"),
		on("PVG020", "pv-b", "b gone"),
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Merge:\n got %v\nwant %v", got, want)
	}
	if got := policy.Merge([][]policy.Finding{nil, {}}); got != nil {
		t.Errorf("Merge of no findings = %#v, want nil", got)
	}
}
