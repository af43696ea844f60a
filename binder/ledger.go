package binder

import (
	"maps"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ledger is the binder's in-flight state: what its workers and its planner must know of each
// other's work between two reads of the cache. Every method takes the lock itself, and none calls
// out while holding it, so no caller locks anything around it.
type ledger struct {
	mu sync.Mutex
	// plan maps a claim uid to the volume the last plan chose for it ("" when none fits);
	// claims absent from it have not been planned yet.
	plan map[types.UID]string
	// reserved maps a volume to the claim a bind in flight gives it, so a new plan does not
	// hand the same volume to another claim before the cache shows the first bind.
	reserved map[string]types.UID
	// reservedBy is reserved by claim: every bound claim's sync asks for its claim's reservations
	// (claimWent), and a scan of reserved per sync grew with the binds in flight (thousands in a
	// batch) times the claims. reserve and release keep the two together.
	reservedBy map[types.UID][]string
	// forbidden holds pairs policy denied, and when, so the planner looks elsewhere.
	forbidden map[types.UID]map[string]time.Time
	// superseded holds, per object, the resourceVersions the binder's own writes replaced: a
	// cache still showing one of them lags behind those writes, and acting on it would repeat a
	// write bound to fail with a conflict (a request spent from the client's rate limit).
	superseded map[key][]string
	// marking holds the Pending volumes whose Available write is in flight (see markAvailable).
	marking map[string]bool
	// binding counts, per volume, the binds writing it right now. Their status is the bind's to
	// write: once the bind's first write shows, the volume's own sync sees a volume bound to a
	// claim that names it and would write Bound too, racing the bind's second write on the same
	// object (one of them losing with a conflict).
	binding map[string]int
	// shadow maps a claim uid to the volume pvguard would have bound (shadow mode).
	shadow map[types.UID]string
	// bindStart records when a bind decision was made, for the latency histogram.
	bindStart map[types.UID]time.Time
	// planKeys names the claims the plan gives a volume, so that a claim deleted (known then only
	// by its key) gives its volume back to the plan.
	planKeys map[key]types.UID
}

func newLedger() *ledger {
	return &ledger{
		plan:       map[types.UID]string{},
		reserved:   map[string]types.UID{},
		reservedBy: map[types.UID][]string{},
		forbidden:  map[types.UID]map[string]time.Time{},
		superseded: map[key][]string{},
		marking:    map[string]bool{},
		binding:    map[string]int{},
		shadow:     map[types.UID]string{},
		bindStart:  map[types.UID]time.Time{},
		planKeys:   map[key]types.UID{},
	}
}

// InFlight is what a plan must respect of the binder's own work, as it stood at one moment:
// volumes a bind in flight is giving to a claim, and pairs policy denied.
type InFlight struct {
	// Reserved maps a volume to the claim a bind in flight gives it: no other claim may take it.
	Reserved map[string]types.UID
	// Denied holds, per claim uid, the volumes policy denied it and when: a pair is kept out of
	// plans for a minute after its denial (forbidTTL), then tried again.
	Denied map[types.UID]map[string]time.Time
	// At is the moment of the snapshot: denials are aged against it.
	At time.Time
}

// usable reports whether a plan may give the volume to the claim, as far as the binder's own work
// goes: no bind of it to another claim is in flight, and policy has not recently denied the pair.
// A volume whose Available write is in flight stays usable: only its bind waits for that write
// (bind). Left out, it would be invisible to the claim it fits best, which would then take a
// larger volume for good, and a later claim that needed that one would be stranded.
func (f InFlight) usable(claim types.UID, volume string) bool {
	owner, inFlight := f.Reserved[volume]
	return (!inFlight || owner == claim) && !f.denies(claim, volume)
}

// DeniedAt returns when policy denied the pair, if that denial still keeps it out of plans
// (denies).
func (f InFlight) DeniedAt(claim types.UID, volume string) (time.Time, bool) {
	if !f.denies(claim, volume) {
		return time.Time{}, false
	}
	return f.Denied[claim][volume], true
}

// denies reports whether policy denied the pair less than forbidTTL before At.
func (f InFlight) denies(claim types.UID, volume string) bool {
	at, ok := f.Denied[claim][volume]
	return ok && f.At.Sub(at) < forbidTTL
}

// --- the plan ---

// planned returns the volume the last plan chose for the claim ("" for none), and whether the
// plan considered the claim at all.
func (l *ledger) planned(claim types.UID) (volume string, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	volume, ok = l.plan[claim]
	return volume, ok
}

// snapshot copies what a plan reads of the in-flight state, so that the plan can run without the
// lock.
func (l *ledger) snapshot(now time.Time) InFlight {
	l.mu.Lock()
	defer l.mu.Unlock()
	denied := make(map[types.UID]map[string]time.Time, len(l.forbidden))
	for claim, volumes := range l.forbidden {
		denied[claim] = maps.Clone(volumes)
	}
	return InFlight{Reserved: maps.Clone(l.reserved), Denied: denied, At: now}
}

// install makes plan (claim uid -> volume, as Plan returns it; install keeps the map) the plan
// claims are bound by, for a plan computed from snap, and forgets the denials of claims the plan
// no longer considers (bound, deleted, or become WaitForFirstConsumer). It returns how many
// claims it left unplanned.
//
// The plan ran without the lock, so binds may have begun and policy may have denied pairs since
// snap was taken. install drops, as of now, what they contradict:
//   - a claim planned on a volume that a bind in flight now gives to another claim: its bind
//     would be turned away (bind) and the claim would wait for the next plan in any case;
//   - a claim whose own bind began since snap, planned on another volume or on none: planned on
//     none it would be annotated for provisioning and get an event although its bind is in
//     flight, and planned on another, a later sync could bind that one too if the first bind
//     failed halfway (and the binder would then unbind one of them);
//   - a claim planned on a pair policy has denied since snap: its bind would ask policy again and
//     record a second denial, where before the lock was held through a plan and the denial's
//     removal of the pair's plan entry came after the install.
//
// A claim left unplanned asks for a plan when it is synced (DecideClaim's NeedPlan), and that
// plan sees the new binds and denials. The alternatives cost more: installing the plan as
// computed gives the wrong answers above, and throwing the whole plan away when anything changed
// since snap would, under a steady stream of binds (a plan of 10,000 claims over 100,000 volumes
// takes a few hundred milliseconds, and a bind begins every few milliseconds at 400 QPS), throw
// away nearly every plan. Binds that ended since snap (reservation settled or dropped) only
// leave the plan more careful than it needs to be, which is what a plan under the lock would
// have done with a bind that ended a moment after it.
func (l *ledger) install(plan map[types.UID]string, snap InFlight, now time.Time) (unplanned int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for claim, volumes := range l.forbidden {
		if _, pending := plan[claim]; pending {
			continue
		}
		// A claim the plan does not consider (bound, deleted, WaitForFirstConsumer) keeps its
		// denials until they age out: a WaitForFirstConsumer claim's sync still reads them, or it
		// would bind a denied volume pointed at it again after every plan.
		for v, at := range volumes {
			if now.Sub(at) >= forbidTTL {
				delete(volumes, v)
			}
		}
		if len(volumes) == 0 {
			delete(l.forbidden, claim)
		}
	}
	for volume, owner := range l.reserved {
		if was, ok := snap.Reserved[volume]; ok && was == owner {
			continue // the plan knew of this bind
		}
		if v, ok := plan[owner]; ok && v != volume {
			delete(plan, owner)
			unplanned++
		}
	}
	current := InFlight{Reserved: l.reserved, Denied: l.forbidden, At: now}
	for claim, volume := range plan {
		if volume != "" && !current.usable(claim, volume) {
			delete(plan, claim)
			unplanned++
		}
	}
	l.plan = plan
	return unplanned
}

// nameClaims records the keys of the claims the installed plan gives a volume (claimGone).
func (l *ledger) nameClaims(claims []*corev1.PersistentVolumeClaim) {
	l.mu.Lock()
	defer l.mu.Unlock()
	clear(l.planKeys)
	for _, c := range claims {
		if l.plan[c.UID] != "" {
			l.planKeys[key{kind: 'c', namespace: c.Namespace, name: c.Name}] = c.UID
		}
	}
}

// claimWent ends what the binder holds for a claim that another writer gave volume (or, with
// volume "", deleted): the plan's choice of another volume for it, and its reservations of other
// volumes that no bind is writing right now (a bind that was cut short keeps its reservation until
// the cache shows the pair, which it never will now). It reports whether a volume was freed, for
// which the waiting claims need a new plan.
func (l *ledger) claimWent(claim types.UID, volume string) (freed bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if v := l.plan[claim]; v != "" && v != volume {
		delete(l.plan, claim)
		freed = true
	}
	for _, v := range slices.Clone(l.reservedBy[claim]) {
		if v != volume && l.binding[v] == 0 {
			l.release(v)
			freed = true
		}
	}
	return freed
}

// reserve records that the volume is reserved for the claim (the caller holds the lock and has
// checked that no other claim holds it).
func (l *ledger) reserve(volume string, claim types.UID) {
	if _, held := l.reserved[volume]; held {
		return
	}
	l.reserved[volume] = claim
	l.reservedBy[claim] = append(l.reservedBy[claim], volume)
}

// release drops the volume's reservation, whoever holds it (the caller holds the lock).
func (l *ledger) release(volume string) {
	claim, ok := l.reserved[volume]
	if !ok {
		return
	}
	delete(l.reserved, volume)
	if rest := slices.DeleteFunc(l.reservedBy[claim], func(v string) bool { return v == volume }); len(rest) > 0 {
		l.reservedBy[claim] = rest
	} else {
		delete(l.reservedBy, claim)
	}
}

// claimGone is claimWent for a claim deleted, known by its key.
func (l *ledger) claimGone(k key) (freed bool) {
	l.mu.Lock()
	uid, ok := l.planKeys[k]
	delete(l.planKeys, k)
	l.mu.Unlock()
	return ok && l.claimWent(uid, "")
}

// --- binds ---

// beginBind reserves the volume for the claim's bind and counts the bind as writing it, unless
// another claim's bind of it or its Available write is in flight (ok false: the caller leaves
// the volume alone). start is when the binder first decided on a bind of the claim.
func (l *ledger) beginBind(volume string, claim types.UID, now time.Time) (start time.Time, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if owner, reserved := l.reserved[volume]; (reserved && owner != claim) || l.marking[volume] {
		return time.Time{}, false
	}
	l.reserve(volume, claim)
	l.binding[volume]++
	start, ok = l.bindStart[claim]
	if !ok {
		start = now
		l.bindStart[claim] = start
	}
	return start, true
}

// endBind counts a bind begun by beginBind as no longer writing the volume. The reservation
// stays until the cache shows the binding (settle) or the bind gives up (unreserve, deny).
func (l *ledger) endBind(volume string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.binding[volume]--; l.binding[volume] <= 0 {
		delete(l.binding, volume)
	}
}

// bindCompleted forgets when the claim's bind was decided: all its writes are made.
func (l *ledger) bindCompleted(claim types.UID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.bindStart, claim)
}

// bindInFlight reports whether a bind is writing the volume right now.
func (l *ledger) bindInFlight(volume string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.binding[volume] > 0
}

// settle drops the volume's reservation once the cache shows it bound to the claim that holds it.
func (l *ledger) settle(volume string, claim types.UID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if owner, ok := l.reserved[volume]; ok && owner == claim {
		l.release(volume)
	}
}

// unreserve drops the volume's reservation for the claim after its bind failed, and reports
// whether it held one.
func (l *ledger) unreserve(volume string, claim types.UID) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if owner, ok := l.reserved[volume]; ok && owner == claim {
		l.release(volume)
		return true
	}
	return false
}

// deny records that policy denied the pair at the given time: plans leave it out for forbidTTL.
// The claim's plan entry goes (it named this volume), and so does the claim's reservation of the
// volume.
func (l *ledger) deny(claim types.UID, volume string, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.forbidden[claim] == nil {
		l.forbidden[claim] = map[string]time.Time{}
	}
	l.forbidden[claim][volume] = at
	delete(l.plan, claim)
	if owner, ok := l.reserved[volume]; ok && owner == claim {
		l.release(volume)
	}
}

// denied returns the volumes policy denied the claim less than forbidTTL before now (nil for
// none).
func (l *ledger) denied(claim types.UID, now time.Time) map[string]bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out map[string]bool
	for v, at := range l.forbidden[claim] {
		if now.Sub(at) < forbidTTL {
			if out == nil {
				out = map[string]bool{}
			}
			out[v] = true
		}
	}
	return out
}

// --- Available writes ---

// startMarking records that the volume's Available write is about to be made, unless a bind of
// the volume is in flight (false: the bind writes Bound itself).
func (l *ledger) startMarking(volume string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, reserved := l.reserved[volume]; reserved {
		return false
	}
	l.marking[volume] = true
	return true
}

// stopMarking forgets the volume's Available write (it showed, failed, or the volume is gone),
// and reports whether one was in flight.
func (l *ledger) stopMarking(volume string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	was := l.marking[volume]
	delete(l.marking, volume)
	return was
}

// --- the binder's own writes ---

// supersede records that a write of the binder replaced the object's resourceVersion rv.
func (l *ledger) supersede(k key, rv string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.superseded[k] = append(l.superseded[k], rv)
}

// lagging reports whether rv, the object's version in the cache, is one the binder's own writes
// replaced. Once the cache shows a version it did not replace, it has caught up and the record is
// dropped.
func (l *ledger) lagging(k key, rv string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	old, ok := l.superseded[k]
	if !ok {
		return false
	}
	if slices.Contains(old, rv) {
		return true
	}
	delete(l.superseded, k)
	return false
}

// forget drops what the ledger remembers of an object that is gone.
func (l *ledger) forget(k key) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.superseded, k)
	if k.kind == 'v' {
		delete(l.marking, k.name)
	}
}

// --- shadow mode ---

// shadowChose records the volume pvguard would bind to the claim.
func (l *ledger) shadowChose(claim types.UID, volume string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.shadow[claim] = volume
}

// shadowTake returns and forgets the volume pvguard would have bound to the claim, if it chose
// one.
func (l *ledger) shadowTake(claim types.UID) (volume string, chose bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	volume, chose = l.shadow[claim]
	delete(l.shadow, claim)
	return volume, chose
}

// shadowChoices returns how many claims have a choice recorded (the shadow-decided gauge).
func (l *ledger) shadowChoices() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return float64(len(l.shadow))
}
