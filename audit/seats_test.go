package audit_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/pvguard/pvguard/audit"
	"github.com/pvguard/pvguard/internal/clusterview"
	"github.com/pvguard/pvguard/internal/cores"
	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/test/testobj"
)

// TestAuditsAfterTheFirstComputeOnASeat: with the process's one seat held elsewhere, the first
// full audit after Start still runs (it takes every core), while a later full audit and an
// incremental one wait for the seat and finish once it is given back.
func TestAuditsAfterTheFirstComputeOnASeat(t *testing.T) {
	claim := testobj.PVC("team-a", "data", testobj.ClaimUID("u-data"), testobj.ClaimBoundTo("pv-data"), testobj.ClaimPhase(corev1.ClaimBound))
	volume := testobj.PV("pv-data", testobj.BoundTo(claim), testobj.Phase(corev1.VolumeBound))
	c := fake.NewClientBuilder().WithObjects(claim.DeepCopy(), volume.DeepCopy()).Build()
	seats := cores.New(1)
	r := audit.NewRunner(audit.RunnerOptions{Cache: c, Live: clusterview.New(c, c).LiveView, Engine: func() *policy.Engine { return policy.NewEngine(nil) },
		Log: logr.Discard(), Interval: time.Hour, Seats: seats})

	_, give := seats.Take(context.Background())
	ctx, stop := context.WithCancel(context.Background())
	started := make(chan error, 1)
	go func() { started <- r.Start(ctx) }()
	select {
	case <-r.FirstAudit():
	case <-time.After(10 * time.Second):
		t.Fatal("the first full audit waited for the seat held elsewhere")
	}
	stop()
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	if got := r.Latest().Summary.Objects; got != 2 {
		t.Fatalf("the first full audit judged %d objects, want 2", got)
	}

	onASeat := func(name string, run func() error) {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- run() }()
		waitFor(t, name+" waiting for the seat", func() bool { return seats.Waiting() > 0 })
		select {
		case err := <-done:
			t.Fatalf("%s ended while the one seat was held elsewhere (err %v)", name, err)
		default:
		}
		give()
		if err := <-done; err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		_, give = seats.Take(context.Background())
	}
	onASeat("a later full audit", func() error { return r.RunOnce(context.Background()) })
	r.Changed(claim)
	onASeat("an incremental audit", func() error { return r.RunPending(context.Background()) })
	give()
}

// waitFor polls cond until it holds, failing the test after ten seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out: %s", what)
		}
	}
}
