package binder

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// t0 is the tests' clock: a fixed moment, so denials age exactly.
var t0 = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

// TestLedgerBeginBind: a bind may begin unless another claim's bind of the volume or the
// volume's Available write is in flight; the claim's own bind may begin again (a retry), and
// keeps the moment the first one was decided.
func TestLedgerBeginBind(t *testing.T) {
	for _, tc := range []struct {
		name      string
		before    func(l *ledger)
		want      bool
		wantStart time.Time
	}{
		{name: "free volume", before: func(*ledger) {}, want: true, wantStart: t0},
		{name: "reserved for the same claim", before: func(l *ledger) {
			l.beginBind("pv-1", "c1", t0.Add(-time.Second))
			l.endBind("pv-1")
		}, want: true, wantStart: t0.Add(-time.Second)},
		{name: "reserved for another claim", before: func(l *ledger) { l.beginBind("pv-1", "c2", t0) }},
		{name: "another claim's bind gave up", before: func(l *ledger) {
			l.beginBind("pv-1", "c2", t0)
			l.endBind("pv-1")
			l.unreserve("pv-1", "c2")
		}, want: true, wantStart: t0},
		{name: "another claim's bind denied by policy", before: func(l *ledger) {
			l.beginBind("pv-1", "c2", t0)
			l.deny("c2", "pv-1", t0)
		}, want: true, wantStart: t0},
		{name: "another claim's bind shown by the cache", before: func(l *ledger) {
			l.beginBind("pv-1", "c2", t0)
			l.settle("pv-1", "c2")
		}, want: true, wantStart: t0},
		{name: "the cache shows the volume bound to a third claim", before: func(l *ledger) {
			l.beginBind("pv-1", "c2", t0)
			l.settle("pv-1", "c3")
		}},
		{name: "Available write in flight", before: func(l *ledger) { l.startMarking("pv-1") }},
		{name: "Available write shown", before: func(l *ledger) {
			l.startMarking("pv-1")
			l.stopMarking("pv-1")
		}, want: true, wantStart: t0},
		{name: "Available write of a volume now gone", before: func(l *ledger) {
			l.startMarking("pv-1")
			l.forget(key{kind: 'v', name: "pv-1"})
		}, want: true, wantStart: t0},
		{name: "a claim of the volume's name is gone", before: func(l *ledger) {
			l.startMarking("pv-1")
			l.forget(key{kind: 'c', namespace: "", name: "pv-1"})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLedger()
			tc.before(l)
			start, ok := l.beginBind("pv-1", "c1", t0)
			if ok != tc.want || start != tc.wantStart {
				t.Fatalf("beginBind = %v, %v; want %v, %v", start, ok, tc.want, tc.wantStart)
			}
			if got := l.snapshot(t0).Reserved["pv-1"]; ok && got != "c1" {
				t.Errorf("volume reserved for %q after the bind began, want c1", got)
			}
			if ok && !l.bindInFlight("pv-1") {
				t.Error("bind not in flight after it began")
			}
		})
	}
}

// TestLedgerBindInFlight: a volume's binds are in flight from beginBind to endBind, however many
// overlap; the reservation outlives them.
func TestLedgerBindInFlight(t *testing.T) {
	l := newLedger()
	l.beginBind("pv-1", "c1", t0)
	l.beginBind("pv-1", "c1", t0)
	for i, want := range []bool{true, false} {
		l.endBind("pv-1")
		if got := l.bindInFlight("pv-1"); got != want {
			t.Fatalf("after %d of 2 binds ended: in flight %v, want %v", i+1, got, want)
		}
	}
	if got := l.snapshot(t0).Reserved["pv-1"]; got != "c1" {
		t.Errorf("reserved for %q once the binds ended, want c1 until the cache shows the binding", got)
	}
	l.bindCompleted("c1")
	if start, _ := l.beginBind("pv-1", "c1", t0.Add(time.Minute)); start != t0.Add(time.Minute) {
		t.Errorf("a bind after a completed one starts at %v, want its own decision", start)
	}
}

// TestLedgerReservationEnds: a reservation ends only for its own claim: when the cache shows the
// binding, when the bind fails, or when policy denies the pair.
func TestLedgerReservationEnds(t *testing.T) {
	for _, tc := range []struct {
		name         string
		end          func(l *ledger) bool
		wantReturned bool
		wantReserved bool
	}{
		{name: "cache shows it bound to the claim", end: func(l *ledger) bool { l.settle("pv-1", "c1"); return false }},
		{name: "cache shows it bound to another", end: func(l *ledger) bool { l.settle("pv-1", "c2"); return false }, wantReserved: true},
		{name: "the claim's bind failed", end: func(l *ledger) bool { return l.unreserve("pv-1", "c1") }, wantReturned: true},
		{name: "another claim's bind failed", end: func(l *ledger) bool { return l.unreserve("pv-1", "c2") }, wantReserved: true},
		{name: "policy denied the pair", end: func(l *ledger) bool { l.deny("c1", "pv-1", t0); return false }},
		{name: "policy denied the claim another volume", end: func(l *ledger) bool { l.deny("c1", "pv-2", t0); return false }, wantReserved: true},
		{name: "policy denied another claim the volume", end: func(l *ledger) bool { l.deny("c2", "pv-1", t0); return false }, wantReserved: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLedger()
			l.beginBind("pv-1", "c1", t0)
			l.endBind("pv-1")
			if got := tc.end(l); got != tc.wantReturned {
				t.Errorf("returned %v, want %v", got, tc.wantReturned)
			}
			if _, got := l.snapshot(t0).Reserved["pv-1"]; got != tc.wantReserved {
				t.Errorf("reserved %v, want %v", got, tc.wantReserved)
			}
		})
	}
}

// TestLedgerMarking: an Available write may not start while a bind of the volume is in flight;
// stopMarking reports whether one was.
func TestLedgerMarking(t *testing.T) {
	l := newLedger()
	l.beginBind("pv-1", "c1", t0)
	if l.startMarking("pv-1") {
		t.Error("Available write started during a bind")
	}
	if !l.startMarking("pv-2") {
		t.Error("Available write of a free volume refused")
	}
	if !l.stopMarking("pv-2") || l.stopMarking("pv-2") {
		t.Error("stopMarking should report the write once")
	}
}

// TestLedgerDenials: a denial drops the claim's plan entry and keeps the pair, and only that
// pair, out of plans for forbidTTL.
func TestLedgerDenials(t *testing.T) {
	l := newLedger()
	l.install(map[types.UID]string{"c1": "pv-1", "c2": "pv-2"}, InFlight{}, t0)
	l.deny("c1", "pv-1", t0)
	if v, ok := l.planned("c1"); ok {
		t.Errorf("claim still planned on %q after its pair was denied", v)
	}
	if v, _ := l.planned("c2"); v != "pv-2" {
		t.Errorf("another claim's plan entry changed to %q", v)
	}
	for _, tc := range []struct {
		at         time.Time
		wantUsable bool
	}{
		{at: t0, wantUsable: false},
		{at: t0.Add(forbidTTL - time.Nanosecond), wantUsable: false},
		{at: t0.Add(forbidTTL), wantUsable: true},
	} {
		snap := l.snapshot(tc.at)
		if got := snap.usable("c1", "pv-1"); got != tc.wantUsable {
			t.Errorf("%v after the denial: usable %v, want %v", tc.at.Sub(t0), got, tc.wantUsable)
		}
		if !snap.usable("c1", "pv-2") || !snap.usable("c2", "pv-1") {
			t.Error("a denial kept other pairs out")
		}
	}
}

// TestLedgerSnapshotIsACopy: a plan reads its snapshot without the lock, so nothing done to the
// ledger afterwards may show in it.
func TestLedgerSnapshotIsACopy(t *testing.T) {
	l := newLedger()
	l.beginBind("pv-1", "c1", t0)
	l.deny("c2", "pv-1", t0)
	snap := l.snapshot(t0)
	want := InFlight{
		Reserved: maps.Clone(snap.Reserved),
		Denied:   map[types.UID]map[string]time.Time{"c2": maps.Clone(snap.Denied["c2"])},
	}
	l.beginBind("pv-2", "c3", t0)
	l.deny("c2", "pv-3", t0)
	l.deny("c4", "pv-3", t0)
	l.settle("pv-1", "c1")
	if !maps.Equal(snap.Reserved, want.Reserved) || len(snap.Denied) != 1 || !maps.Equal(snap.Denied["c2"], want.Denied["c2"]) {
		t.Errorf("snapshot changed to %v, %v; was %v, %v", snap.Reserved, snap.Denied, want.Reserved, want.Denied)
	}
}

// TestLedgerInstall: install makes the plan the one claims bind by, and leaves unplanned what
// binds begun and pairs denied since the plan's snapshot contradict (a plan runs without the
// lock); it forgets the denials of claims the plan no longer considers.
func TestLedgerInstall(t *testing.T) {
	// The plan computed from the snapshot: c1 on pv-1, c2 on pv-2, c3 on none.
	plan := func() map[types.UID]string { return map[types.UID]string{"c1": "pv-1", "c2": "pv-2", "c3": ""} }
	for _, tc := range []struct {
		name string
		// before is the ledger when the snapshot is taken; meanwhile what happens while the plan
		// runs.
		before, meanwhile func(l *ledger)
		want              map[types.UID]string
		wantDenied        []types.UID // claims whose denials are kept
	}{
		{name: "nothing happened meanwhile",
			want: plan()},
		{name: "a bind known to the plan goes on",
			before: func(l *ledger) { l.beginBind("pv-1", "c1", t0) },
			want:   plan()},
		{name: "another claim's bind of a planned volume began",
			meanwhile: func(l *ledger) { l.beginBind("pv-1", "c9", t0) },
			want:      map[types.UID]string{"c2": "pv-2", "c3": ""}},
		{name: "a claim's bind of the volume planned for it began",
			meanwhile: func(l *ledger) { l.beginBind("pv-1", "c1", t0) },
			want:      plan()},
		{name: "a claim's bind of another volume began",
			meanwhile: func(l *ledger) { l.beginBind("pv-2", "c1", t0) },
			want:      map[types.UID]string{"c3": ""}},
		{name: "the bind of a claim planned on none began",
			meanwhile: func(l *ledger) { l.beginBind("pv-7", "c3", t0) },
			want:      map[types.UID]string{"c1": "pv-1", "c2": "pv-2"}},
		{name: "a reservation passed from one claim to another",
			before:     func(l *ledger) { l.beginBind("pv-2", "c2", t0) },
			meanwhile:  func(l *ledger) { l.deny("c2", "pv-2", t0); l.beginBind("pv-2", "c9", t0) },
			want:       map[types.UID]string{"c1": "pv-1", "c3": ""},
			wantDenied: []types.UID{"c2"}},
		{name: "a bind known to the plan ended",
			before:    func(l *ledger) { l.beginBind("pv-1", "c1", t0) },
			meanwhile: func(l *ledger) { l.settle("pv-1", "c1") },
			want:      plan()},
		{name: "policy denied a planned pair",
			meanwhile:  func(l *ledger) { l.deny("c1", "pv-1", t0) },
			want:       map[types.UID]string{"c2": "pv-2", "c3": ""},
			wantDenied: []types.UID{"c1"}},
		{name: "policy denied a claim a volume not planned for it",
			meanwhile:  func(l *ledger) { l.deny("c1", "pv-2", t0) },
			want:       plan(),
			wantDenied: []types.UID{"c1"}},
		{name: "a denial that expired by the install",
			meanwhile:  func(l *ledger) { l.deny("c1", "pv-1", t0.Add(-forbidTTL)) },
			want:       plan(),
			wantDenied: []types.UID{"c1"}},
		{name: "denials of claims the plan does not consider are kept until they age out",
			before:     func(l *ledger) { l.deny("c1", "pv-9", t0); l.deny("gone", "pv-9", t0.Add(-forbidTTL)) },
			meanwhile:  func(l *ledger) { l.deny("c3", "pv-9", t0); l.deny("waits-for-consumer", "pv-9", t0) },
			want:       plan(),
			wantDenied: []types.UID{"c1", "c3", "waits-for-consumer"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLedger()
			if tc.before != nil {
				tc.before(l)
			}
			snap := l.snapshot(t0)
			if tc.meanwhile != nil {
				tc.meanwhile(l)
			}
			unplanned := l.install(plan(), snap, t0)
			got := map[types.UID]string{}
			for _, c := range []types.UID{"c1", "c2", "c3", "c9"} {
				if v, ok := l.planned(c); ok {
					got[c] = v
				}
			}
			if !maps.Equal(got, tc.want) {
				t.Errorf("installed %v, want %v", got, tc.want)
			}
			if want := len(plan()) - len(tc.want); unplanned != want {
				t.Errorf("install reported %d claims unplanned, want %d", unplanned, want)
			}
			denied := l.snapshot(t0).Denied
			if len(denied) != len(tc.wantDenied) {
				t.Errorf("denials kept for %v, want for %v", denied, tc.wantDenied)
			}
			for _, c := range tc.wantDenied {
				if _, ok := denied[c]; !ok {
					t.Errorf("denials of pending claim %s forgotten", c)
				}
			}
		})
	}
}

// TestLedgerLagging: the cache lags while it shows a version the binder's writes replaced, and
// has caught up once it shows another.
func TestLedgerLagging(t *testing.T) {
	k := key{kind: 'c', namespace: "ns", name: "c"}
	for _, tc := range []struct {
		name string
		do   func(l *ledger)
		// versions are shown by the cache in turn; want says which of them lag.
		versions []string
		want     []bool
	}{
		{name: "nothing written", do: func(*ledger) {}, versions: []string{"1"}, want: []bool{false}},
		{name: "two writes", do: func(l *ledger) { l.supersede(k, "1"); l.supersede(k, "2") },
			versions: []string{"1", "2", "3", "1"}, want: []bool{true, true, false, false}},
		{name: "object gone", do: func(l *ledger) { l.supersede(k, "1"); l.forget(k) },
			versions: []string{"1"}, want: []bool{false}},
		{name: "another object gone", do: func(l *ledger) { l.supersede(k, "1"); l.forget(key{kind: 'v', name: "c"}) },
			versions: []string{"1"}, want: []bool{true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLedger()
			tc.do(l)
			for i, rv := range tc.versions {
				if got := l.lagging(k, rv); got != tc.want[i] {
					t.Errorf("version %s (shown %d.): lagging %v, want %v", rv, i+1, got, tc.want[i])
				}
			}
		})
	}
}

// TestLedgerShadow: a choice is kept until taken, and the gauge counts the choices kept.
func TestLedgerShadow(t *testing.T) {
	l := newLedger()
	l.shadowChose("c1", "pv-1")
	l.shadowChose("c1", "pv-2")
	l.shadowChose("c2", "pv-3")
	if n := l.shadowChoices(); n != 2 {
		t.Errorf("%v choices, want 2", n)
	}
	if v, ok := l.shadowTake("c1"); !ok || v != "pv-2" {
		t.Errorf("took %q, %v; want pv-2", v, ok)
	}
	if v, ok := l.shadowTake("c1"); ok {
		t.Errorf("took %q twice", v)
	}
	if n := l.shadowChoices(); n != 1 {
		t.Errorf("%v choices, want 1", n)
	}
}

// BenchmarkLedgerSnapshotAndInstall times what a plan of 10,000 claims holds the ledger's lock
// for: the snapshot before it and the install after it, with 100 binds in flight (half of them
// begun while the plan ran) and 100 denied pairs: the lock is not held while the plan itself
// runs (BenchmarkPlanAtScale times that). Results are in docs/benchmarks.md.
func BenchmarkLedgerSnapshotAndInstall(b *testing.B) {
	const claims, binds = 10_000, 100
	l := newLedger()
	plan := make(map[types.UID]string, claims)
	for i := range claims {
		plan[types.UID(fmt.Sprintf("uid-%05d", i))] = fmt.Sprintf("pv-%05d", i)
	}
	for i := range binds {
		l.deny(types.UID(fmt.Sprintf("uid-%05d", i)), fmt.Sprintf("pv-other-%d", i), t0)
		if i%2 == 0 {
			l.beginBind(fmt.Sprintf("pv-%05d", i), types.UID(fmt.Sprintf("uid-%05d", i)), t0)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		snap := l.snapshot(t0)
		b.StopTimer()
		for i := 1; i < binds; i += 2 {
			l.beginBind(fmt.Sprintf("pv-%05d", i), types.UID(fmt.Sprintf("uid-other-%d", i)), t0)
		}
		p := maps.Clone(plan)
		b.StartTimer()
		if unplanned := l.install(p, snap, t0); unplanned != binds/2 {
			b.Fatalf("%d claims unplanned, want %d", unplanned, binds/2)
		}
		b.StopTimer()
		for i := 1; i < binds; i += 2 {
			l.unreserve(fmt.Sprintf("pv-%05d", i), types.UID(fmt.Sprintf("uid-other-%d", i)))
		}
		b.StartTimer()
	}
}

// TestLedgerClaimWentFreesItsReservations: a claim another writer bound (or that was deleted)
// gives back its reservations of the other volumes no bind is writing, and only those; the other
// claims' reservations stay. Random sequences of the ledger's reservation changes are checked
// against a model that keeps only the volume -> claim map.
func TestLedgerClaimWentFreesItsReservations(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for round := range 200 {
		l := newLedger()
		model := map[string]types.UID{}
		writing := map[string]int{}
		now := time.Unix(1_700_000_000, 0)
		for step := range 60 {
			claim := types.UID(fmt.Sprintf("c%d", rng.IntN(4)))
			volume := fmt.Sprintf("pv-%d", rng.IntN(6))
			switch rng.IntN(6) {
			case 0, 1:
				if _, ok := l.beginBind(volume, claim, now); ok {
					model[volume] = claim
					writing[volume]++
				}
			case 2:
				if writing[volume] > 0 {
					l.endBind(volume)
					writing[volume]--
				}
			case 3:
				l.settle(volume, claim)
				if model[volume] == claim {
					delete(model, volume)
				}
			case 4:
				l.deny(claim, volume, now)
				if model[volume] == claim {
					delete(model, volume)
				}
			case 5:
				keep := ""
				if rng.IntN(2) == 0 {
					keep = volume
				}
				wantFreed := false
				for v, owner := range model {
					if owner == claim && v != keep && writing[v] == 0 {
						delete(model, v)
						wantFreed = true
					}
				}
				// This ledger has no plan, so only reservations can be freed.
				if freed := l.claimWent(claim, keep); freed != wantFreed {
					t.Fatalf("round %d step %d: claimWent(%s, %q) freed %v, want %v", round, step, claim, keep, freed, wantFreed)
				}
			}
			if got := l.snapshot(now).Reserved; !maps.Equal(got, model) {
				t.Fatalf("round %d step %d: reserved %v, want %v", round, step, got, model)
			}
		}
	}
}
