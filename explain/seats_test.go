package explain_test

import (
	"context"
	"testing"
	"time"

	"github.com/pvguard/pvguard/explain"
	"github.com/pvguard/pvguard/internal/access"
	"github.com/pvguard/pvguard/internal/cores"
	. "github.com/pvguard/pvguard/test/testobj"
)

// TestExplanationsComputeOnASeat: an explanation of a claim or a volume computes on one of the
// process's seats (internal/cores): while every seat is held elsewhere it waits, and it is
// answered once one is given back.
func TestExplanationsComputeOnASeat(t *testing.T) {
	o := explainOptions(ExplainCluster()...)
	o.Seats = cores.New(1)
	x := explain.NewService(o)
	admin := access.Everything("admin")
	for name, ask := range map[string]func(context.Context) error{
		"claim": func(ctx context.Context) error {
			_, err := x.Claim(ctx, admin, "team-a", "data", explain.CandidatePage{})
			return err
		},
		"volume": func(ctx context.Context) error {
			_, err := x.Volume(ctx, admin, "pv-fs")
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			if err := ask(t.Context()); err != nil { // with the seat free
				t.Fatal(err)
			}
			held, give := o.Seats.Take(t.Context())
			if !cores.Holding(held) {
				t.Fatal("the test's holder got no seat: an explanation kept one")
			}
			answered := make(chan error, 1)
			go func() { answered <- ask(t.Context()) }()
			select {
			case err := <-answered:
				give()
				t.Fatalf("answered (%v) while the one seat was held elsewhere", err)
			case <-time.After(100 * time.Millisecond):
			}
			give()
			if err := <-answered; err != nil {
				t.Fatal(err)
			}
		})
	}
}
