package explain

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/pvguard/pvguard/binder"
	. "github.com/pvguard/pvguard/test/testobj"
)

// waitIdle waits until no plan is being made.
func waitIdle(t *testing.T, p *Plans) {
	t.Helper()
	for range 1000 {
		p.mu.Lock()
		idle := p.building == nil
		p.mu.Unlock()
		if idle {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("the plan was not made in 5s")
}

// TestPlansAreMadeOnChangeNotPerQuestion: the explanations read one plan; it is made again only
// when an object changed and MinInterval has passed since the last (in the background: the
// question that notices reads the last one), or when it is older than MaxAge.
func TestPlansAreMadeOnChangeNotPerQuestion(t *testing.T) {
	var lists atomic.Int32
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).
		WithObjects(PVC("ns", "c", Request("1Gi")), PV("pv-1", Capacity("1Gi"), Phase(corev1.VolumeAvailable))).
		WithInterceptorFuncs(interceptor.Funcs{List: func(ctx context.Context, cl client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*corev1.PersistentVolumeList); ok {
				lists.Add(1)
			}
			return cl.List(ctx, list, opts...)
		}}).Build()
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	// A denial the binder met: it ages without an object changing.
	denied := func(now time.Time) (bool, binder.InFlight) {
		return false, binder.InFlight{Denied: map[types.UID]map[string]time.Time{"uid-x": {"pv-1": now}}, At: now}
	}
	p := NewPlans(ServeOptions{Cache: c, Now: clock, Log: logr.Discard(), PlanState: denied}, PlansOptions{MinInterval: time.Second, MaxAge: time.Minute})
	ctx := context.Background()
	ask := func() *snapshot {
		t.Helper()
		s, err := p.current(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	first := ask()
	for range 5 {
		if ask() != first {
			t.Fatal("a question made a plan of its own")
		}
	}
	if n := lists.Load(); n != 1 {
		t.Fatalf("%d reads of the cache for 6 questions, want 1", n)
	}
	if err := c.Create(ctx, PV("pv-2", Capacity("2Gi"), Phase(corev1.VolumeAvailable))); err != nil {
		t.Fatal(err)
	}
	p.Changed()
	if ask() != first || lists.Load() != 1 {
		t.Fatal("a change was planned before MinInterval passed")
	}
	advance(2 * time.Second)
	if ask() != first {
		t.Fatal("the question that noticed the change waited for the plan")
	}
	waitIdle(t, p)
	second := ask()
	if second == first || len(second.in.State.Volumes()) != 2 || lists.Load() != 2 {
		t.Fatalf("after the change: %d volumes, %d reads, want the new volume in a second read", len(second.in.State.Volumes()), lists.Load())
	}
	advance(2 * time.Second)
	if ask() != second {
		t.Fatal("a plan was made again without a change")
	}
	waitIdle(t, p)
	if lists.Load() != 2 {
		t.Fatal("a plan was made again without a change")
	}
	advance(time.Minute)
	ask()
	waitIdle(t, p)
	third := ask()
	if third == second || lists.Load() != 3 {
		t.Fatal("a plan older than MaxAge was not made again")
	}
	// Without binds in flight or denials, nothing ages: no plan is made again without a change.
	p.o.PlanState = nil
	p.Changed()
	advance(2 * time.Second)
	ask()
	waitIdle(t, p)
	fourth := ask()
	advance(time.Minute)
	ask()
	waitIdle(t, p)
	if ask() != fourth || lists.Load() != 4 {
		t.Fatal("a plan without binds in flight or denials was made again without a change")
	}
}

// TestFreshPlansSeeTheWritesBeforeTheQuestion: a question after a change waits (at most
// FreshWait) for a plan read after it, and a question about a claim the newest plan does not hold
// asks for a plan read now; a question on an unchanged pool reads the plan it has.
func TestFreshPlansSeeTheWritesBeforeTheQuestion(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(PVC("ns", "c", Request("1Gi"))).Build()
	p := NewPlans(ServeOptions{Cache: c, Now: time.Now, Log: logr.Discard()}, PlansOptions{MinInterval: 10 * time.Millisecond, MaxAge: time.Minute})
	ctx := context.Background()
	first, err := p.fresh(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := p.fresh(ctx, false); again != first {
		t.Fatal("a question on an unchanged pool made a plan")
	}
	if err := c.Create(ctx, PV("pv-new", Capacity("1Gi"), Phase(corev1.VolumeAvailable))); err != nil {
		t.Fatal(err)
	}
	p.Changed()
	s, err := p.fresh(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if pv, _ := s.in.State.PersistentVolume("pv-new"); pv == nil {
		t.Fatal("the plan after a change misses the volume made before the question")
	}
	// A claim the informer holds but no change was told of yet (its event not handled).
	if err := c.Create(ctx, PVC("ns", "new", Request("1Gi"))); err != nil {
		t.Fatal(err)
	}
	s, err = p.fresh(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := findClaim(s.in.State, "ns", "new"); err != nil {
		t.Fatalf("the plan asked for now misses the new claim: %v", err)
	}
}

// TestQuestionsAboutUnchangedClaimsReadTheNewestPlan: a question about a claim the newest plan
// holds as the cache holds it reads that plan, though other objects changed since; a question
// about a claim that changed since, or that the plan does not hold, reads a plan read after it.
func TestQuestionsAboutUnchangedClaimsReadTheNewestPlan(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(PVC("ns", "c", Request("1Gi"))).Build()
	p := NewPlans(ServeOptions{Cache: c, Now: time.Now, Log: logr.Discard()}, PlansOptions{MinInterval: time.Millisecond, FreshWait: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	first, err := p.forClaim(ctx, c, "ns", "c")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, PV("pv-new", Capacity("1Gi"), Phase(corev1.VolumeAvailable))); err != nil {
		t.Fatal(err)
	}
	p.Changed()
	if s, err := p.forClaim(ctx, c, "ns", "c"); err != nil || s != first {
		t.Fatalf("a question about an unchanged claim read another plan (%v)", err)
	}
	if s, err := p.forClaim(ctx, c, "ns", "nope"); err != nil || s.in.State == nil {
		t.Fatalf("a question about a claim that does not exist: %v", err)
	}
	waitIdle(t, p)
	var claim corev1.PersistentVolumeClaim
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "c"}, &claim); err != nil {
		t.Fatal(err)
	}
	claim.Labels = map[string]string{"changed": "yes"}
	if err := c.Update(ctx, &claim); err != nil {
		t.Fatal(err)
	}
	s, err := p.forClaim(ctx, c, "ns", "c")
	if err != nil {
		t.Fatal(err)
	}
	if held, _ := s.in.State.PersistentVolumeClaim("ns", "c"); held == nil || held.ResourceVersion != claim.ResourceVersion {
		t.Fatal("a question about a changed claim read a plan made before the change")
	}
	if err := c.Create(ctx, PVC("ns", "new", Request("1Gi"))); err != nil {
		t.Fatal(err)
	}
	if s, err = p.forClaim(ctx, c, "ns", "new"); err != nil {
		t.Fatal(err)
	}
	if _, err := findClaim(s.in.State, "ns", "new"); err != nil {
		t.Fatalf("a question about a new claim read a plan made before it: %v", err)
	}
}

// TestTheWaitForTheFirstPlanIsBounded: a question asked while the first plan is still being made
// waits at most FirstWait, then is answered 503.
func TestTheWaitForTheFirstPlanIsBounded(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(PVC("ns", "c", Request("1Gi"))).
		WithInterceptorFuncs(interceptor.Funcs{List: func(ctx context.Context, cl client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			<-release // the first read hangs
			return cl.List(ctx, list, opts...)
		}}).Build()
	p := NewPlans(ServeOptions{Cache: c, Now: time.Now, Log: logr.Discard()}, PlansOptions{FirstWait: 50 * time.Millisecond})
	if _, err := p.forClaim(context.Background(), c, "ns", "c"); err != errNoPlanYet {
		t.Fatalf("got %v, want %v", err, errNoPlanYet)
	}
}

// TestOnlyANodesLabelsChangeThePlan: a node's status updates (its kubelet's, every few seconds)
// change no plan; its labels do.
func TestOnlyANodesLabelsChangeThePlan(t *testing.T) {
	node := func(labels map[string]string, rv string) any {
		n := &metav1.PartialObjectMetadata{}
		n.SetName("n1")
		n.SetLabels(labels)
		n.SetResourceVersion(rv)
		return n
	}
	zoneA, zoneB := map[string]string{"zone": "a"}, map[string]string{"zone": "b"}
	if nodeChanged(node(zoneA, "1"), node(map[string]string{"zone": "a"}, "2")) {
		t.Error("a status update of a node counted as a change")
	}
	if !nodeChanged(node(zoneA, "1"), node(zoneB, "2")) {
		t.Error("a label change of a node did not count")
	}
}
