package audit_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/pvguard/pvguard/audit"
	"github.com/pvguard/pvguard/clusterstate"
	"github.com/pvguard/pvguard/internal/clusterview"
	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/storage"
	"github.com/pvguard/pvguard/test/gen"
	"github.com/pvguard/pvguard/test/storecache"
	"github.com/pvguard/pvguard/test/testobj"
)

// TestMissingObjectsAreConfirmedLive: the cache lacks a claim and a volume that exist in the
// apiserver; the audit must not report them as gone. Objects missing from both are reported.
func TestMissingObjectsAreConfirmedLive(t *testing.T) {
	late := testobj.PVC("team-a", "late", testobj.ClaimUID("u-late"))
	gone := testobj.PV("pv-gone-claim", testobj.ClaimRef("team-a", "gone", "u-gone"), testobj.Phase(corev1.VolumeBound))
	stale := testobj.PV("pv-stale", testobj.ClaimRef("team-a", "late", "u-late"), testobj.Phase(corev1.VolumeBound))
	boundToLate := testobj.PVC("team-b", "c", testobj.ClaimBoundTo("pv-late"))
	boundToGone := testobj.PVC("team-b", "d", testobj.ClaimBoundTo("pv-nowhere"))
	lateVolume := testobj.PV("pv-late", testobj.BoundTo(boundToLate))

	cached := fake.NewClientBuilder().WithObjects(gone.DeepCopy(), stale.DeepCopy(), boundToLate.DeepCopy(), boundToGone.DeepCopy()).Build()
	live := fake.NewClientBuilder().WithObjects(gone.DeepCopy(), stale.DeepCopy(), boundToLate.DeepCopy(), boundToGone.DeepCopy(), late.DeepCopy(), lateVolume.DeepCopy()).Build()

	r := audit.NewRunner(audit.RunnerOptions{
		Cache: cached, Live: clusterview.New(cached, live).LiveView, Engine: func() *policy.Engine { return policy.NewEngine(nil) },
		Log: logr.Discard(), Now: func() time.Time { return time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC) },
	})
	if err := r.RunOnce(context.Background()); err != nil {
		t.Fatalf("RunOnce: %v", err)
	}
	got := map[string]bool{}
	for _, f := range r.Latest().Findings {
		if f.Rule == "PVG020" || f.Rule == "PVG021" {
			got[f.Rule+" "+f.Namespace+"/"+f.Object] = true
		}
	}
	want := map[string]bool{"PVG020 /pv-gone-claim": true, "PVG021 team-b/d": true}
	for k := range want {
		if !got[k] {
			t.Errorf("missing finding %s (got %v)", k, got)
		}
	}
	for k := range got {
		if !want[k] {
			t.Errorf("reported %s on the cache's word alone", k)
		}
	}
}

// TestIncrementalAudit: between full audits only the objects reported as changed, and their
// neighbours, are judged again; a full audit picks up everything.
func TestIncrementalAudit(t *testing.T) {
	ctx := context.Background()
	claim := testobj.PVC("team-a", "data", testobj.ClaimUID("u-data"), testobj.ClaimBoundTo("pv-data"), testobj.ClaimPhase(corev1.ClaimBound))
	volume := testobj.PV("pv-data", testobj.BoundTo(claim), testobj.Phase(corev1.VolumeBound))
	c := fake.NewClientBuilder().WithObjects(claim.DeepCopy(), volume.DeepCopy()).WithStatusSubresource(&corev1.PersistentVolumeClaim{}, &corev1.PersistentVolume{}).Build()
	r := audit.NewRunner(audit.RunnerOptions{Cache: c, Live: clusterview.New(c, c).LiveView, Engine: func() *policy.Engine { return policy.NewEngine(nil) }, Log: logr.Discard()})
	if err := r.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if f := r.Latest().Findings; len(f) != 0 || r.Latest().Summary.Objects != 2 {
		t.Fatalf("clean pair: %d objects, findings %+v", r.Latest().Summary.Objects, f)
	}

	// A change nobody reported is not seen by an incremental audit...
	unseen := testobj.PV("pv-unseen", testobj.Phase(corev1.VolumeFailed))
	if err := c.Create(ctx, unseen); err != nil {
		t.Fatal(err)
	}
	// ...while a reported one is, with its neighbour's binding row.
	lost := &corev1.PersistentVolumeClaim{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "data"}, lost); err != nil {
		t.Fatal(err)
	}
	lost.Status.Phase = corev1.ClaimLost
	if err := c.Status().Update(ctx, lost); err != nil {
		t.Fatal(err)
	}
	r.Changed(claim, lost)
	if err := r.RunPending(ctx); err != nil {
		t.Fatal(err)
	}
	rules := func() map[string]bool {
		got := map[string]bool{}
		for _, f := range r.Latest().Findings {
			got[f.Rule+" "+f.Object] = true
		}
		return got
	}
	if got := rules(); !got["PVG021 data"] || got["PVG024 pv-unseen"] || len(got) != 1 {
		t.Fatalf("after the claim changed: %v", got)
	}
	if b := r.Bindings(); len(b) != 1 || b[0].ClaimPhase.String() != "Lost" {
		t.Fatalf("binding row of the neighbour not refreshed: %+v", b)
	}

	// Deleting the claim drops its findings and makes its volume's claimRef dangle.
	if err := c.Delete(ctx, lost); err != nil {
		t.Fatal(err)
	}
	r.Changed(lost)
	if err := r.RunPending(ctx); err != nil {
		t.Fatal(err)
	}
	if got := rules(); got["PVG021 data"] || !got["PVG020 pv-data"] || r.Latest().Summary.Objects != 1 {
		t.Fatalf("after the claim was deleted: %v over %d objects", got, r.Latest().Summary.Objects)
	}

	r.Trigger()
	if err := r.RunPending(ctx); err != nil {
		t.Fatal(err)
	}
	if got := rules(); !got["PVG024 pv-unseen"] || !got["PVG020 pv-data"] {
		t.Fatalf("the full audit missed something: %v", got)
	}
}

// strictReader refuses a get without a name or, for a claim, a namespace, as a client talking to
// the apiserver does ("resource name may not be empty"); the fake client would just not find it.
type strictReader struct{ client.Reader }

func (s strictReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, claim := obj.(*corev1.PersistentVolumeClaim); key.Name == "" || (claim && key.Namespace == "") {
		return errors.New("resource name may not be empty")
	}
	return s.Reader.Get(ctx, key, obj, opts...)
}

// TestMalformedClaimRefIsAuditedNotAnError: a Bound volume whose claimRef has a uid but no name
// is reported (PVG014, and PVG020: it names no claim) in full and incremental audits; no read is made for
// the claim it does not name, so the audit does not fail.
func TestMalformedClaimRefIsAuditedNotAnError(t *testing.T) {
	ctx := context.Background()
	noName := testobj.PV("pv-noname", testobj.ClaimRef("team-a", "", "u-1"), testobj.Phase(corev1.VolumeBound))
	c := fake.NewClientBuilder().WithObjects(noName.DeepCopy()).Build()
	view := testobj.NewView(noName)
	view.StrictNames = true
	r := audit.NewRunner(audit.RunnerOptions{Cache: c, Live: clusterview.New(c, strictReader{c}).LiveView, Engine: func() *policy.Engine { return policy.NewEngine(nil) },
		View: func(context.Context) policy.View { return view }, Log: logr.Discard()})
	check := func(when string) {
		t.Helper()
		f := r.Latest().Findings
		if len(f) != 2 || f[0].Rule != "PVG014" || f[1].Rule != "PVG020" || !strings.Contains(f[1].Message.String(), "names no claim") {
			t.Errorf("%s: findings %+v, want PVG014's and PVG020's saying the claimRef names no claim", when, f)
		}
	}
	if err := r.RunOnce(ctx); err != nil {
		t.Fatalf("RunOnce: %v", err)
	}
	check("full audit")
	r.Changed(noName)
	if err := r.RunPending(ctx); err != nil {
		t.Fatalf("incremental audit: %v", err)
	}
	check("incremental audit")
}

// nodesDown is a view whose Node reads fail, so that only the node-affinity rule cannot judge.
type nodesDown struct{ *testobj.View }

func (nodesDown) Node(string) (*corev1.Node, error) {
	return nil, errors.New("nodes: connection refused")
}

// TestRuleFailureKeepsTheObjectsOtherFindings: when one rule cannot judge an object, the audit
// still publishes what the other rules found on it, and reports the failure.
func TestRuleFailureKeepsTheObjectsOtherFindings(t *testing.T) {
	ctx := context.Background()
	claim := testobj.PVC("team-a", "data", testobj.ClaimVolumeMode(corev1.PersistentVolumeBlock), testobj.VolumeName("pv-7"),
		testobj.ClaimMeta(testobj.Annotation(storage.AnnSelectedNode, "node-1")))
	volume := testobj.PV("pv-7", testobj.NodeAffinity("topology.kubernetes.io/zone", "zone-a"))
	c := fake.NewClientBuilder().WithObjects(claim.DeepCopy(), volume.DeepCopy()).Build()
	r := audit.NewRunner(audit.RunnerOptions{Cache: c, Live: clusterview.New(c, c).LiveView, Engine: func() *policy.Engine { return policy.NewEngine(nil) },
		View: func(context.Context) policy.View { return nodesDown{testobj.NewView(claim, volume)} }, Log: logr.Discard()})
	_ = r.RunOnce(ctx) // the first full audit: changes are kept one by one after it
	r.Changed(claim)
	err := r.RunPending(ctx)
	var re *policy.RuleError
	if !errors.As(err, &re) || re.Rule != "PVG009" {
		t.Fatalf("RunPending error %v, want PVG009's failure", err)
	}
	found := false
	for _, f := range r.Latest().Findings {
		found = found || (f.Rule == "PVG001" && f.Object == "data")
	}
	if !found {
		t.Errorf("findings %+v, want PVG001 on the claim despite PVG009's failure", r.Latest().Findings)
	}
}

// TestIncrementalAuditKeepsReportOrder: an object an incremental audit adds or drops takes its
// place in the report's order, as a full audit would give it (the runner re-sorts only then).
func TestIncrementalAuditKeepsReportOrder(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientBuilder().WithObjects(testobj.PV("pv-b", testobj.Phase(corev1.VolumeFailed)), testobj.PV("pv-d", testobj.Phase(corev1.VolumeFailed))).
		WithStatusSubresource(&corev1.PersistentVolume{}).Build()
	r := audit.NewRunner(audit.RunnerOptions{Cache: c, Live: clusterview.New(c, c).LiveView, Engine: func() *policy.Engine { return policy.NewEngine(nil) }, Log: logr.Discard()})
	if err := r.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	order := func() []string {
		var names []string
		for _, f := range r.Latest().Findings {
			names = append(names, f.Object)
		}
		return names
	}
	for _, name := range []string{"pv-a", "pv-c"} {
		pv := testobj.PV(name, testobj.Phase(corev1.VolumeFailed))
		if err := c.Create(ctx, pv); err != nil {
			t.Fatal(err)
		}
		r.Changed(pv)
	}
	d := &corev1.PersistentVolume{}
	if err := c.Get(ctx, client.ObjectKey{Name: "pv-d"}, d); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, d); err != nil {
		t.Fatal(err)
	}
	r.Changed(d)
	if err := r.RunPending(ctx); err != nil {
		t.Fatal(err)
	}
	incremental := order()
	r.Trigger()
	if err := r.RunPending(ctx); err != nil {
		t.Fatal(err)
	}
	if want := order(); !slices.Equal(incremental, want) || len(want) != 3 {
		t.Fatalf("after an incremental audit the findings are on %v, a full audit gives %v", incremental, want)
	}
}

// TestFullAuditReportsInReportOrder: the server's full audit of a generated cluster (every kind
// of finding, pairs whose findings both sides report) publishes the findings the audit of the
// same objects in report order gives: every one of them, the same one kept of two alike.
func TestFullAuditReportsInReportOrder(t *testing.T) {
	st := gen.Inventory(2000)
	claims, volumes := slices.Clone(st.Claims()), slices.Clone(st.Volumes())
	slices.SortFunc(claims, func(a, b *corev1.PersistentVolumeClaim) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	slices.SortFunc(volumes, func(a, b *corev1.PersistentVolume) int { return cmp.Compare(a.Name, b.Name) })
	sorted := clusterstate.New(claims, volumes, st.Classes(), st.Nodes())
	engine := policy.NewEngine(nil)
	found, err := engine.Audit(sorted, gen.InventoryNow, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := audit.NewReport(len(sorted.Objects()), found)

	var objs []client.Object
	for _, o := range sorted.Objects() {
		objs = append(objs, o.(client.Object).DeepCopyObject().(client.Object))
	}
	for _, n := range sorted.Nodes() {
		objs = append(objs, n.DeepCopy())
	}
	c := fake.NewClientBuilder().WithObjects(objs...).Build()
	r := audit.NewRunner(audit.RunnerOptions{Cache: c, Live: clusterview.New(c, c).LiveView, Engine: func() *policy.Engine { return engine },
		Log: logr.Discard(), Now: func() time.Time { return gen.InventoryNow }})
	if err := r.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := r.Latest()
	if len(want.Findings) != gen.InventoryFindings(2000) {
		t.Fatalf("the audit of the generated cluster found %d, want %d", len(want.Findings), gen.InventoryFindings(2000))
	}
	if got.Summary.Objects != want.Summary.Objects || !reflect.DeepEqual(got.Findings, want.Findings) {
		t.Errorf("the server's full audit: %d objects, %d findings; the audit in report order: %d objects, %d findings",
			got.Summary.Objects, len(got.Findings), want.Summary.Objects, len(want.Findings))
		for i := range min(len(got.Findings), len(want.Findings)) {
			if !reflect.DeepEqual(got.Findings[i], want.Findings[i]) {
				t.Fatalf("first difference at %d: %+v, want %+v", i, got.Findings[i], want.Findings[i])
			}
		}
	}
}

// TestFullAuditCoversTheChangesBeforeIt: changes reported before a full audit reads the cache
// are in what it reads, so no incremental audit follows it for them (at a start, every object
// of the informers' first lists, which are then not kept one by one at all); when the full
// audit fails, they stay pending: before the first full audit, as the full audit itself, and
// after it, one by one.
func TestFullAuditCoversTheChangesBeforeIt(t *testing.T) {
	ctx := context.Background()
	failed := testobj.PV("pv-failed", testobj.Phase(corev1.VolumeFailed))
	c := &failingLists{Client: fake.NewClientBuilder().WithObjects(failed.DeepCopy()).Build()}
	reg := prometheus.NewRegistry()
	r := audit.NewRunner(audit.RunnerOptions{Cache: c, Live: clusterview.New(c, c).LiveView, Engine: func() *policy.Engine { return policy.NewEngine(nil) },
		Registry: reg, Log: logr.Discard()})
	incrementals := func() uint64 { return histogramCount(t, reg, "incremental") }
	fulls := func() uint64 { return histogramCount(t, reg, "full") }

	// failFullThenRunPending reports a change, fails a full audit, and runs what is pending on a
	// cache that lists again.
	failFullThenRunPending := func() {
		t.Helper()
		c.fail = true
		r.Changed(failed)
		if err := r.RunOnce(ctx); err == nil {
			t.Fatal("RunOnce on a cache that cannot list: no error")
		}
		c.fail = false
		if err := r.RunPending(ctx); err != nil {
			t.Fatal(err)
		}
	}

	failFullThenRunPending()
	if n, f := incrementals(), fulls(); n != 0 || f != 1 || len(r.Latest().Findings) != 1 {
		t.Fatalf("after the first full audit failed: %d incremental and %d full audits, findings %+v; want the full audit again, the change's finding reported", n, f, r.Latest().Findings)
	}

	failFullThenRunPending()
	if n := incrementals(); n != 1 || len(r.Latest().Findings) != 1 {
		t.Fatalf("after a later full audit failed: %d incremental audits, findings %+v; want the change audited once, its finding reported", n, r.Latest().Findings)
	}

	r.Changed(failed)
	if err := r.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.RunPending(ctx); err != nil {
		t.Fatal(err)
	}
	if n := incrementals(); n != 1 {
		t.Errorf("a change reported before a full audit was audited again after it (%d incremental audits, want still 1)", n)
	}
}

// failingLists is a client whose lists fail while fail is set.
type failingLists struct {
	client.Client
	fail bool
}

func (f *failingLists) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if f.fail {
		return errors.New("the cache is gone")
	}
	return f.Client.List(ctx, list, opts...)
}

// TestIncrementalAuditsMatchAFullAudit: after a full audit of a generated cluster, incremental
// audits of claims and volumes that changed, came and went leave the runner with what a full
// audit of the final cluster gives: the same report, findings, rows and OpenReports objects.
func TestIncrementalAuditsMatchAFullAudit(t *testing.T) {
	ctx := context.Background()
	st := gen.Inventory(600)
	var objs []client.Object
	for _, o := range st.Objects() {
		objs = append(objs, o.(client.Object).DeepCopyObject().(client.Object))
	}
	for _, n := range st.Nodes() {
		objs = append(objs, n.DeepCopy())
	}
	c := fake.NewClientBuilder().WithObjects(objs...).Build()
	engine := policy.NewEngine(nil)
	newRunner := func() *audit.Runner {
		return audit.NewRunner(audit.RunnerOptions{Cache: c, Live: clusterview.New(c, c).LiveView, Engine: func() *policy.Engine { return engine },
			Log: logr.Discard(), Now: func() time.Time { return gen.InventoryNow }})
	}
	r := newRunner()
	if err := r.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	first := r.Latest()

	update := func(obj client.Object, change func()) {
		t.Helper()
		old := obj.DeepCopyObject()
		change()
		if err := c.Update(ctx, obj); err != nil {
			t.Fatal(err)
		}
		r.Changed(old, obj)
	}
	remove := func(obj client.Object) {
		t.Helper()
		if err := c.Delete(ctx, obj); err != nil {
			t.Fatal(err)
		}
		r.Changed(obj)
	}
	create := func(obj client.Object) {
		t.Helper()
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
		r.Changed(obj)
	}
	// Two batches, each audited incrementally: the second changes objects the first added.
	for batch := range 2 {
		var volumes corev1.PersistentVolumeList
		var claims corev1.PersistentVolumeClaimList
		if err := c.List(ctx, &volumes); err != nil {
			t.Fatal(err)
		}
		if err := c.List(ctx, &claims); err != nil {
			t.Fatal(err)
		}
		for i := range claims.Items {
			pvc := &claims.Items[i]
			switch i % 9 {
			case 0:
				remove(pvc)
			case 4:
				update(pvc, func() { pvc.Status.Phase = corev1.ClaimLost })
			case 7:
				update(pvc, func() { pvc.Status.Phase = corev1.ClaimPending; delete(pvc.Annotations, storage.AnnBindCompleted) })
			}
		}
		for i := range volumes.Items {
			pv := &volumes.Items[i]
			switch i % 11 {
			case 0:
				remove(pv)
			case 3:
				update(pv, func() { pv.Status.Phase = corev1.VolumeFailed })
			case 6:
				update(pv, func() { pv.Spec.ClaimRef = nil; pv.Status.Phase = corev1.VolumeAvailable })
			}
		}
		for i := range 20 {
			create(testobj.PV(fmt.Sprintf("pv-new-%d-%02d", batch, i), testobj.Phase(corev1.VolumeFailed)))
			create(testobj.PVC(fmt.Sprintf("team-new-%d", i%3), fmt.Sprintf("claim-%d-%02d", batch, i), testobj.VolumeName(fmt.Sprintf("pv-new-%d-%02d", batch, i))))
		}
		if err := r.RunPending(ctx); err != nil {
			t.Fatal(err)
		}
		// The rows read after the first batch put the results in report order, which the second
		// batch's incremental audit keeps: both ways of updating them are held to a full audit.
		r.Bindings()
	}

	fresh := newRunner()
	if err := fresh.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	got, want := r.Latest(), fresh.Latest()
	if got.Summary.Objects == first.Summary.Objects || reflect.DeepEqual(got.Findings, first.Findings) {
		t.Fatalf("the changes changed nothing: %d objects, %d findings before and after", got.Summary.Objects, len(got.Findings))
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("after incremental audits: %d objects, %d findings %v; a full audit: %d objects, %d findings %v",
			got.Summary.Objects, len(got.Findings), got.Summary.Actions, want.Summary.Objects, len(want.Findings), want.Summary.Actions)
		for i := range min(len(got.Findings), len(want.Findings)) {
			if !reflect.DeepEqual(got.Findings[i], want.Findings[i]) {
				t.Fatalf("first difference at %d: %+v, want %+v", i, got.Findings[i], want.Findings[i])
			}
		}
	}
	gotFound, _, gotObjects := r.LatestFindings()
	wantFound, _, wantObjects := fresh.LatestFindings()
	if !reflect.DeepEqual(gotFound, wantFound) || gotObjects != wantObjects {
		t.Errorf("LatestFindings differ: %d findings over %d objects, want %d over %d", len(gotFound), gotObjects, len(wantFound), wantObjects)
	}
	if got, want := r.Bindings(), fresh.Bindings(); !reflect.DeepEqual(got, want) {
		t.Errorf("binding rows differ: %d rows, want %d", len(got), len(want))
	}
	if got, want := r.Pending(), fresh.Pending(); !reflect.DeepEqual(got, want) || len(want) == 0 {
		t.Errorf("pending rows differ: %+v, want %+v", got, want)
	}
	gotReports, gotCluster := audit.OpenReports(gotFound, gen.InventoryNow, 0, st, nil)
	wantReports, wantCluster := audit.OpenReports(wantFound, gen.InventoryNow, 0, st, nil)
	if !reflect.DeepEqual(gotReports, wantReports) || !reflect.DeepEqual(gotCluster, wantCluster) {
		t.Errorf("OpenReports differ: %d and %d objects, want %d and %d", len(gotReports), len(gotCluster), len(wantReports), len(wantCluster))
	}
}

// TestFirstAuditWaitsForTheHandlers: the cache reports synced while the handlers may still be
// being told of the informers' first objects; the first full audit waits until they were
// (HandlersSynced), so that no incremental audit of those objects follows it.
func TestFirstAuditWaitsForTheHandlers(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	failed := testobj.PV("pv-failed", testobj.Phase(corev1.VolumeFailed))
	c := fake.NewClientBuilder().WithObjects(failed.DeepCopy()).Build()
	reg := prometheus.NewRegistry()
	r := audit.NewRunner(audit.RunnerOptions{Cache: c, Live: clusterview.New(c, c).LiveView, Engine: func() *policy.Engine { return policy.NewEngine(nil) },
		Registry: reg, Log: logr.Discard()})
	var told atomic.Bool
	r.HandlersSynced(told.Load)
	go func() {
		time.Sleep(300 * time.Millisecond) // the handler is told of the object late
		r.Changed(failed)
		told.Store(true)
	}()
	go func() { _ = r.Start(ctx) }()
	select {
	case <-r.FirstAudit():
	case <-time.After(10 * time.Second):
		t.Fatal("no first audit")
	}
	if !told.Load() {
		t.Fatal("the first full audit ran before the handler was told of the informer's objects")
	}
	time.Sleep(1500 * time.Millisecond) // past the batching of changes (a second)
	if n := histogramCount(t, reg, "incremental"); n != 0 {
		t.Errorf("%d incremental audits after the first full audit, want none: it had judged the object", n)
	}
	if len(r.Latest().Findings) != 1 {
		t.Errorf("findings %+v, want the failed volume's", r.Latest().Findings)
	}
}

// histogramCount is how many audits of scope the runner's duration histogram observed.
func histogramCount(t *testing.T, reg *prometheus.Registry, scope string) uint64 {
	t.Helper()
	return testobj.Metric(t, reg, "pvguard_audit_duration_seconds", map[string]string{"scope": scope}).GetHistogram().GetSampleCount()
}

// TestARelistIsAuditedWhole: when the changes reach a tenth of the objects the audits hold (an
// informer's relist reports every object as updated), the runner audits the whole cache once
// rather than each changed object one at a time, and finds the same; a few changes are still
// audited incrementally.
func TestARelistIsAuditedWhole(t *testing.T) {
	st := gen.Inventory(12000)
	c := storecache.New(st)
	if err := clusterview.SetupIndexes(context.Background(), c, nil); err != nil {
		t.Fatal(err)
	}
	views := clusterview.New(c, storecache.Reader{State: st})
	reg := prometheus.NewRegistry()
	engine := policy.NewEngine(nil)
	r := audit.NewRunner(audit.RunnerOptions{Cache: c, Live: views.LiveView, View: views.CacheView, Registry: reg,
		Engine: func() *policy.Engine { return engine }, Log: logr.Discard(), Now: func() time.Time { return gen.InventoryNow }})
	ctx := context.Background()
	if err := r.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	want := r.Latest().Findings
	var volumes []any
	for _, pv := range st.Volumes() {
		volumes = append(volumes, pv)
	}
	for _, step := range []struct {
		name              string
		changed           []any
		full, incremental uint64
	}{
		{"a few volumes", volumes[:10], 1, 1},
		{"every volume", volumes, 2, 1},
	} {
		r.Changed(step.changed...)
		if err := r.RunPending(ctx); err != nil {
			t.Fatal(err)
		}
		if f, i := histogramCount(t, reg, "full"), histogramCount(t, reg, "incremental"); f != step.full || i != step.incremental {
			t.Errorf("after %s changed: %d full and %d incremental audits, want %d and %d", step.name, f, i, step.full, step.incremental)
		}
		if got := r.Latest().Findings; !reflect.DeepEqual(got, want) {
			t.Errorf("after %s changed: %d findings, want the first audit's %d", step.name, len(got), len(want))
		}
	}
}
