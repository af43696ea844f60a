package audit

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	openreports "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/policy"
)

// Writer keeps the cluster's pvguard-owned OpenReports objects equal to the latest audit: it
// creates and updates them only when their results change (timestamps aside) and deletes those
// no finding needs any more. It runs on the elected replica only.
type Writer struct {
	runner     *Runner
	c          client.Client
	log        logr.Logger
	maxResults int
	missingCRD atomic.Bool
}

// NewWriter returns a writer publishing the runner's results through c (which must know the
// openreports.io types).
func NewWriter(r *Runner, c client.Client, log logr.Logger) *Writer {
	return &Writer{runner: r, c: c, log: log, maxResults: DefaultMaxResults}
}

// NeedLeaderElection makes only the elected replica write reports.
func (w *Writer) NeedLeaderElection() bool { return true }

// Start publishes after every audit until ctx ends. A sync that found its cache behind its own
// writes is retried a second later.
func (w *Writer) Start(ctx context.Context) error {
	var retry <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-w.runner.Updated():
		case <-retry:
		}
		retry = nil
		err := w.Sync(ctx)
		switch {
		case errors.Is(err, errCacheBehind):
			retry = time.After(time.Second)
		case err != nil && ctx.Err() == nil:
			w.log.Error(err, "writing audit reports")
		}
	}
}

// errCacheBehind says a report the cache did not list already exists: the writer's own create,
// not yet seen by its informer.
var errCacheBehind = errors.New("report cache behind its own writes")

// Sync writes the reports for the runner's latest audit.
func (w *Writer) Sync(ctx context.Context) error {
	findings, at, _ := w.runner.LatestFindings()
	v, err := w.runner.view(ctx)
	if err != nil {
		return fmt.Errorf("reading the cluster for the reports' readers: %w", err)
	}
	reports, cluster := OpenReports(findings, at, w.maxResults, v, w.runner.config())
	owned := client.MatchingLabels{ManagedByLabel: "pvguard"}

	var existing openreports.ReportList
	if err := w.c.List(ctx, &existing, owned); err != nil {
		if meta.IsNoMatchError(err) {
			if !w.missingCRD.Swap(true) {
				w.log.Info("the openreports.io CRDs are not installed; audit reports are served at /api/v1/report only")
			}
			return nil
		}
		return fmt.Errorf("listing reports: %w", err)
	}
	w.missingCRD.Store(false)
	var existingCluster openreports.ClusterReportList
	if err := w.c.List(ctx, &existingCluster, owned); err != nil {
		return fmt.Errorf("listing cluster reports: %w", err)
	}

	existingReports := make([]*openreports.Report, len(existing.Items))
	for i := range existing.Items {
		existingReports[i] = &existing.Items[i]
	}
	existingClusterReports := make([]*openreports.ClusterReport, len(existingCluster.Items))
	for i := range existingCluster.Items {
		existingClusterReports[i] = &existingCluster.Items[i]
	}
	errs := reconcile(ctx, w, reports, existingReports, func(r *openreports.Report) []openreports.ReportResult { return r.Results })
	errs = append(errs, reconcile(ctx, w, cluster, existingClusterReports, func(r *openreports.ClusterReport) []openreports.ReportResult { return r.Results })...)
	return errors.Join(errs...)
}

// reconcile makes the existing reports of one kind equal to want: it creates what is missing,
// updates what changed (timestamps aside) and deletes what no finding needs any more.
func reconcile[T client.Object](ctx context.Context, w *Writer, want, existing []T, results func(T) []openreports.ReportResult) []error {
	have := make(map[client.ObjectKey]T, len(existing))
	for _, e := range existing {
		have[client.ObjectKeyFromObject(e)] = e
	}
	var errs []error
	for _, obj := range want {
		key := client.ObjectKeyFromObject(obj)
		cur, ok := have[key]
		delete(have, key)
		switch {
		case !ok:
			errs = append(errs, w.create(ctx, obj))
		case !sameResults(results(cur), results(obj)):
			obj.SetResourceVersion(cur.GetResourceVersion())
			errs = append(errs, w.c.Update(ctx, obj))
		}
	}
	for _, stale := range have {
		errs = append(errs, client.IgnoreNotFound(w.c.Delete(ctx, stale)))
	}
	return errs
}

// create creates a report; a namespace deleted since the audit is not an error, and a report
// that already exists asks for a retry once the cache has caught up.
func (w *Writer) create(ctx context.Context, obj client.Object) error {
	err := w.c.Create(ctx, obj)
	switch {
	case apierrors.IsAlreadyExists(err):
		return errCacheBehind
	case err != nil && !apierrors.IsNotFound(err):
		return err
	}
	return nil
}

// sameResults compares results ignoring their timestamps, so an unchanged audit writes nothing.
func sameResults(a, b []openreports.ReportResult) bool {
	strip := func(in []openreports.ReportResult) []openreports.ReportResult {
		out := make([]openreports.ReportResult, len(in))
		for i, r := range in {
			r.Timestamp = metav1.Timestamp{}
			out[i] = r
		}
		return out
	}
	return equality.Semantic.DeepEqual(strip(a), strip(b))
}

// config is the policy config of the runner's engine (its grant annotation says which volumes a
// namespace's readers may read).
func (r *Runner) config() *policy.Config { return r.o.Engine().Config() }
