package cores_test

import (
	"context"
	"testing"
	"time"

	"github.com/pvguard/pvguard/internal/cores"
)

// waitUntil polls cond for up to 10 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10 s", what)
		}
	}
}

// TestSeatsBoundTheHolders: n seats hold n holders at once; the next waits until one gives its
// seat back, and goes on without one when its context ends first.
func TestSeatsBoundTheHolders(t *testing.T) {
	s := cores.New(2)
	ctxA, giveA := s.Take(t.Context())
	ctxB, giveB := s.Take(t.Context())
	if !cores.Holding(ctxA) || !cores.Holding(ctxB) {
		t.Fatal("the first two holders of two seats hold none")
	}
	got := make(chan context.Context)
	go func() {
		ctx, giveC := s.Take(t.Context())
		t.Cleanup(giveC)
		got <- ctx
	}()
	waitUntil(t, "the third holder waits", func() bool { return s.Waiting() == 1 })
	giveA()
	if ctx := <-got; !cores.Holding(ctx) {
		t.Fatal("the third holder went on without the seat given back")
	}
	giveB()
	giveB() // a second give is nothing

	one := cores.New(1)
	_, give := one.Take(t.Context())
	defer give()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	late, giveLate := one.Take(ctx)
	if cores.Holding(late) {
		t.Fatal("a holder whose context ended got a seat that was never given back")
	}
	giveLate() // gives nothing back: the seat is still the first holder's
	if again, _ := one.Take(ctx); cores.Holding(again) {
		t.Fatal("giving back a seat never held freed one")
	}
}

// TestAwayHandsTheSeatToAWaiter: a holder stepping away (an API call) lets a waiter compute, and
// takes a seat again only once one is free.
func TestAwayHandsTheSeatToAWaiter(t *testing.T) {
	s := cores.New(1)
	ctxA, giveA := s.Take(t.Context())
	defer giveA()
	gotB := make(chan func())
	go func() {
		_, giveB := s.Take(t.Context())
		gotB <- giveB
	}()
	waitUntil(t, "B waits", func() bool { return s.Waiting() == 1 })
	back := cores.Away(ctxA)
	if cores.Holding(ctxA) {
		t.Fatal("A still holds its seat while away")
	}
	giveB := <-gotB
	returned := make(chan struct{})
	go func() { back(); close(returned) }()
	waitUntil(t, "A waits to come back", func() bool { return s.Waiting() == 1 })
	giveB()
	<-returned
	if !cores.Holding(ctxA) {
		t.Fatal("A came back without a seat")
	}
	// Away without a seat in the context is nothing.
	cores.Away(t.Context())()
}

// TestNilSeatsBoundNothing: without seats every holder goes on at once.
func TestNilSeatsBoundNothing(t *testing.T) {
	var s *cores.Seats
	ctx, give := s.Take(t.Context())
	defer give()
	if cores.Holding(ctx) {
		t.Fatal("nil seats handed out a seat")
	}
	cores.Away(ctx)()
	s.Turns(ctx)()()
	var nothing *cores.Pacer
	nothing.Step()
	cores.NewPacer(ctx).Step()
}

// TestTurnsTakeASeatEach: each turn holds a seat until it gives it back, so a turn asked while
// the one seat is held waits for it.
func TestTurnsTakeASeatEach(t *testing.T) {
	s := cores.New(1)
	turn := s.Turns(t.Context())
	give := turn()
	second := make(chan func())
	go func() { second <- turn() }()
	waitUntil(t, "the second turn waiting", func() bool { return s.Waiting() == 1 })
	select {
	case <-second:
		t.Fatal("a second turn went on while the one seat was held")
	default:
	}
	give()
	(<-second)()
	bounded, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	ctx, g := s.Take(bounded)
	defer g()
	if !cores.Holding(ctx) {
		t.Fatal("a turn kept its seat after giving it back")
	}
}

// TestPacerDoesNotHandTheSeatToBackgroundWork: a computation with a Pacer keeps its seat while
// only background work waits (counted as waiting, not handed the seat), and hands it over once
// other work waits too, the background work first, as it asked first.
func TestPacerDoesNotHandTheSeatToBackgroundWork(t *testing.T) {
	s := cores.New(1)
	ctx, give := s.Take(t.Context())
	defer give()
	now := time.Unix(0, 0)
	p := cores.NewPacer(ctx).WithClock(func() time.Time { return now })
	steps := func(n int) {
		for range n {
			now = now.Add(time.Millisecond)
			p.Step()
		}
	}
	background := make(chan struct{})
	go func() {
		_, g := s.Background(t.Context())
		close(background)
		g()
	}()
	waitUntil(t, "the background work waits", func() bool { return s.Waiting() == 1 })
	steps(10 * cores.CheckEvery)
	select {
	case <-background:
		t.Fatal("the seat was handed over to background work")
	default:
	}
	other := make(chan struct{})
	go func() {
		_, g := s.Take(t.Context())
		close(other)
		g()
	}()
	waitUntil(t, "other work waits too", func() bool { return s.Waiting() == 2 })
	steps(cores.CheckEvery) // handed over, and taken again once both gave it back
	<-background
	<-other
	if !cores.Holding(ctx) {
		t.Fatal("the computation did not take a seat again")
	}
}

// TestPacerHandsTheSeatOverAfterEachMillisecond: a paced computation reads its clock every
// CheckEvery steps and, once Every has gone by since its first reading or its last hand-over,
// hands its seat to a waiting holder and waits for one again; with nobody waiting it keeps it.
func TestPacerHandsTheSeatOverAfterEachMillisecond(t *testing.T) {
	s := cores.New(1)
	ctx, give := s.Take(t.Context())
	defer give()
	now := time.Unix(0, 0)
	p := cores.NewPacer(ctx).WithClock(func() time.Time { return now })
	steps := func(n int, each time.Duration) {
		for range n {
			now = now.Add(each)
			p.Step()
		}
	}
	steps(10*cores.CheckEvery, time.Millisecond) // nobody waits: kept
	if !cores.Holding(ctx) {
		t.Fatal("the seat was given up with nobody waiting")
	}
	ran := make(chan struct{})
	go func() {
		_, giveB := s.Take(t.Context())
		close(ran)
		giveB()
	}()
	waitUntil(t, "B waits", func() bool { return s.Waiting() == 1 })
	steps(cores.CheckEvery-1, time.Hour) // no reading of the clock yet
	select {
	case <-ran:
		t.Fatal("the seat was handed over between two readings of the clock")
	default:
	}
	steps(1, time.Hour)
	<-ran // handed over; B gave it back, and the computation has it again
	if !cores.Holding(ctx) {
		t.Fatal("the computation did not take a seat again after handing it over")
	}
}
