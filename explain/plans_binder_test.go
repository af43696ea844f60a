package explain_test

import (
	"context"
	"encoding/json"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/pvguard/pvguard/binder"
	"github.com/pvguard/pvguard/explain"
	. "github.com/pvguard/pvguard/test/testobj"
)

// TestExplanationsReadTheBindersPlan: with the binder planning in the process (shadow here; active
// plans the same way), the explanations are answered from the binder's own plans: they never read
// the volumes to plan the pool themselves, their verdicts are those of a plan of the pool, and a
// claim made after the binder's last plan is explained from the binder's next, which the question
// asks for. Without a binder that plans, the explanations plan once themselves.
func TestExplanationsReadTheBindersPlan(t *testing.T) {
	objs := []client.Object{
		StorageClass("fast", "csi.example.com"),
		PVC("team-a", "c1", ClaimClass("fast"), Request("1Gi"), ClaimUID("uid-c1")),
		PVC("team-a", "c2", ClaimClass("fast"), Request("1Gi"), ClaimUID("uid-c2")),
		PV("pv-1", Class("fast"), Capacity("1Gi"), Phase(corev1.VolumeAvailable)),
		PV("pv-big", Class("fast"), Capacity("1Gi"), VolumeMode(corev1.PersistentVolumeBlock), Phase(corev1.VolumeAvailable)),
	}
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(objs...).Build()
	// What the explanations read, counted: a plan of their own lists the volumes.
	var lists atomic.Int32
	reader := interceptor.NewClient(c.(client.WithWatch), interceptor.Funcs{List: func(ctx context.Context, cl client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		if _, ok := list.(*corev1.PersistentVolumeList); ok {
			lists.Add(1)
		}
		return cl.List(ctx, list, opts...)
	}})
	b := explain.StartShadowBinder(t, c)
	ctx := t.Context()

	// The clock runs: plans are spaced by it.
	o := explain.ServeOptions{Cache: reader, Now: time.Now, Log: logr.Discard(),
		PlanState: b.PlanState, Binder: b}
	o.Plans = explain.NewPlans(o, explain.PlansOptions{MinInterval: time.Millisecond})
	if err := o.Plans.Start(ctx); err != nil {
		t.Fatal(err)
	}
	x := explain.NewService(o)
	same := func(ns, name string) {
		t.Helper()
		var solo explain.Explanation
		if err := json.Unmarshal([]byte(want(t, objs, ns, name)), &solo); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if got := ask(t, x, ns, name); !reflect.DeepEqual(got.Verdict, solo.Verdict) || !reflect.DeepEqual(got.Candidates, solo.Candidates) {
				t.Fatalf("%s/%s: verdict %+v, want %+v", ns, name, got.Verdict, solo.Verdict)
			}
		}
	}
	same("team-a", "c1")
	same("team-a", "c2")
	if got := ask(t, x, "team-a", "c1").Verdict.Volume.String(); got != "pv-1" {
		t.Errorf("c1's verdict names %q, want the volume the binder's plan gives it, pv-1", got)
	}
	if n := lists.Load(); n != 0 {
		t.Errorf("the explanations listed the volumes %d times: they planned the pool beside the binder", n)
	}

	// A claim made after the binder's plan: the question asks the binder for the next one.
	objs = append(objs, PVC("team-b", "c3", ClaimClass("fast"), Request("1Gi"), ClaimUID("uid-c3")))
	if err := c.Create(ctx, objs[len(objs)-1]); err != nil {
		t.Fatal(err)
	}
	same("team-b", "c3")
	if n := lists.Load(); n != 0 {
		t.Errorf("the explanations listed the volumes %d times: they planned the pool beside the binder", n)
	}

	// Without a binder that plans (a replica that is not elected), they plan once themselves.
	o.Binder = notPlanning{}
	o.Plans = explain.NewPlans(o, explain.PlansOptions{FirstWait: time.Millisecond})
	if err := o.Plans.Start(ctx); err != nil {
		t.Fatal(err)
	}
	x = explain.NewService(o)
	same("team-a", "c2")
	if n := lists.Load(); n != 1 {
		t.Errorf("without a binder that plans, %d reads of the volumes, want 1", n)
	}
}

// notPlanning is a binder that does not run here.
type notPlanning struct{}

func (notPlanning) Planning() bool                                  { return false }
func (notPlanning) LatestPlan() (*binder.MadePlan, <-chan struct{}) { return nil, make(chan struct{}) }
func (notPlanning) PlanReadsBegun() uint64                          { return 0 }
func (notPlanning) RequestPlan()                                    {}
