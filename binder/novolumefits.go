package binder

import (
	"context"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvguard/pvguard/internal/cachelist"
	"github.com/pvguard/pvguard/storage"
)

// ReasonNoVolumeFits is pvguard's: a claim Pending for longer than Options.NoVolumeFitsAfter
// that no volume fits and that nothing else will give one (Options.Explain decides). The message
// names the closest volume and the checks it fails.
const ReasonNoVolumeFits = "NoVolumeFits"

// Explainer prepares, for the input a plan read and the plan made of it, a function that says
// why no volume fits a claim: ok is false when the claim should get no NoVolumeFits event. The
// binder passes an in.State with every claim (Plan considers the pending ones itself) and the
// nodes of the claims it asks about. Package explain provides it (explain.NoVolumeFits),
// from the functions the binder decides with; binder cannot import explain, which imports it.
type Explainer func(in PlanInput, plan PoolPlan) func(*corev1.PersistentVolumeClaim) (message string, ok bool)

// minExplainBudget is the least a NoVolumeFits pass may spend explaining claims after a plan,
// however quick the plan was (the budget is otherwise the plan's own duration).
const minExplainBudget = 50 * time.Millisecond

// noVolumeFits remembers when each pending claim was last explained for the NoVolumeFits
// event. Only the plan worker uses it; the lock keeps tests that plan from several goroutines
// safe.
type noVolumeFits struct {
	mu        sync.Mutex
	explained map[types.UID]time.Time
	// next is when the next pass may run: a tenth of the delay after a pass that explained every
	// claim due, at once after one that ran out of time. Plans come back to back while the pool
	// churns, and each pass reads every claim again.
	next time.Time
}

// passDue reports whether a pass may run now.
func (n *noVolumeFits) passDue(now time.Time) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return !now.Before(n.next)
}

// passDone records when the next pass may run.
func (n *noVolumeFits) passDone(next time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.next = next
}

// due returns the claims a NoVolumeFits pass should explain now: Pending (no binding completed,
// not being deleted, not Lost) for at least after since their creationTimestamp, and not
// explained in the last after; those never explained first, then the longest ago. It forgets
// the claims that are no longer pending (bound, deleted, Lost): they are not in claims.
func (n *noVolumeFits) due(claims []*corev1.PersistentVolumeClaim, now time.Time, after time.Duration) []*corev1.PersistentVolumeClaim {
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
func (n *noVolumeFits) explainedAt(claim types.UID, t time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.explained == nil {
		n.explained = map[types.UID]time.Time{}
	}
	n.explained[claim] = t
}

// postNoVolumeFits explains, after a plan (at most one in a tenth of the delay, unless the last
// pass ran out of time), the claims due (noVolumeFits.due) over that plan and its input, and records NoVolumeFits on those Options.Explain says no volume fits. Each claim is
// explained, and its event posted or refreshed, at most once per NoVolumeFitsAfter: the
// recorder's correlator turns a repeat of the same message into a higher count on the same
// Event, and a new message (the reason changed) into a new Event. The pass spends at most budget
// (the plan's duration, at least minExplainBudget) and returns what it spent, which the plan
// worker adds to its pause before the next plan: the claims it did not reach come first next
// time. It reads the claims again (the plan's input holds only the ones the plan considers).
func (b *Binder) postNoVolumeFits(ctx context.Context, in PlanInput, plan PoolPlan, budget time.Duration) time.Duration {
	after := b.o.NoVolumeFitsAfter
	if after <= 0 || b.o.Explain == nil || !b.noFits.passDue(time.Now()) {
		return 0
	}
	start := time.Now()
	b.noFits.passDone(start.Add(after / 10))
	all, err := cachelist.List(ctx, b.o.Cache, &corev1.PersistentVolumeClaim{}, &corev1.PersistentVolumeClaimList{})
	if err != nil {
		b.o.Log.Error(err, "listing claims for NoVolumeFits")
		return time.Since(start)
	}
	due := b.noFits.due(all, start, after)
	if len(due) == 0 {
		return time.Since(start)
	}
	nodes, err := b.scheduledNodes(ctx, due)
	if err != nil {
		b.o.Log.Error(err, "reading nodes for NoVolumeFits")
		return time.Since(start)
	}
	// The nodes just read stand for their names, a node gone since the plan included.
	named := map[string]bool{}
	for _, c := range due {
		if name, ok := c.Annotations[storage.AnnSelectedNode]; ok {
			named[name] = true
		}
	}
	for _, n := range in.State.Nodes() {
		if !named[n.Name] {
			nodes = append(nodes, n)
		}
	}
	in.State = in.State.WithClaims(all).WithNodes(nodes)
	explain := b.o.Explain(in, plan)
	budget = max(budget, minExplainBudget)
	for i, c := range due {
		if i > 0 && time.Since(start) > budget {
			b.noFits.passDone(time.Time{}) // the rest go first, at the next plan
			break
		}
		msg, ok := explain(c)
		b.noFits.explainedAt(c.UID, time.Now())
		if ok {
			b.o.NoVolumeFitsRecorder.Event(c, corev1.EventTypeWarning, ReasonNoVolumeFits, msg)
		}
	}
	return time.Since(start)
}
