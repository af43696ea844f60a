package audit

import (
	"cmp"
	"slices"
	"time"

	"github.com/pvguard/pvguard/clusterstate"
	"github.com/pvguard/pvguard/policy"
)

// This file holds the Runner's report: publishing an audit's results, and reading them back.

// Bindings returns the PV <-> PVC table of the last audit, in report order. It is built when
// asked for (the dashboard), not on every audit: an incremental audit of one object would
// otherwise copy the rows of every volume in the cluster.
func (r *Runner) Bindings() []Binding {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sortResults()
	var out []Binding
	for _, res := range r.results {
		if res.row != nil && res.key.Kind == clusterstate.KindPersistentVolume {
			out = append(out, res.row.binding(res.key.Name))
		}
	}
	return out
}

// Pending returns the claims the last audit found not bound, in report order (built when asked
// for, as Bindings).
func (r *Runner) Pending() []PendingClaim {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sortResults()
	var out []PendingClaim
	for _, res := range r.results {
		if res.row != nil && res.key.Kind == clusterstate.KindPersistentVolumeClaim {
			out = append(out, res.row.pending(res.key.Namespace, res.key.Name))
		}
	}
	return out
}

// sortResults puts r.results in report order; r.mu must be held for writing.
func (r *Runner) sortResults() {
	if !r.sorted {
		slices.SortFunc(r.results, func(a, b result) int { return compareKeys(a.key, b.key) })
		r.sorted = true
	}
}

// LatestFindings returns the last audit's findings, when it ran and how many objects it read.
func (r *Runner) LatestFindings() ([]policy.Finding, time.Time, int) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.found, r.at, r.objects
}

// Latest returns the last audit's report (the zero Report before the first), made of its
// findings when asked for.
func (r *Runner) Latest() Report {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if !r.published {
		return Report{}
	}
	report := NewReport(r.objects, r.found)
	report.Time = r.at
	return report
}

// publish merges the per-object results into the report and the metrics (the bindings and the
// pending claims are built when asked for).
func (r *Runner) publish(start time.Time, scope string) {
	r.mu.Lock()
	// Only the objects with findings are put in report order: nearly every object has none, and
	// sorting every key of the cluster took most of a full audit's time after the rules'.
	// The rows' order (Bindings, Pending) is sorted when they are asked for.
	var with []int
	for i, res := range r.results {
		if res.findings != nil {
			with = append(with, i)
		}
	}
	if !r.sorted {
		slices.SortFunc(with, func(a, b int) int { return compareKeys(r.results[a].key, r.results[b].key) })
	}
	perObject := make([][]policy.Finding, 0, len(with))
	for _, i := range with {
		perObject = append(perObject, r.results[i].found())
	}
	found := policy.Merge(perObject)
	r.found, r.at, r.objects, r.published = found, r.o.Now(), len(r.results), true
	r.mu.Unlock()
	select {
	case r.updated <- struct{}{}:
	default:
	}
	r.findings.Reset()
	for _, f := range found {
		r.findings.WithLabelValues(string(f.Rule), string(f.Action)).Inc()
	}
	r.duration.WithLabelValues(scope).Observe(time.Since(start).Seconds())
	r.lastRun.Set(float64(time.Now().Unix()))
}

// compareKeys orders keys as reports list objects: by kind, namespace and name.
func compareKeys(a, b clusterstate.Key) int {
	if c := cmp.Compare(policy.AuditOrder(a.Kind), policy.AuditOrder(b.Kind)); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	return cmp.Compare(a.Name, b.Name)
}
