package policy

import (
	"cmp"
	"errors"
	"fmt"
	"iter"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/pvguard/pvguard/clusterstate"
)

// A State is the whole world an audit judges, and a View, so the rules read related objects from
// it as at admission.
var _ View = (*clusterstate.State)(nil)

// AuditOptions are what an audit needs besides the state it judges.
type AuditOptions struct {
	// Now dates the rules that age (PVG023).
	Now time.Time
	// Progress, when not nil, is told after each object how many of how many are done; its calls
	// are serialised and count up by one.
	Progress func(done, total int)
	// Live, when not nil, reads past any cache: the findings that report an object as gone are
	// confirmed on it (Confirm). It is read from several goroutines at once. Without it the
	// state is taken as the whole truth, as for manifests.
	Live View
	// Turn, when not nil, is called by each of the audit's goroutines before each block of
	// objects it judges, and what it returns once the block is judged: the server's periodic
	// audits hold one of the process's seats for a core (internal/cores) a block at a time.
	Turn func() (done func())
}

// ObjectAudit is what an audit found on one object.
type ObjectAudit struct {
	// Object is the *PersistentVolume, *PersistentVolumeClaim or *StorageClass judged.
	Object   any
	Findings []Finding
	// Err joins the *RuleError of each rule that could not judge the object; the findings are
	// those of the rules that could.
	Err error
}

// Audit judges every object of a state with AuditEach and merges the results: the findings of
// every rule that could judge, and an error joining the *RuleError of each rule that could not
// judge an object (a State's own reads never fail). progress is as in AuditOptions.
func (e *Engine) Audit(s *clusterstate.State, now time.Time, progress func(done, total int)) ([]Finding, error) {
	each, err := e.AuditEach(s, AuditOptions{Now: now, Progress: progress})
	if err != nil {
		return nil, err
	}
	// The errors in the state's order, whichever goroutine met them first. An object a rule
	// could not judge still has the other rules' findings, so they are reported beside it.
	errs := make([]error, len(each))
	for i := range each {
		errs[i] = each[i].Err
	}
	return mergeEach(each), errors.Join(errs...)
}

// AuditEach judges every object of a state with AuditObject, in the order of its Objects, reading
// related objects from the state (its indexes), and confirms on o.Live what must be (Confirm). It
// is the one full audit: `pvguard audit` on manifests and on a cluster, and the server's audit,
// all run it. The objects are judged on up to GOMAXPROCS goroutines (the state is only read, and
// each goroutine has its own review and memo), and the result does not depend on their
// scheduling: each object's result keeps its place. The error is not nil only when a live read
// failed, and then the audit has no result.
func (e *Engine) AuditEach(s *clusterstate.State, o AuditOptions) ([]ObjectAudit, error) {
	objs := s.Objects()
	each := make([]ObjectAudit, len(objs))
	var unconfirmed []error // per object, allocated only with a live view
	if o.Live != nil {
		unconfirmed = make([]error, len(objs))
	}
	var (
		next atomic.Int64 // the first object of the next block to take
		mu   sync.Mutex   // serialises progress
		done int
		wg   sync.WaitGroup
	)
	workers := min(runtime.GOMAXPROCS(0), (len(objs)+auditBlock-1)/auditBlock)
	for range workers {
		wg.Go(func() {
			// One review and one memo serve each object in turn, so judging an object allocates
			// only what its findings need.
			r, memo := &Review{}, &memoView{View: s}
			for {
				end := func() {}
				if o.Turn != nil {
					end = o.Turn()
				}
				start := int(next.Add(auditBlock)) - auditBlock
				if start >= len(objs) {
					end()
					return
				}
				for i := start; i < min(start+auditBlock, len(objs)); i++ {
					memo.reset()
					found, err := e.auditObject(objs[i], r, memo, o.Now)
					if o.Live != nil && len(found) > 0 {
						found, unconfirmed[i] = e.Confirm(found, o.Live, o.Now)
					}
					each[i] = ObjectAudit{Object: objs[i], Findings: found, Err: err}
					if o.Progress != nil {
						mu.Lock()
						done++
						o.Progress(done, len(objs))
						mu.Unlock()
					}
				}
				end()
			}
		})
	}
	wg.Wait()
	for _, err := range unconfirmed {
		if err != nil {
			return nil, err
		}
	}
	return each, nil
}

// auditBlock is how many consecutive objects an Audit goroutine takes at a time: enough that
// taking them costs nothing, few enough that the goroutines finish together.
const auditBlock = 256

// AuditObject judges one existing object (a *PersistentVolume, *PersistentVolumeClaim or
// *StorageClass) as it stands, with the rules of the engine's set that judge a state
// (Rule.Judges), each applied as if the object had just been created. Exemptions apply as at
// admission, matched by namespace only (an audit has no requester). now dates the rules that
// age. The findings are not yet deduplicated against the object's neighbours: Merge does that,
// and they are not confirmed live: Confirm does that. As with Admit, a rule that cannot judge
// the object does not stop the others: the error joins a *RuleError for each that could not,
// beside the findings of those that could.
func (e *Engine) AuditObject(obj any, v View, now time.Time) ([]Finding, error) {
	return e.auditObject(obj, &Review{}, newMemoView(v), now)
}

// auditObject is AuditObject with the review to fill in and the view to read through supplied
// by the caller.
func (e *Engine) auditObject(obj any, r *Review, v View, now time.Time) ([]Finding, error) {
	if err := r.auditOf(obj, now); err != nil {
		return nil, err
	}
	out, failed := e.evaluate(e.inAudit, r, v)
	return out, errors.Join(failed...)
}

// auditOf makes r the review an audit makes of an existing object at now.
func (r *Review) auditOf(obj any, now time.Time) error {
	*r = Review{Operation: OperationCreate, audit: true, now: now}
	switch o := obj.(type) {
	case *corev1.PersistentVolume:
		r.Kind, r.PV = KindPersistentVolume, o
	case *corev1.PersistentVolumeClaim:
		r.Kind, r.PVC = KindPersistentVolumeClaim, o
	case *storagev1.StorageClass:
		r.Kind, r.SC = KindStorageClass, o
	default:
		return fmt.Errorf("auditing %T: not a PersistentVolume, PersistentVolumeClaim or StorageClass", obj)
	}
	return nil
}

// Confirm keeps, of the audit findings on one object, the ones that stand on live reads. A
// finding on a field its rule lists in ConfirmLive (it reports an object as gone) is kept only
// when the rule, judging the object again as live reads it, finds it again, on the same object
// and field; the others are kept without a read. live must read past any cache. An error means
// a live read failed, and nothing is confirmed.
func (e *Engine) Confirm(found []Finding, live View, now time.Time) ([]Finding, error) {
	var out []Finding // allocated at the first finding dropped
	for i, f := range found {
		ok, err := e.confirm(f, live, now)
		if err != nil {
			return nil, err
		}
		switch {
		case ok && out != nil:
			out = append(out, f)
		case !ok && out == nil:
			out = append(make([]Finding, 0, len(found)-1), found[:i]...)
		}
	}
	if out == nil {
		return found, nil
	}
	return out, nil
}

// confirm reports whether one finding stands on live reads.
func (e *Engine) confirm(f Finding, live View, now time.Time) (bool, error) {
	rl, ok := e.rule(f.Rule)
	if !ok || !rl.confirms(f.Field) {
		return true, nil
	}
	obj, err := readObject(f.Object, live)
	if err != nil {
		return false, fmt.Errorf("confirming %s %s on %s with a live read: %w", rl.ID, rl.Name, f.Object, err)
	}
	if obj == nil {
		return false, nil // the object itself is gone
	}
	r := &Review{}
	if err := r.auditOf(obj, now); err != nil {
		return false, err
	}
	again, failed := e.evaluate([]Rule{*rl}, r, newMemoView(live))
	if len(failed) > 0 {
		err := failed[0]
		if re, ok := err.(*RuleError); ok {
			err = re.Err // a failed read, not a rule that could not judge
		}
		return false, fmt.Errorf("confirming %s %s on %s with a live read: %w", rl.ID, rl.Name, f.Object, err)
	}
	for _, g := range again {
		if g.Object == f.Object && g.Field == f.Field {
			return true, nil
		}
	}
	return false, nil
}

// readObject reads the object a finding is on through v: nil when it does not exist.
func readObject(ref ObjectRef, v View) (any, error) {
	switch ref.Kind {
	case KindPersistentVolume:
		if pv, err := v.PersistentVolume(ref.Name); pv != nil || err != nil {
			return pv, err
		}
	case KindPersistentVolumeClaim:
		if pvc, err := v.PersistentVolumeClaim(ref.Namespace, ref.Name); pvc != nil || err != nil {
			return pvc, err
		}
	case KindStorageClass:
		classes, err := v.StorageClasses()
		if err != nil {
			return nil, err
		}
		for _, sc := range classes {
			if sc.Name == ref.Name {
				return sc, nil
			}
		}
	default:
		return nil, fmt.Errorf("cannot read a %s", ref.Kind)
	}
	return nil, nil
}

// AuditOrder ranks kinds in the order Merge expects their findings: classes, then claims, then
// volumes. A violated pair is seen from both of its objects; judging the claim first puts the
// finding on the claim, in its namespace, where the tenant who owns it sees it.
func AuditOrder(k Kind) int {
	switch k {
	case KindStorageClass:
		return 0
	case KindPersistentVolumeClaim:
		return 1
	default:
		return 2
	}
}

// Merge joins per-object audit findings, given in AuditOrder, keeping the first of any two with
// the same rule and message, and sorts the result by rule, then object.
func Merge(perObject [][]Finding) []Finding {
	return merge(slices.Values(perObject))
}

// mergeEach is Merge over the findings of an AuditEach.
func mergeEach(each []ObjectAudit) []Finding {
	return merge(func(yield func([]Finding) bool) {
		for i := range each {
			if !yield(each[i].Findings) {
				return
			}
		}
	})
}

func merge(perObject iter.Seq[[]Finding]) []Finding {
	var out []Finding
	seen := map[string]bool{}
	for found := range perObject {
		for _, f := range found {
			k := string(f.Rule) + "\x00" + f.Message.String()
			if !seen[k] {
				seen[k] = true
				out = append(out, f)
			}
		}
	}
	// Each object's name is rendered once rather than at every comparison, and the sort moves
	// small keys, not the findings: with many findings, moving them (through the collector's
	// write barriers) cost more than comparing them. Equal keys keep their order (i).
	if len(out) == 0 {
		return out
	}
	keyed := make([]keyedFinding, len(out))
	for i, f := range out {
		keyed[i] = keyedFinding{rule: f.Rule, object: f.Object.String(), i: i}
	}
	slices.SortFunc(keyed, func(a, b keyedFinding) int {
		if c := cmp.Compare(a.rule, b.rule); c != 0 {
			return c
		}
		if c := cmp.Compare(a.object, b.object); c != 0 {
			return c
		}
		return cmp.Compare(a.i, b.i)
	})
	sorted := make([]Finding, len(out))
	for j, k := range keyed {
		sorted[j] = out[k.i]
	}
	return sorted
}

type keyedFinding struct {
	rule   RuleID
	object string
	i      int
}
