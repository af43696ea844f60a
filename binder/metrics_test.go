package binder

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/test/testobj"
)

// TestQueueDepthOnlyWhileRunning checks that pvguard_binder_queue_depth is exported only while
// the binder runs (a replica that is not elected fills its queues from the informers and never
// drains them), and then is the length of each queue.
func TestQueueDepthOnlyWhileRunning(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	c := fake.NewClientBuilder().Build()
	b, err := New(Options{
		Mode: ModeActive, Engine: func() *policy.Engine { return policy.NewEngine(nil) },
		Views:    func(context.Context) policy.View { return testobj.NewView() },
		Recorder: record.NewFakeRecorder(10), Cache: c, Live: c, Writer: c, Registry: reg,
	})
	if err != nil {
		t.Fatal(err)
	}
	const name = "pvguard_binder_queue_depth"
	for _, k := range []key{{kind: 'c', namespace: "a", name: "x"}, {kind: 'c', namespace: "a", name: "y"}, {kind: 'v', name: "pv-1"}} {
		b.queue.Add(k)
	}
	b.plans.Add(planKey)
	if n, err := testutil.GatherAndCount(reg, name); err != nil || n != 0 {
		t.Fatalf("binder not running: %d series (err %v), want none", n, err)
	}

	// As the running binder would see them before its workers take anything.
	b.running.Store(true)
	want := `# HELP pvguard_binder_queue_depth Keys waiting in the running binder's work queues: sync (claims and volumes to sync) and plan (a plan requested). Exported only by the replica running the binder.
# TYPE pvguard_binder_queue_depth gauge
pvguard_binder_queue_depth{queue="plan"} 1
pvguard_binder_queue_depth{queue="sync"} 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), name); err != nil {
		t.Error(err)
	}
	b.running.Store(false)

	// Start sets running, and its return clears it.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Start(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := testutil.GatherAndCount(reg, name)
		if err != nil {
			t.Fatal(err)
		}
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("binder started: %d series, want 2 (sync and plan)", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Start: %v", err)
	}
	if n, err := testutil.GatherAndCount(reg, name); err != nil || n != 0 {
		t.Errorf("binder stopped: %d series (err %v), want none", n, err)
	}
}
