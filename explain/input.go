package explain

import (
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvguard/pvguard/binder"
	"github.com/pvguard/pvguard/clusterstate"
	"github.com/pvguard/pvguard/internal/cores"
	"github.com/pvguard/pvguard/policy"
)

// This file is what an explanation reads: the Input, the claim it explains, the input indexed
// (index) and the binder's plan of it (pool).

// Input is what an explanation reads: the cluster's claims, volumes, classes and nodes (all of
// them: other claims compete for the same volumes), and optionally the binder's in-flight state.
type Input struct {
	// State holds the claims, volumes, classes and nodes; nil holds none. Its nodes need only be
	// those that claims' selected-node annotations name; a node missing is one that does not
	// exist (binder.PlanInput.State).
	State *clusterstate.State
	// NodesListed says State holds every node of the cluster (ReadInput lists them), so that a
	// node it does not hold is gone: a claim whose volume can be used only on such nodes is told
	// so (WaitingForNode). A dump, or the binder's input (the selected nodes only), does not.
	NodesListed bool
	// PendingFree and InFlight are the binder's (binder.PlanInput); zero for a dump or a live
	// read from outside the binder.
	PendingFree bool
	InFlight    binder.InFlight
	// Pods and Events are optional (a live read has them, a dump of volumes and claims does
	// not): the pods of the claim's namespace, and the events about them. With them, a claim
	// waiting for its first consumer whose pod exists says what the scheduler said of the pod.
	Pods   []*corev1.Pod
	Events []*corev1.Event
	// Policy, when set, judges each pair that passes every pair check before POLICY as the
	// binder judges a pair before binding it (binder.BindDenials): as Identity, the binder's
	// user, against View, the objects as they are (nil: State). Without it the POLICY column
	// shows only the denials the binder met lately (InFlight). explain.Volume reports the audit
	// findings of this engine (without it, of the default config's).
	Policy   *policy.Engine
	Identity policy.UserInfo
	View     policy.View
	// Leases are the coordination.k8s.io Leases named for the claim's provisioner
	// (ProvisionerLeaseName), from any namespace, and LeasesRead says they were read, so that
	// none means there are none (a live read; a dump has no leases). With them, a claim waiting
	// for its provisioner says whether the provisioner appears to run.
	Leases     []*coordinationv1.Lease
	LeasesRead bool
	// Now is when the explanation is made, to age leases (zero: the current time).
	Now time.Time
}

// noObjects is the State of an Input without one.
var noObjects = clusterstate.New(nil, nil, nil, nil)

// state is the input's State, never nil.
func (in Input) state() *clusterstate.State {
	if in.State == nil {
		return noObjects
	}
	return in.State
}

// ErrUnknownClaim is returned for a claim that is not in the input.
var ErrUnknownClaim = errors.New("no such PersistentVolumeClaim")

// findClaim is the claim namespace/name of s.
func findClaim(s *clusterstate.State, namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	c, _ := s.PersistentVolumeClaim(namespace, name)
	if c == nil {
		return nil, fmt.Errorf("%w %s/%s", ErrUnknownClaim, namespace, name)
	}
	return c, nil
}

// index is an Input prepared for explaining its claims, once, so that explaining many claims
// over the same input (the NoVolumeFits pass over a binder's plan) prepares once: its state
// (in.State, never nil), whose own indexes find volumes, claims and nodes, and its classes by
// name.
type index struct {
	in      Input
	classes map[string]*storagev1.StorageClass
	// facts are the volumes' facts the candidate table reads (volumeFacts), in the state's order,
	// read on first use: shared by every copy of the index (the server's explanations copy it).
	facts *lazyFacts
	// replans are the plans without a claim's denied pairs made so far (withoutDenied), shared
	// by every copy of the index.
	replans *replans
	// readers are the volumes each reader's rights read (readable), shared by every copy.
	readers *readers
	// pace hands the question's seat to whoever waits, as its table goes over every volume
	// (internal/cores); nil outside the server.
	pace *cores.Pacer
}

type lazyFacts struct {
	once  sync.Once
	facts []volumeFacts
	seed  maphash.Seed // of the facts' refKey
	// refs are the positions of the volumes with a claimRef, by their refKey (refsOf).
	refs []int32
	// unique says no two volumes have one name (namesUnique), read on first use.
	uniqueOnce sync.Once
	unique     bool
}

// namesUnique reports whether each of x's volumes is the one its name finds in the state: no two
// share a name (as in a cluster; a dump may hold a name twice).
func (x *index) namesUnique() bool {
	x.facts.uniqueOnce.Do(func() {
		x.facts.unique = true
		for _, v := range x.in.State.Volumes() {
			if pv, _ := x.in.State.PersistentVolume(v.Name); pv != v {
				x.facts.unique = false
				return
			}
		}
	})
	return x.facts.unique
}

// volumeFacts are the facts of x's volumes, in the state's order.
func (x *index) volumeFacts() []volumeFacts {
	x.facts.once.Do(func() {
		x.facts.seed = maphash.MakeSeed()
		x.facts.facts = factsOf(x.in.State.Volumes(), x.facts.seed)
		x.facts.refs = refsOf(x.facts.facts)
	})
	return x.facts.facts
}

// readers are the volumes of an index that readers read, by the key of their rights
// (audience.rights), for at most maxReaders rights at once.
type readers struct {
	mu    sync.Mutex
	m     map[string]*readerVolumes
	order []string // the keys, oldest first
}

// readerVolumes is a bit per volume of the state, set for a volume the reader reads.
type readerVolumes struct {
	once sync.Once
	bits []uint64
}

// maxReaders bounds the rights an index keeps the volumes of: a bit per volume each (13 KB at
// 100,000 volumes).
const maxReaders = 16

// readable is a bit per volume of x's state (in its order), set for each volume reads says the
// reader of those rights reads: judged once per index and rights, by the first question that
// asks, and read by every question of that reader after it.
func (x *index) readable(rights string, reads func(k int) bool) []uint64 {
	r := x.readers
	r.mu.Lock()
	rv := r.m[rights]
	if rv == nil {
		if len(r.order) >= maxReaders {
			delete(r.m, r.order[0])
			r.order = r.order[1:]
		}
		rv = &readerVolumes{}
		r.m[rights], r.order = rv, append(r.order, rights)
	}
	r.mu.Unlock()
	rv.once.Do(func() {
		n := len(x.in.State.Volumes())
		rv.bits = make([]uint64, (n+63)/64)
		for k := range n {
			if reads(k) {
				rv.bits[k/64] |= 1 << (k % 64)
			}
		}
	})
	return rv.bits
}

// indexInput indexes in.
func indexInput(in Input) *index {
	in.State = in.state()
	x := &index{in: in, classes: map[string]*storagev1.StorageClass{}, facts: &lazyFacts{}, replans: &replans{m: map[string]*replan{}},
		readers: &readers{m: map[string]*readerVolumes{}}}
	for _, sc := range in.State.Classes() {
		x.classes[sc.Name] = sc
	}
	return x
}

// claimName names (namespace/name) the claim with that uid, as a reference rendered per reader;
// ok is false for none.
func (x *index) claimName(uid types.UID) (policy.Arg, bool) {
	c, _ := x.in.State.ClaimWithUID(uid)
	if c == nil {
		return nil, false
	}
	return claimKey(c.Namespace, c.Name), true
}

// pool is the binder's plan of the input and its index: owner maps each volume the plan gives
// out to its claim, and planned holds the claims the plan considered.
type pool struct {
	plan    binder.PoolPlan
	owner   map[string]types.UID
	planned map[types.UID]bool
}

// planPool plans the input's pool as the binder does, with inFlight as the binder's in-flight
// state.
func planPool(x *index, inFlight binder.InFlight) pool {
	return poolOf(binder.Plan(binder.PlanInput{State: x.in.State, PendingFree: x.in.PendingFree, InFlight: inFlight}))
}

// replans are plans of an input without the pairs policy denies one claim (withoutDenied), by
// claim and denied volumes.
type replans struct {
	mu sync.Mutex
	m  map[string]*replan
}

type replan struct {
	once sync.Once
	p    pool
}

// maxReplans bounds the plans replans keeps: each holds an entry per pending claim, and a caller
// may ask about many claims whose pairs policy denies.
const maxReplans = 4

// withoutDenied is p, the plan of x's pool, made without the pairs of claim to the denied
// volumes, as the binder plans after policy refused them (withDenials). A plan that left them
// out already (the binder met those denials, InFlight) is that plan; otherwise the claim's class
// is planned again (replan), once per input, claim and denied volumes, however many questions
// ask.
func (x *index) withoutDenied(p pool, claim types.UID, denied []string) pool {
	f := x.in.InFlight
	known := !f.At.IsZero()
	for _, v := range denied {
		if _, ok := f.DeniedAt(claim, v); !ok {
			known = false
		}
	}
	if known {
		return p
	}
	key := string(claim) + "\x00" + strings.Join(denied, "\x00")
	r := x.replans
	r.mu.Lock()
	e := r.m[key]
	if e == nil {
		if len(r.m) >= maxReplans {
			clear(r.m)
		}
		e = &replan{}
		r.m[key] = e
	}
	r.mu.Unlock()
	e.once.Do(func() { e.p = x.replan(p, claim, denied) })
	return e.p
}

// replan is p, the plan of x's pool, planned again without the pairs of claim to the denied
// volumes: only the claim's class is (binder.ReplanClaim), which the denials alone change. When
// the in-flight state has no moment, withDenials dates it now, which may age out denials of other
// claims: then the whole pool is.
func (x *index) replan(p pool, claim types.UID, denied []string) pool {
	f := x.in.InFlight
	in := binder.PlanInput{State: x.in.State, PendingFree: x.in.PendingFree, InFlight: withDenials(f, claim, denied)}
	if f.At.IsZero() && len(f.Denied) > 0 {
		return poolOf(binder.Plan(in))
	}
	return poolOf(binder.ReplanClaim(in, p.plan, claim))
}

// poolOf indexes a plan: it maps each volume the plan gives out to its claim, and says which
// claims it considered.
func poolOf(plan binder.PoolPlan) pool {
	p := pool{plan: plan, owner: make(map[string]types.UID, len(plan.Volumes)), planned: make(map[types.UID]bool, len(plan.Claims))}
	for uid, v := range plan.Volumes {
		if v != "" {
			p.owner[v] = uid
		}
	}
	for _, pc := range plan.Claims {
		p.planned[pc.UID] = true
	}
	return p
}

// withUIDs gives claims without a uid (manifests written by hand) one of their own, derived
// from the name, so that the plan, which keys claims by uid, tells them apart: it is s when every
// claim has a uid, else the State of s with such claims copied (s is not changed).
func withUIDs(s *clusterstate.State) *clusterstate.State {
	claims, copied := s.Claims(), false
	for i, c := range claims {
		if c.UID != "" {
			continue
		}
		if !copied {
			claims, copied = slices.Clone(claims), true
		}
		cp := c.DeepCopy()
		cp.UID = types.UID("explain:" + c.Namespace + "/" + c.Name)
		claims[i] = cp
	}
	if !copied {
		return s
	}
	return s.WithClaims(claims)
}
