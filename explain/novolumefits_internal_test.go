package explain

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/pvguard/pvguard/binder"
	"github.com/pvguard/pvguard/storage"
	"github.com/pvguard/pvguard/test/testobj"
)

// fakeExplainer stands in for NoVolumeFits: it says what why holds for a claim (no event when
// absent) and records what the reporter asked.
type fakeExplainer struct {
	mu    sync.Mutex
	why   map[string]string // namespace/name -> message
	delay time.Duration     // per claim, as explaining costs
	// asked lists the claims explained, per pass; claims and nodes are what the last pass got.
	asked  [][]string
	claims []string
	nodes  []*corev1.Node
}

func (f *fakeExplainer) explain(in binder.PlanInput, _ binder.PoolPlan) func(*corev1.PersistentVolumeClaim) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, nil)
	f.claims = nil
	for _, c := range in.State.Claims() {
		f.claims = append(f.claims, c.Namespace+"/"+c.Name)
	}
	f.nodes = in.State.Nodes()
	pass := len(f.asked) - 1
	return func(c *corev1.PersistentVolumeClaim) (string, bool) {
		time.Sleep(f.delay)
		f.mu.Lock()
		defer f.mu.Unlock()
		name := c.Namespace + "/" + c.Name
		f.asked[pass] = append(f.asked[pass], name)
		msg, ok := f.why[name]
		return msg, ok
	}
}

func (f *fakeExplainer) set(claim, msg string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.why[claim] = msg
}

// lastAsked is what the last pass explained (nil when no pass explained anything).
func (f *fakeExplainer) lastAsked() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.asked) == 0 {
		return nil
	}
	return slices.Clone(f.asked[len(f.asked)-1])
}

func (f *fakeExplainer) passes() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.asked)
}

// created sets a claim's creationTimestamp ago before now.
func created(ago time.Duration) testobj.PVCMod {
	return testobj.ClaimMeta(func(m *metav1.ObjectMeta) { m.CreationTimestamp = metav1.NewTime(time.Now().Add(-ago)) })
}

// noFitsRun is a binder over a fake cluster, planning until the test ends, and a reporter over
// its plans whose passes the test runs (plan).
type noFitsRun struct {
	b *binder.Binder
	r *NoVolumeFitsReporter
	// work is what the passes told the binder they spent.
	work atomic.Int64
}

func (h *noFitsRun) LatestPlan() (*binder.MadePlan, <-chan struct{}) { return h.b.LatestPlan() }

func (h *noFitsRun) AddPlanWork(d time.Duration) {
	h.work.Add(int64(d))
	h.b.AddPlanWork(d)
}

// noFitsBinder starts a binder (shadow: it plans as the active one does, and writes nothing)
// over a fake cluster holding objs, keeping its plans, and builds a reporter over them that
// posts NoVolumeFits after `after`, as f explains, to the recorder it returns.
func noFitsBinder(t *testing.T, after time.Duration, f *fakeExplainer, objs ...client.Object) (*noFitsRun, *record.FakeRecorder, client.Client) {
	t.Helper()
	c := fake.NewClientBuilder().WithObjects(objs...).Build()
	rec := record.NewFakeRecorder(100)
	h := &noFitsRun{b: StartShadowBinder(t, c)}
	var err error
	if h.r, err = NewNoVolumeFitsReporter(NoVolumeFitsOptions{Binder: h, After: after, Recorder: rec}); err != nil {
		t.Fatal(err)
	}
	h.r.explain = f.explain
	return h, rec, c
}

// events drains the events recorded so far.
func events(rec *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// plan waits for a plan that read the cluster after the call began and runs the reporter's pass
// over it, as the reporter's loop does after each plan.
func plan(t *testing.T, h *noFitsRun) {
	t.Helper()
	read := h.b.PlanReadsBegun()
	h.b.RequestPlan()
	timeout := time.After(10 * time.Second)
	for {
		mp, next := h.b.LatestPlan()
		if mp != nil && mp.Read > read {
			h.AddPlanWork(h.r.pass(mp))
			return
		}
		select {
		case <-next:
		case <-timeout:
			t.Fatal("no plan in 10s")
		}
	}
}

// TestNoVolumeFitsAfterTheDelay: after a plan, the claims Pending for longer than the delay are
// explained, with every claim and the nodes they were scheduled to in the input, and those the
// explainer says no volume fits get one NoVolumeFits warning; claims younger than the delay,
// bound, Lost or being deleted are not explained.
func TestNoVolumeFitsAfterTheDelay(t *testing.T) {
	class := func(name string, mode storagev1.VolumeBindingMode) *storagev1.StorageClass {
		return testobj.StorageClass(name, storage.NoProvisioner, func(sc *storagev1.StorageClass) { sc.VolumeBindingMode = &mode })
	}
	local, late := class("local", storagev1.VolumeBindingImmediate), class("late", storagev1.VolumeBindingWaitForFirstConsumer)
	old := created(2 * time.Minute)
	f := &fakeExplainer{why: map[string]string{"ns/old": "no volume fits: closest volume pv-1: volumeMode Filesystem != Block"}}
	b, rec, _ := noFitsBinder(t, time.Minute, f, local, late, testobj.Node("n1", nil),
		testobj.PVC("ns", "old", testobj.ClaimClass("local"), old),
		testobj.PVC("ns", "young", testobj.ClaimClass("local"), created(10*time.Second)),
		testobj.PVC("ns", "named", testobj.VolumeName("pv-9"), old, testobj.ClaimPhase(corev1.ClaimPending)),
		testobj.PVC("ns", "scheduled", testobj.ClaimClass("late"), old, testobj.ClaimMeta(testobj.Annotation(storage.AnnSelectedNode, "n1"))),
		testobj.PVC("ns", "bound", testobj.ClaimClass("local"), old, testobj.ClaimBoundTo("pv-2"), testobj.ClaimPhase(corev1.ClaimBound)),
		testobj.PVC("ns", "lost", testobj.ClaimClass("local"), old, testobj.ClaimPhase(corev1.ClaimLost)),
		testobj.PVC("ns", "deleting", testobj.ClaimClass("local"), old, testobj.ClaimMeta(testobj.Deleting(), testobj.Finalizers("kubernetes.io/pvc-protection"))),
	)
	plan(t, b)

	asked := f.lastAsked()
	slices.Sort(asked)
	if want := []string{"ns/named", "ns/old", "ns/scheduled"}; !slices.Equal(asked, want) {
		t.Errorf("explained %v, want %v", asked, want)
	}
	if len(f.claims) != 7 {
		t.Errorf("the explainer got claims %v, want all 7 (the plan's input holds only the plannable ones)", f.claims)
	}
	if !slices.ContainsFunc(f.nodes, func(n *corev1.Node) bool { return n.Name == "n1" }) {
		t.Errorf("the explainer got nodes %v, want n1, which claim scheduled was scheduled to", f.nodes)
	}
	want := "Warning NoVolumeFits no volume fits: closest volume pv-1: volumeMode Filesystem != Block"
	if got := events(rec); !slices.Equal(got, []string{want}) {
		t.Errorf("events %q, want only %q", got, want)
	}
}

// TestNoVolumeFitsAtMostOncePerDelay: plans in quick succession explain a claim once; once the
// delay has passed since, it is explained again and the event posted again (the recorder's
// correlator makes the same message a higher count on the same Event), and a changed reason
// gives the new message.
func TestNoVolumeFitsAtMostOncePerDelay(t *testing.T) {
	claim := testobj.PVC("ns", "c", created(2*time.Minute))
	f := &fakeExplainer{why: map[string]string{"ns/c": "first reason"}}
	b, rec, _ := noFitsBinder(t, time.Minute, f, claim)
	plan(t, b)
	plan(t, b)
	plan(t, b)
	if got := events(rec); !slices.Equal(got, []string{"Warning NoVolumeFits first reason"}) {
		t.Fatalf("events after three plans in a row %q, want the first reason once", got)
	}
	if n := f.passes(); n != 1 {
		t.Errorf("%d passes explained claims, want 1", n)
	}
	b.r.claims.mu.Lock()
	next := b.r.claims.next
	b.r.claims.mu.Unlock()
	if wait := time.Until(next); wait < 5*time.Second || wait > 6*time.Second {
		t.Errorf("the next pass may run in %s, want a tenth of the delay (6s)", wait)
	}

	elapse := func() { // as if the delay had passed since the claim was last explained
		b.r.claims.mu.Lock()
		b.r.claims.explained[claim.UID] = b.r.claims.explained[claim.UID].Add(-time.Minute)
		b.r.claims.next = time.Time{}
		b.r.claims.mu.Unlock()
	}
	elapse()
	plan(t, b)
	if got := events(rec); !slices.Equal(got, []string{"Warning NoVolumeFits first reason"}) {
		t.Fatalf("events once the delay passed %q, want the same message again (a refresh)", got)
	}
	f.set("ns/c", "second reason")
	b.r.claims.passDone(time.Time{}) // a pass runs, but the claim was explained within the delay
	plan(t, b)
	if got := events(rec); len(got) != 0 {
		t.Fatalf("events right after a refresh %q, want none until the delay passes", got)
	}
	elapse()
	plan(t, b)
	if got := events(rec); !slices.Equal(got, []string{"Warning NoVolumeFits second reason"}) {
		t.Fatalf("events after the reason changed %q, want the new one", got)
	}
}

// TestNoVolumeFitsForgetsClaims: a claim that binds or is deleted is forgotten.
func TestNoVolumeFitsForgetsClaims(t *testing.T) {
	f := &fakeExplainer{why: map[string]string{"ns/a": "a", "ns/b": "b"}}
	a := testobj.PVC("ns", "a", created(2*time.Minute))
	bc := testobj.PVC("ns", "b", created(2*time.Minute))
	b, rec, c := noFitsBinder(t, time.Minute, f, a, bc)
	plan(t, b)
	if got := events(rec); len(got) != 2 {
		t.Fatalf("events %q, want one on each claim", got)
	}
	ctx := context.Background()
	bound := a.DeepCopy()
	if err := c.Get(ctx, client.ObjectKeyFromObject(a), bound); err != nil {
		t.Fatal(err)
	}
	testobj.ClaimBoundTo("pv-1")(bound)
	if err := c.Update(ctx, bound); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, bc); err != nil {
		t.Fatal(err)
	}
	b.r.claims.passDone(time.Time{}) // passes run at most once in a tenth of the delay
	plan(t, b)
	b.r.claims.mu.Lock()
	defer b.r.claims.mu.Unlock()
	if len(b.r.claims.explained) != 0 {
		t.Errorf("still remembered: %v", b.r.claims.explained)
	}
}

// TestNoVolumeFitsOff: with no delay set, no claim is ever explained; a reporter without the
// binder's plans or a recorder is refused.
func TestNoVolumeFitsOff(t *testing.T) {
	f := &fakeExplainer{why: map[string]string{"ns/c": "reason"}}
	b, rec, _ := noFitsBinder(t, 0, f, testobj.PVC("ns", "c", created(time.Hour)))
	plan(t, b)
	if n, got := f.passes(), events(rec); n != 0 || len(got) != 0 {
		t.Errorf("%d passes, events %q; want none", n, got)
	}
	for name, o := range map[string]NoVolumeFitsOptions{
		"Binder":   {After: time.Minute, Recorder: rec},
		"Recorder": {After: time.Minute, Binder: b},
	} {
		if _, err := NewNoVolumeFitsReporter(o); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("NewNoVolumeFitsReporter with After and no %s: %v, want an error naming %s", name, err, name)
		}
	}
}

// TestNoVolumeFitsSharesThePlansTime: explaining is slow (the candidate table is a pass over
// every volume); a pass stops once it has spent its budget, and the next pass takes the claims
// the last one did not reach first, so every stuck claim gets its turn.
func TestNoVolumeFitsSharesThePlansTime(t *testing.T) {
	f := &fakeExplainer{why: map[string]string{}, delay: 25 * time.Millisecond}
	var objs []client.Object
	var all []string
	for _, name := range strings.Split("a b c d e f g h i j k l m n o p q r s t", " ") {
		objs = append(objs, testobj.PVC("ns", name, created(2*time.Minute)))
		all = append(all, "ns/"+name)
	}
	b, _, _ := noFitsBinder(t, time.Minute, f, objs...)
	plan(t, b)
	first := f.lastAsked()
	if len(first) == 0 || len(first) == len(all) {
		t.Fatalf("the first pass explained %d of %d claims at 25ms each; want it to stop after its budget (the plan's duration, at least 50ms)", len(first), len(all))
	}
	if time.Duration(b.work.Load()) < time.Duration(len(first))*f.delay {
		t.Errorf("the time added to the binder's pause before its next plan (%s) leaves out the explaining (%d claims)", time.Duration(b.work.Load()), len(first))
	}
	seen := map[string]bool{}
	for _, n := range first {
		seen[n] = true
	}
	for pass := 0; len(seen) < len(all) && pass < len(all); pass++ {
		plan(t, b)
		next := f.lastAsked()
		if len(next) == 0 || seen[next[0]] {
			t.Fatalf("pass %d explained %v first, want a claim not explained yet", pass+2, next)
		}
		for _, n := range next {
			seen[n] = true
		}
	}
	if len(seen) != len(all) {
		t.Errorf("explained %d of %d claims", len(seen), len(all))
	}
}

// TestNoVolumeFitsAfterEachPlan: started, the reporter runs its pass after a plan of the
// binder's, with nobody asking, posts the event, and tells the binder the time it spent.
func TestNoVolumeFitsAfterEachPlan(t *testing.T) {
	f := &fakeExplainer{why: map[string]string{"ns/c": "reason"}}
	h, rec, _ := noFitsBinder(t, time.Minute, f, testobj.PVC("ns", "c", created(2*time.Minute)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.r.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	h.b.RequestPlan()
	select {
	case e := <-rec.Events:
		if e != "Warning NoVolumeFits reason" {
			t.Errorf("event %q, want Warning NoVolumeFits reason", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no NoVolumeFits event in 10s after a plan")
	}
	deadline := time.Now().Add(10 * time.Second)
	for h.work.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if h.work.Load() == 0 {
		t.Error("the pass told the binder of no time spent")
	}
}
