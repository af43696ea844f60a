package binder

import (
	"context"
	"testing"
	"time"
)

// TestPauseWaitsForPlanWork: the time spent on a plan outside the binder (AddPlanWork, the
// NoVolumeFits pass) lengthens the pause before the next plan, as the plan's own time does, and
// is spent once.
func TestPauseWaitsForPlanWork(t *testing.T) {
	b := &Binder{}
	b.planTook.Store(int64(10 * time.Millisecond))
	b.AddPlanWork(100 * time.Millisecond)
	start := time.Now()
	if !b.pause(context.Background()) {
		t.Fatal("pause reported the context ended")
	}
	if took := time.Since(start); took < 110*time.Millisecond {
		t.Errorf("paused %s, want at least the plan's 10ms and the 100ms spent on it", took)
	}
	if left := b.planWork.Load(); left != 0 {
		t.Errorf("%s of plan work left after the pause, want none", time.Duration(left))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	b.AddPlanWork(time.Hour)
	if b.pause(ctx) {
		t.Error("pause after the context ended reported true")
	}
}
