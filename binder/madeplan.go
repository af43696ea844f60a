package binder

import (
	"sync"
	"sync/atomic"
	"time"
)

// This file hands the binder's plans to the explanations served in its process
// (Options.KeepPlans): the pool is planned once, by the binder, and explained from that plan,
// rather than planned a second time beside it.

// MadePlan is a plan the binder made and what it read for it. Neither may change: readers share
// them.
type MadePlan struct {
	// Input is what the plan read. With Options.KeepPlans its State holds every claim (the plan
	// considers the pending ones itself) and every node the cache holds, beside the selected
	// nodes read live.
	Input PlanInput
	// Plan is Plan(Input), its own copy (the binder's ledger keeps another).
	Plan PoolPlan
	// Read numbers the plan's read: reads are numbered in the order they begin (PlanReadsBegun),
	// so a plan whose Read is above the count taken after an object changed read the change.
	Read uint64
	// Took is how long the plan took to read and make: the NoVolumeFits pass over it spends as
	// much at most (explain.NoVolumeFitsReporter).
	Took time.Duration
}

// madePlans holds the newest MadePlan and wakes those waiting for the next.
type madePlans struct {
	reads atomic.Uint64 // reads begun
	mu    sync.Mutex
	last  *MadePlan
	next  chan struct{} // closed when a newer plan is kept
}

func (m *madePlans) keep(p *MadePlan) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.last = p
	if m.next != nil {
		close(m.next)
		m.next = nil
	}
}

// LatestPlan is the newest plan the binder made (nil before the first, and always without
// Options.KeepPlans), and a channel closed once a newer one is made.
func (b *Binder) LatestPlan() (*MadePlan, <-chan struct{}) {
	m := &b.made
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.next == nil {
		m.next = make(chan struct{})
	}
	return m.last, m.next
}

// PlanReadsBegun is how many plan reads have begun: a plan with a greater MadePlan.Read began
// its read after this call.
func (b *Binder) PlanReadsBegun() uint64 { return b.made.reads.Load() }

// Planning reports whether the binder runs in this process (on the elected replica) and keeps
// the plans it makes (Options.KeepPlans) for LatestPlan.
func (b *Binder) Planning() bool { return b.o.KeepPlans && b.running.Load() }

// RequestPlan asks for a plan soon: requests made meanwhile, and the binder's own, make one more
// plan, spaced as every plan is (pause).
func (b *Binder) RequestPlan() { b.requestPlan() }
