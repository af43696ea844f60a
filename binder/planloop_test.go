package binder

import (
	"context"
	"fmt"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/test/testobj"
)

// TestPlansDoNotWaitBehindBinds: a plan gives many claims volumes and enqueues them all; their
// binds are slow (the client's rate limit, in a cluster). A plan asked for meanwhile must still
// run: in the claims' queue, the next plan would wait behind every queued bind (docs/benchmarks.md,
// "Scale").
func TestPlansDoNotWaitBehindBinds(t *testing.T) {
	fast := class("fast", "csi.example.com", storagev1.VolumeBindingImmediate)
	objs := []client.Object{fast}
	for i := range 30 {
		objs = append(objs,
			testobj.PVC("ns", fmt.Sprintf("c-%02d", i), testobj.ClaimClass("fast"), testobj.Request("1Gi")),
			testobj.PV(fmt.Sprintf("pv-%02d", i), testobj.Class("fast"), testobj.Capacity("1Gi"), testobj.Phase(corev1.VolumeAvailable)))
	}
	bd, _ := liveBinder(t, objs...)
	release := make(chan struct{})
	bd.o.BeforeWrite = func(string, client.Object) error { <-release; return nil }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- bd.Start(ctx) }()
	t.Cleanup(func() {
		close(release)
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})

	// The first plan gives the 30 claims volumes; every worker then blocks in a bind and the
	// other claims wait in the queue.
	waitFor(t, "the first plan", func() bool { return plans(t, bd) >= 1 })
	waitFor(t, "the claims' binds to fill the queue", func() bool { return bd.queue.Len() > 0 })
	before := plans(t, bd)
	bd.requestPlan()
	waitFor(t, "a plan while binds are blocked", func() bool { return plans(t, bd) > before })
}

// plans is the number of plans the binder has finished.
func plans(t *testing.T, bd *Binder) uint64 {
	t.Helper()
	var m dto.Metric
	if err := bd.metrics.planDuration.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
