package explain

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	"github.com/pvguard/pvguard/binder"
	"github.com/pvguard/pvguard/storage"
)

// ReasonNoVolumeFits is pvguard's: a claim Pending for longer than
// NoVolumeFitsOptions.After that no volume fits and that nothing else will give one
// (NoVolumeFits decides). The message names the closest volume and the checks it fails.
const ReasonNoVolumeFits = "NoVolumeFits"

// minExplainBudget is the least a NoVolumeFits pass may spend explaining claims after a plan,
// however quick the plan was (the budget is otherwise the plan's own duration).
const minExplainBudget = 50 * time.Millisecond

// NoVolumeFitsPlans is the binder whose plans the NoVolumeFits pass reads (binder.Binder, with
// Options.KeepPlans: the plan's state then holds every claim and every cached node).
type NoVolumeFitsPlans interface {
	// LatestPlan is the binder's newest plan (nil before the first) and a channel closed once a
	// newer one is made.
	LatestPlan() (*binder.MadePlan, <-chan struct{})
	// AddPlanWork adds the time spent on the latest plan to the binder's pause before its next.
	AddPlanWork(time.Duration)
}

// NoVolumeFitsOptions configure a NoVolumeFitsReporter.
type NoVolumeFitsOptions struct {
	// Binder is the binder whose plans are explained; required.
	Binder NoVolumeFitsPlans
	// After is how long a claim stays Pending, from its creationTimestamp, before it gets
	// NoVolumeFits if no volume fits it; it is also the least time between two explanations of
	// one claim (each refreshes the event). 0 turns the reporter off.
	After time.Duration
	// Recorder records the events (pvguard serve gives it a broadcaster of its own, under the
	// binder's identity); required.
	Recorder record.EventRecorder
}

// NoVolumeFitsReporter posts NoVolumeFits on the claims stuck without a volume: after each plan
// the binder makes, it explains the claims due over that plan and its input (NoVolumeFits).
// It runs only on the elected replica, as the binder does: the binder plans only there.
type NoVolumeFitsReporter struct {
	o NoVolumeFitsOptions
	// explain is NoVolumeFits; tests substitute their own.
	explain func(binder.PlanInput, binder.PoolPlan) func(*corev1.PersistentVolumeClaim) (string, bool)
	claims  explainedClaims
}

// NewNoVolumeFitsReporter builds the reporter; add it to the manager beside the binder.
func NewNoVolumeFitsReporter(o NoVolumeFitsOptions) (*NoVolumeFitsReporter, error) {
	if o.Binder == nil || o.Recorder == nil {
		return nil, errors.New("explain: the NoVolumeFits reporter needs Binder and Recorder")
	}
	return &NoVolumeFitsReporter{o: o, explain: NoVolumeFits}, nil
}

// NeedLeaderElection makes the manager run the reporter only on the elected replica, where the
// binder plans.
func (r *NoVolumeFitsReporter) NeedLeaderElection() bool { return true }

// Start runs a pass after each new plan of the binder's until ctx ends, and adds the time each
// pass spent to the binder's pause: planning and explaining together still take at most half a
// core.
func (r *NoVolumeFitsReporter) Start(ctx context.Context) error {
	var last *binder.MadePlan
	for {
		mp, next := r.o.Binder.LatestPlan()
		if mp != nil && mp != last {
			last = mp
			r.o.Binder.AddPlanWork(r.pass(mp))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-next:
		}
	}
}

// pass explains, after a plan (at most one in a tenth of the delay, unless the last pass ran
// out of time), the claims due (explainedClaims.due) over that plan and its input, and records
// NoVolumeFits on those NoVolumeFits says no volume fits. Each claim is explained, and its
// event posted or refreshed, at most once per After: the recorder's correlator turns a repeat of
// the same message into a higher count on the same Event, and a new message (the reason
// changed) into a new Event. The pass spends at most the plan's duration (at least
// minExplainBudget) and returns what it spent: the claims it did not reach come first next time.
// The plan's state holds every claim and every node (binder.Options.KeepPlans), which the
// explanations read; the plan itself considers only the pending claims.
func (r *NoVolumeFitsReporter) pass(mp *binder.MadePlan) time.Duration {
	after := r.o.After
	if after <= 0 || !r.claims.passDue(time.Now()) {
		return 0
	}
	start := time.Now()
	r.claims.passDone(start.Add(after / 10))
	due := r.claims.due(mp.Input.State.Claims(), start, after)
	if len(due) == 0 {
		return time.Since(start)
	}
	explain := r.explain(mp.Input, mp.Plan)
	budget := max(mp.Took, minExplainBudget)
	for i, c := range due {
		if i > 0 && time.Since(start) > budget {
			r.claims.passDone(time.Time{}) // the rest go first, at the next plan
			break
		}
		msg, ok := explain(c)
		r.claims.explainedAt(c.UID, time.Now())
		if ok {
			r.o.Recorder.Event(c, corev1.EventTypeWarning, ReasonNoVolumeFits, msg)
		}
	}
	return time.Since(start)
}

// explainedClaims remembers when each pending claim was last explained for the NoVolumeFits
// event. Only the reporter's loop uses it; the lock keeps tests that run passes from several
// goroutines safe.
type explainedClaims struct {
	mu        sync.Mutex
	explained map[types.UID]time.Time
	// next is when the next pass may run: a tenth of the delay after a pass that explained every
	// claim due, at once after one that ran out of time. Plans come back to back while the pool
	// churns, and each pass reads every claim again.
	next time.Time
}

// passDue reports whether a pass may run now.
func (n *explainedClaims) passDue(now time.Time) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return !now.Before(n.next)
}

// passDone records when the next pass may run.
func (n *explainedClaims) passDone(next time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.next = next
}

// due returns the claims a NoVolumeFits pass should explain now: Pending (no binding completed,
// not being deleted, not Lost) for at least after since their creationTimestamp, and not
// explained in the last after; those never explained first, then the longest ago. It forgets
// the claims that are no longer pending (bound, deleted, Lost): they are not in claims.
func (n *explainedClaims) due(claims []*corev1.PersistentVolumeClaim, now time.Time, after time.Duration) []*corev1.PersistentVolumeClaim {
	n.mu.Lock()
	defer n.mu.Unlock()
	kept := map[types.UID]time.Time{}
	var due []*corev1.PersistentVolumeClaim
	for _, c := range claims {
		_, bound := c.Annotations[storage.AnnBindCompleted]
		if bound || c.DeletionTimestamp != nil || (c.Status.Phase != "" && c.Status.Phase != corev1.ClaimPending) {
			continue
		}
		last, explained := n.explained[c.UID]
		if explained {
			kept[c.UID] = last
		}
		if now.Sub(c.CreationTimestamp.Time) >= after && (!explained || now.Sub(last) >= after) {
			due = append(due, c)
		}
	}
	n.explained = kept
	sort.SliceStable(due, func(i, j int) bool {
		a, b := kept[due[i].UID], kept[due[j].UID]
		if !a.Equal(b) {
			return a.Before(b)
		}
		if ca, cb := due[i].CreationTimestamp.Time, due[j].CreationTimestamp.Time; !ca.Equal(cb) {
			return ca.Before(cb)
		}
		return due[i].Namespace+"/"+due[i].Name < due[j].Namespace+"/"+due[j].Name
	})
	return due
}

// explainedAt records that the claim was explained at t.
func (n *explainedClaims) explainedAt(claim types.UID, t time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.explained == nil {
		n.explained = map[types.UID]time.Time{}
	}
	n.explained[claim] = t
}
