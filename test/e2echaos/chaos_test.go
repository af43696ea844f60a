package e2echaos

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"
)

// TestBinderChaos: hundreds of claims compete for fewer volumes while binders die.
//
//  1. The population (world_test.go) is planned from the seed: random claims and volumes over
//     two classes, two namespaces and two nodes; legitimately pre-bound pairs (claim names a
//     volume that grants its namespace; volume pre-bound to a claim); planted pairs a deny rule
//     refuses (volume mode, capacity, access modes, node affinity, volume-grab, a volume
//     pre-bound to a claim of the other namespace, and upstream's class mismatch), seeded past
//     admission; test finalizers on some objects. Most is created up front.
//  2. Two in-process replicas contend for one Lease; CHAOS_KILLS times one dies, at a random
//     write attempt (its BeforeWrite hook refuses that write and every later one: a crash
//     between two writes) or at a random moment, and a new one starts. Meanwhile a quarter of
//     the claims and some volumes are created, an injector bumps annotations of random objects
//     (so the binder's updates from its cache hit real 409s) and adds finalizers, and the
//     BeforeWrite hook fails CHAOS_CONFLICT_RATE of the writes with a 409.
//  3. More objects, then CHAOS_SIGKILLS real `pvguard serve` processes are SIGKILLed one after
//     another, each while it holds the Lease (short timings: 6 s lease, 4 s renew deadline), so
//     each successor must wait for the dead leader's Lease to expire.
//  4. Two calm replicas must take over (after the last dead leader's Lease expires) and settle.
//
// The checker (checker.go) then judges the live objects and the monitor judges every change it
// saw on the way.
func TestBinderChaos(t *testing.T) {
	start := time.Now()
	cfg := loadConfig(t)
	cluster(t)
	w := newWorld(t, cfg)
	r := newRand(cfg.Seed, 2)
	mon := startMonitor(t, w.inScope)
	namespaces, prefix := []string{w.nsA, w.nsB}, w.nsA+"-pv-"
	phase := func(name string, since time.Time) time.Time {
		t.Logf("%s took %v", name, time.Since(since).Round(100*time.Millisecond))
		return time.Now()
	}

	p := time.Now()
	w.createAll(t, 0, r)
	in := w.Intent()
	t.Logf("created %d volumes and %d claims up front; planted %v", len(in.Volumes), len(in.Claims), w.plants)
	if t.Failed() {
		t.FailNow()
	}
	if s, err := readState(t, namespaces, prefix); err == nil && len(s.PVs) > 0 && len(s.PVCs) > 0 {
		// The checker requires the protection finalizers where the apiserver's admission adds
		// them (StorageObjectInUseProtection, on by default).
		protect := has(s.PVs[0].Finalizers, finalizerPV) && has(s.PVCs[0].Finalizers, finalizerPVC)
		w.mu.Lock()
		w.intent.ProtectionFinalizers = protect
		w.mu.Unlock()
		t.Logf("the apiserver adds protection finalizers: %v (%v, %v)", protect, s.PVs[0].Finalizers, s.PVCs[0].Finalizers)
	}
	p = phase("creating the population", p)

	ctx, stopInjector := context.WithCancel(context.Background())
	injected := make(chan struct{})
	go func() { defer close(injected); w.inject(ctx, t, newRand(cfg.Seed, 4)) }()
	defer func() { stopInjector(); <-injected }()

	f := newFleet(t, cfg, w.nsA+"-binder")
	trickled := make(chan struct{})
	go func() {
		defer close(trickled)
		// Spread wave 1 over a little less time than the kills take, so that a binder is
		// running whenever an object arrives.
		w.trickle(ctx, t, 1, newRand(cfg.Seed, 5), time.Duration(cfg.Kills)*1200*time.Millisecond)
	}()
	f.chaos(cfg.Kills)
	<-trickled
	p = phase(fmt.Sprintf("%d in-process kills", cfg.Kills), p)

	if cfg.SIGKILLs > 0 {
		w.createAll(t, 2, r)
		f.sigkill(cfg.SIGKILLs)
		p = phase(fmt.Sprintf("%d SIGKILLs", cfg.SIGKILLs), p)
	} else {
		w.createAll(t, 2, r)
	}

	stopInjector()
	<-injected
	calmSince := time.Now()
	f.calm()
	s, violations := settle(t, cfg.Settle, namespaces, prefix, w.Intent)
	f.mu.Lock()
	takeover := f.lastWrite.Sub(calmSince)
	f.mu.Unlock()
	phase("settling", p)

	in = w.Intent()
	reportViolations(t, "final state", violations)
	reportViolations(t, "monitor", mon.Violations())
	f.mu.Lock()
	for _, o := range f.overlaps {
		t.Errorf("two binders at once: %s", o)
	}
	f.mu.Unlock()
	bound, pending := 0, map[string]int{}
	specials := w.specials()
	for _, pvc := range s.PVCs {
		if pvc.Annotations[annBindCompleted] != "" {
			bound++
		} else {
			pending[specials[keyOf(&pvc)]]++
		}
	}
	ideal := Bindable(s, in)
	if bound == 0 || bound*2 < ideal {
		t.Errorf("only %d claims bound where %d could be: the binder hardly worked", bound, ideal)
	}
	t.Logf("claims: %d, bound %d (an ideal assignment binds %d), unbound by kind %v", len(s.PVCs), bound, ideal, pending)
	for _, path := range Shortfall(s, in) {
		t.Logf("short of the ideal: %s", path)
	}
	t.Logf("%s; last calm write %v after the calm replicas started", f.summary(), takeover.Round(100*time.Millisecond))
	// Not failures: a claim whose first bind write landed and whose binder then died can be
	// given a volume its creator pre-bound to it that arrives later; the first is then freed.
	for _, d := range mon.Doubles() {
		t.Logf("note: a claim held by two volumes at once (repaired since): %s", d)
	}
	for _, d := range f.twoVolumes() {
		t.Logf("note: claimRef written into two volumes for one claim (writes that passed the hook, replica:volume): %s", d)
	}
	t.Logf("late pre-bound objects refused by the webhook (their other half was bound elsewhere first): %d", w.refused.Load())
	t.Logf("injector: %d annotation bumps, %d late finalizers, %d refused (last: %v); monitor: %d legitimate unbinds %v",
		w.pokes.Load(), w.lateFinalizers.Load(), w.pokeErrors.Load(), w.lastPokeErr.Load(), len(mon.Unbinds()), firstN(mon.Unbinds(), 5))
	t.Logf("seed %d done in %v", cfg.Seed, time.Since(start).Round(time.Second))
}

// specials maps each claim to what it was planted as ("" for a random one).
func (w *world) specials() map[ClaimKey]string {
	out := map[ClaimKey]string{}
	for _, p := range w.pvcs {
		kind := p.special
		if kind == "" {
			kind = "random"
		}
		out[keyOf(p.pvc)] = kind
	}
	return out
}

func firstN(s []string, n int) string {
	sort.Strings(s)
	if len(s) > n {
		return strings.Join(s[:n], ",") + ",..."
	}
	return strings.Join(s, ",")
}
