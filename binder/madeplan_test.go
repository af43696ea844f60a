package binder

import (
	"context"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/pvguard/pvguard/clusterstate"
	"github.com/pvguard/pvguard/storage"
	"github.com/pvguard/pvguard/test/testobj"
)

// TestKeptPlansHoldEveryClaimAndNode: with KeepPlans, the plan the binder keeps for explanations
// read every claim (a bound one too) and every node, and is the plan of the pending claims it
// binds by; without it, nothing is kept.
func TestKeptPlansHoldEveryClaimAndNode(t *testing.T) {
	fast := class("fast", "csi.example.com", storagev1.VolumeBindingImmediate)
	bound := testobj.PVC("ns", "bound", testobj.ClaimClass("fast"), testobj.ClaimUID("uid-bound"), testobj.ClaimBoundTo("pv-bound"),
		testobj.ClaimMeta(testobj.Annotation(storage.AnnBindCompleted, "yes")))
	pending := testobj.PVC("ns", "pending", testobj.ClaimClass("fast"), testobj.Request("1Gi"), testobj.ClaimUID("uid-pending"))
	bd, _ := liveBinder(t, fast, bound, pending, testobj.Node("n1", map[string]string{"zone": "a"}),
		testobj.PV("pv-bound", testobj.Class("fast"), testobj.Capacity("1Gi"), testobj.BoundTo(bound), testobj.Phase(corev1.VolumeBound)),
		testobj.PV("pv-1", testobj.Class("fast"), testobj.Capacity("1Gi"), testobj.Phase(corev1.VolumeAvailable)))
	ctx := context.Background()
	if err := bd.runPlan(ctx); err != nil {
		t.Fatal(err)
	}
	if mp, _ := bd.LatestPlan(); mp != nil || bd.Planning() {
		t.Fatal("a plan was kept without KeepPlans")
	}
	bd.o.KeepPlans = true
	if err := bd.runPlan(ctx); err != nil {
		t.Fatal(err)
	}
	mp, _ := bd.LatestPlan()
	if mp == nil {
		t.Fatal("no plan kept")
	}
	if c, _ := mp.Input.State.PersistentVolumeClaim("ns", "bound"); c == nil {
		t.Error("the kept plan's input lacks the bound claim")
	}
	if n, _ := mp.Input.State.Node("n1"); n == nil || n.Labels["zone"] != "a" {
		t.Errorf("the kept plan's input lacks node n1 and its labels: %v", n)
	}
	pendingOnly := clusterstate.New([]*corev1.PersistentVolumeClaim{pending}, mp.Input.State.Volumes(), mp.Input.State.Classes(), nil)
	want := Plan(PlanInput{State: pendingOnly, InFlight: mp.Input.InFlight, PendingFree: mp.Input.PendingFree})
	if !reflect.DeepEqual(mp.Plan.Volumes, want.Volumes) || mp.Plan.Volumes["uid-pending"] != "pv-1" {
		t.Errorf("kept plan %v, want %v", mp.Plan.Volumes, want.Volumes)
	}
	if got, _ := bd.ledger.planned("uid-pending"); got != mp.Plan.Volumes["uid-pending"] {
		t.Errorf("the binder binds by %q, the kept plan says %q", got, mp.Plan.Volumes["uid-pending"])
	}
	if mp.Read != bd.PlanReadsBegun() {
		t.Errorf("the kept plan's read is %d of %d begun", mp.Read, bd.PlanReadsBegun())
	}
}
