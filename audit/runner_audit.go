package audit

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/pvguard/pvguard/clusterstate"
	"github.com/pvguard/pvguard/internal/cores"
	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/storage"
)

// This file holds the Runner's audits: the full one, the incremental one, and how each object
// is judged and recorded.

// RunOnce audits the whole cache now, with the one full audit (policy.Engine.AuditEach), the
// findings that report an object as gone confirmed live.
func (r *Runner) RunOnce(ctx context.Context) (err error) {
	start := time.Now()
	// The changes reported until now are in the cache this audit reads (an informer stores an
	// object before it tells its handlers), so this audit judges them all: taken now, they are
	// not audited again one by one. At a start that is every object of the informers' first
	// lists, which would otherwise make a second audit of the whole cluster right after the
	// first. Put back if the audit fails before its results are kept.
	full, dirty := r.takeForFull()
	kept := false
	defer func() {
		if !kept {
			r.restorePending(full, dirty)
		}
	}()
	st, err := r.state(ctx)
	if err != nil {
		return err
	}
	// The state's one index serves the audit and the bindings; one live view (and so one live
	// list of the nodes) the whole audit's confirmations.
	turn := r.turns(ctx)
	each, err := r.o.Engine().AuditEach(st, policy.AuditOptions{Now: r.o.Now(), Progress: r.o.Progress, Live: r.o.Live(ctx), Turn: turn})
	if err != nil {
		return err
	}
	results, err := recordEach(each, st, turn)
	if err != nil {
		return err
	}
	var failed []error
	for _, oa := range each {
		if oa.Err != nil {
			failed = append(failed, oa.Err)
		}
	}
	r.mu.Lock()
	r.results, r.sorted = results, false
	r.mu.Unlock()
	kept = true
	r.publish(start, "full")
	return errors.Join(failed...)
}

// turns is what a full audit's goroutines call around each block of objects (RunnerOptions.Seats):
// nil for the first full audit after Start, which takes every core.
func (r *Runner) turns(ctx context.Context) func() func() {
	select {
	case <-r.firstDone:
		return r.o.Seats.Turns(ctx)
	default:
		return nil
	}
}

// recordEach is record of every audited object, spread over the cores as the audit is: on one
// core the volumes' binding rows took about as long as the rules on two. Each goroutine calls
// turn, when not nil, around each block (policy.AuditOptions.Turn). The first error in the
// objects' order is returned, as a loop over them would.
func recordEach(each []policy.ObjectAudit, st *clusterstate.State, turn func() func()) ([]result, error) {
	results := make([]result, len(each))
	errs := make([]error, len(each))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), (len(each)+recordBlock-1)/recordBlock) {
		wg.Go(func() {
			// A block's rows are made in scratch and kept in one slice of exactly their number:
			// one allocation a block rather than one a volume, and no room kept for the bound
			// claims, which have none.
			scratch := make([]row, recordBlock)
			has := make([]bool, recordBlock)
			for {
				give := func() {}
				if turn != nil {
					give = turn()
				}
				start := int(next.Add(recordBlock)) - recordBlock
				if start >= len(each) {
					give()
					return
				}
				end := min(start+recordBlock, len(each))
				n := 0
				for i := start; i < end; i++ {
					oa := each[i]
					has[i-start] = false
					if _, errs[i] = policy.SplitRuleErrors(oa.Err); errs[i] == nil {
						results[i], scratch[i-start], has[i-start], errs[i] = recordRow(oa.Object, oa.Findings, st)
						if has[i-start] {
							n++
						}
					}
				}
				kept := make([]row, 0, n)
				for i := start; i < end; i++ {
					if has[i-start] {
						kept = append(kept, scratch[i-start])
						results[i].row = &kept[len(kept)-1]
					}
				}
				give()
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return results, nil
}

// recordBlock is how many consecutive objects recordEach's goroutines take at a time.
const recordBlock = 1024

// runIncremental re-audits the changed objects and their neighbours two links out: a claim, the
// volumes it names or that name it, and the other claims of those volumes (whose double-binding
// and pair findings mention it).
func (r *Runner) runIncremental(ctx context.Context, dirty map[clusterstate.Key]struct{}) error {
	start := time.Now()
	v, err := r.view(ctx)
	if err != nil {
		return err
	}
	todo := make(map[clusterstate.Key]any, len(dirty))
	frontier := dirty
	for hop := 0; hop <= 2 && len(frontier) > 0; hop++ {
		next := map[clusterstate.Key]struct{}{}
		for k := range frontier {
			if _, done := todo[k]; done {
				continue
			}
			obj, neighbours, err := lookup(v, k)
			if err != nil {
				return err
			}
			todo[k] = obj
			for _, n := range neighbours {
				next[n] = struct{}{}
			}
		}
		frontier = next
	}
	results := make([]result, 0, len(todo))
	var gone []clusterstate.Key
	var failed []error
	for k, obj := range todo {
		if obj == nil {
			gone = append(gone, k)
			continue
		}
		sctx, give := r.o.Seats.Background(ctx) // one object at a time on a seat (RunnerOptions.Seats)
		_, res, ruleErr, err := r.judge(sctx, obj, v)
		give()
		if err != nil {
			return err
		}
		results = append(results, res)
		failed = append(failed, ruleErr)
	}
	r.mu.Lock()
	r.update(results, gone)
	r.mu.Unlock()
	r.publish(start, "incremental")
	return errors.Join(failed...)
}

// lookup reads one object through the view (nil when it is gone) and lists its neighbours.
func lookup(v policy.View, k clusterstate.Key) (any, []clusterstate.Key, error) {
	var out []clusterstate.Key
	switch k.Kind {
	case clusterstate.KindPersistentVolume:
		pv, err := v.PersistentVolume(k.Name)
		if err != nil {
			return nil, nil, fmt.Errorf("re-auditing volume %s: %w", k.Name, err)
		}
		claims, err := v.ClaimsNamingVolume(k.Name)
		if err != nil {
			return nil, nil, fmt.Errorf("re-auditing volume %s: %w", k.Name, err)
		}
		for _, c := range claims {
			out = append(out, clusterstate.ClaimKey(c.Namespace, c.Name))
		}
		if pv == nil {
			return nil, out, nil
		}
		// A claimRef without a name or namespace has no claim to look up (and the read would fail).
		if ref := pv.Spec.ClaimRef; storage.NamesAClaim(ref) {
			out = append(out, clusterstate.ClaimKey(ref.Namespace, ref.Name))
		}
		return pv, out, nil
	case clusterstate.KindPersistentVolumeClaim:
		pvc, err := v.PersistentVolumeClaim(k.Namespace, k.Name)
		if err != nil {
			return nil, nil, fmt.Errorf("re-auditing claim %s/%s: %w", k.Namespace, k.Name, err)
		}
		vols, err := v.VolumesClaiming(k.Namespace, k.Name)
		if err != nil {
			return nil, nil, fmt.Errorf("re-auditing claim %s/%s: %w", k.Namespace, k.Name, err)
		}
		for _, pv := range vols {
			out = append(out, clusterstate.VolumeKey(pv.Name))
		}
		if pvc == nil {
			return nil, out, nil
		}
		if pvc.Spec.VolumeName != "" {
			out = append(out, clusterstate.VolumeKey(pvc.Spec.VolumeName))
		}
		return pvc, out, nil
	}
	return nil, nil, fmt.Errorf("re-auditing %s %s: not a volume or claim", k.Kind, k.Name)
}

// update puts an incremental audit's results in r.results: an object's result replaces the one
// it had, an object that came is added, and the objects gone are dropped. Results in report
// order stay so (the objects that came are merged in); results a full audit left in its order
// are scanned once and stay unsorted, as sorting every result of the cluster costs several
// times what the scan does. r.mu must be held for writing.
func (r *Runner) update(results []result, gone []clusterstate.Key) {
	if !r.sorted {
		r.updateUnsorted(results, gone)
		return
	}
	var came []result
	for _, res := range results {
		if i, ok := r.find(res.key); ok {
			r.results[i] = res
		} else {
			came = append(came, res)
		}
	}
	// Every index is found before any result is marked: a marked result is out of order.
	var drop []int
	for _, k := range gone {
		if i, ok := r.find(k); ok {
			drop = append(drop, i)
		}
	}
	if len(came) == 0 && len(drop) == 0 {
		return
	}
	for _, i := range drop {
		r.results[i].key = clusterstate.Key{} // no object has the empty key
	}
	slices.SortFunc(came, func(a, b result) int { return compareKeys(a.key, b.key) })
	merged := make([]result, 0, len(r.results)-len(drop)+len(came))
	for _, res := range r.results {
		if res.key == (clusterstate.Key{}) {
			continue
		}
		for len(came) > 0 && compareKeys(came[0].key, res.key) < 0 {
			merged, came = append(merged, came[0]), came[1:]
		}
		merged = append(merged, res)
	}
	r.results = append(merged, came...)
}

// updateUnsorted is update of results not in report order: one pass over them, which replaces
// and drops in place, then the objects that came at the end.
func (r *Runner) updateUnsorted(results []result, gone []clusterstate.Key) {
	change := make(map[clusterstate.Key]int, len(results)+len(gone)) // index in results, -1 gone
	for i, res := range results {
		change[res.key] = i
	}
	for _, k := range gone {
		change[k] = -1
	}
	kept := r.results[:0]
	for _, res := range r.results {
		i, ok := change[res.key]
		if !ok {
			kept = append(kept, res)
			continue
		}
		delete(change, res.key)
		if i >= 0 {
			kept = append(kept, results[i])
		}
	}
	clear(r.results[len(kept):]) // no pointer kept past the end to findings or rows dropped
	for _, res := range results {
		if _, came := change[res.key]; came {
			kept = append(kept, res)
		}
	}
	r.results = kept
}

// find is the index of k's result in r.results, which must be sorted.
func (r *Runner) find(k clusterstate.Key) (int, bool) {
	return slices.BinarySearchFunc(r.results, k, func(res result, k clusterstate.Key) int { return compareKeys(res.key, k) })
}

// judge audits one object, confirming absences live, and computes its row. When some rules could
// not judge the object, ruleErr says which and the result holds the findings of the rules that
// could, so one rule's failure does not hide the object's other findings; the caller keeps them
// and reports ruleErr. Any other failure is err, with no result.
func (r *Runner) judge(ctx context.Context, obj any, v policy.View) (k clusterstate.Key, res result, ruleErr, err error) {
	engine, now := r.o.Engine(), r.o.Now()
	found, ruleErr := engine.AuditObject(obj, v, now)
	if _, err := policy.SplitRuleErrors(ruleErr); err != nil {
		return clusterstate.Key{}, result{}, nil, err
	}
	if len(found) > 0 { // confirming reads the apiserver: off the seat meanwhile
		back := cores.Away(ctx)
		found, err = engine.Confirm(found, r.live(ctx), now)
		back()
		if err != nil {
			return clusterstate.Key{}, result{}, nil, err
		}
	}
	if res, err = record(obj, found, v); err != nil {
		return clusterstate.Key{}, result{}, nil, err
	}
	return res.key, res, ruleErr, nil
}

// record is an audited object's result: its key, its findings and, for a volume or a claim not
// bound, its row.
func record(obj any, found []policy.Finding, v policy.View) (result, error) {
	res, r, hasRow, err := recordRow(obj, found, v)
	if hasRow {
		res.row = &r
	}
	return res, err
}

// recordRow is record with the row returned apart (hasRow), for the caller to place.
func recordRow(obj any, found []policy.Finding, v policy.View) (res result, r row, hasRow bool, err error) {
	if len(found) > 0 {
		f := found // only this copy of the slice's header escapes, for the objects with findings
		res.findings = &f
	}
	switch o := obj.(type) {
	case *corev1.PersistentVolume:
		res.key = clusterstate.VolumeKey(o.Name)
		if r, err = volumeRow(o, v); err != nil {
			return result{}, row{}, false, err
		}
		return res, r, true, nil
	case *corev1.PersistentVolumeClaim:
		res.key = clusterstate.ClaimKey(o.Namespace, o.Name)
		r, hasRow = claimRow(o)
		return res, r, hasRow, nil
	case *storagev1.StorageClass:
		res.key = clusterstate.ClassKey(o.Name)
	}
	return res, row{}, false, nil
}

// view is what an incremental audit reads related objects through: the options' View, or the
// cache's state.
func (r *Runner) view(ctx context.Context) (policy.View, error) {
	if r.o.View != nil {
		return r.o.View(ctx), nil
	}
	st, err := r.state(ctx)
	if err != nil {
		return nil, err
	}
	return st, nil
}

// live is the view findings are confirmed on: reads past the cache, so that an informer that
// has not caught up does not make pvguard report a claim or volume as gone. Which findings need
// it, and what confirms them, each rule declares (policy.Rule.ConfirmLive).
func (r *Runner) live(ctx context.Context) policy.View { return r.o.Live(ctx) }

// state reads the cluster's state from the cache (clusterstate.Read), with the pods the rules
// read (clusterstate.ReadPods: the cache's own, stripped, or a live client's, stripped page by
// page).
func (r *Runner) state(ctx context.Context) (*clusterstate.State, error) {
	s, err := clusterstate.Read(ctx, r.o.Cache, r.o.Engine().Reads()...)
	if err != nil {
		return nil, fmt.Errorf("reading the cluster for the audit: %w", err)
	}
	pods, err := clusterstate.ReadPods(ctx, r.o.Cache)
	if err != nil {
		return nil, fmt.Errorf("reading the cluster for the audit: %w", err)
	}
	return s.WithPods(pods), nil
}
