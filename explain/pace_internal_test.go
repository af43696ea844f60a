package explain

import (
	"context"
	"runtime"
	"testing"

	"github.com/pvguard/pvguard/internal/cores"
)

// TestATableHandsItsSeatToAWaiter: a question's table goes over every volume on the question's
// seat, and hands the seat to a holder that waits for it (a binder sync) after each millisecond of
// that work, rather than after all of it: the waiter has had its turn before the table is done.
func TestATableHandsItsSeatToAWaiter(t *testing.T) {
	in := Input{State: synthetic(1, 80000, 2000), NodesListed: true}
	in.State = withUIDs(in.state())
	x := indexInput(in)
	p := snapshotOf(x, planPool(x, in.InFlight), 0, nil).p
	claim := pendingClaims(in.State)[0]
	x.volumeFacts() // made once per plan, before any question's table

	seats := cores.New(1)
	ctx, give := seats.Take(t.Context())
	defer give()
	turned := make(chan struct{}, 1)
	go func() {
		_, g := seats.Take(context.Background()) // queued behind the question
		turned <- struct{}{}
		g()
	}()
	for seats.Waiting() == 0 {
		runtime.Gosched()
	}
	xi := *x
	xi.pace = cores.NewPacer(ctx)
	// 81,000 volumes take the table several milliseconds; the waiter queued meanwhile.
	_, tbl := explainTable(&xi, p, claim, shownClosest)
	tbl.release()
	select {
	case <-turned:
	default:
		t.Fatal("the waiter had no turn while the table went over every volume")
	}
	if !cores.Holding(ctx) {
		t.Fatal("the question lost its seat")
	}
}
