package audit

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/policy"
)

// Options configure a Runner.
type Options struct {
	// Interval between full audits (default one minute).
	Interval time.Duration
	// Cache lists the objects; Live confirms an absence before it is reported.
	Cache, Live client.Reader
	Engine      func() *policy.Engine
	Registry    prometheus.Registerer
	Log         logr.Logger
	Now         func() time.Time
}

// Runner audits the cluster periodically and on demand.
type Runner struct {
	o       Options
	trigger chan struct{}
	updated chan struct{}

	mu       sync.RWMutex
	latest   Report
	found    []policy.Finding
	at       time.Time
	bindings []Binding

	findings *prometheus.GaugeVec
	duration prometheus.Histogram
	lastRun  prometheus.Gauge
}

// NewRunner builds a Runner; Start runs it.
func NewRunner(o Options) *Runner {
	if o.Interval <= 0 {
		o.Interval = time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Registry == nil {
		o.Registry = prometheus.NewRegistry()
	}
	r := &Runner{
		o:       o,
		trigger: make(chan struct{}, 1),
		updated: make(chan struct{}, 1),
		findings: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "pvguard_audit_findings",
			Help: "Findings of the last audit, by rule and action."}, []string{"rule", "action"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "pvguard_audit_duration_seconds",
			Help: "Time to audit the whole cache.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}),
		lastRun: prometheus.NewGauge(prometheus.GaugeOpts{Name: "pvguard_audit_last_run_timestamp_seconds",
			Help: "When the last audit finished (Unix time)."}),
	}
	o.Registry.MustRegister(r.findings, r.duration, r.lastRun)
	return r
}

// NeedLeaderElection lets every replica audit, so each serves a current report.
func (r *Runner) NeedLeaderElection() bool { return false }

// Trigger asks for an audit soon (changes are coalesced).
func (r *Runner) Trigger() {
	select {
	case r.trigger <- struct{}{}:
	default:
	}
}

// Updated signals after each audit (coalesced: one pending signal at most).
func (r *Runner) Updated() <-chan struct{} { return r.updated }

// Bindings returns the PV <-> PVC table of the last audit.
func (r *Runner) Bindings() []Binding {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.bindings
}

// LatestFindings returns the last audit's findings, when it ran and how many objects it read.
func (r *Runner) LatestFindings() ([]policy.Finding, time.Time, int) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.found, r.at, r.latest.Summary.Objects
}

// Latest returns the last audit's report.
func (r *Runner) Latest() Report {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.latest
}

// Start audits at once, then every interval and after changes (at most once a second), until
// ctx ends.
func (r *Runner) Start(ctx context.Context) error {
	tick := time.NewTicker(r.o.Interval)
	defer tick.Stop()
	for {
		if err := r.RunOnce(ctx); err != nil && ctx.Err() == nil {
			r.o.Log.Error(err, "audit failed")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		case <-r.trigger:
			select { // coalesce a burst of changes
			case <-ctx.Done():
				return nil
			case <-time.After(time.Second):
			}
		}
	}
}

// RunOnce audits the cache now.
func (r *Runner) RunOnce(ctx context.Context) error {
	start := time.Now()
	snap, n, err := r.snapshot(ctx)
	if err != nil {
		return err
	}
	found, err := r.o.Engine().Audit(snap, r.o.Now())
	if err != nil {
		return err
	}
	confirmed := found[:0]
	for _, f := range found {
		ok, err := r.confirm(ctx, f)
		if err != nil {
			return err
		}
		if ok {
			confirmed = append(confirmed, f)
		}
	}
	report := NewReport(n, confirmed)
	report.Time = r.o.Now()
	bindings := bindingsOf(snap)
	r.mu.Lock()
	r.latest, r.found, r.at, r.bindings = report, confirmed, report.Time, bindings
	r.mu.Unlock()
	select {
	case r.updated <- struct{}{}:
	default:
	}
	r.findings.Reset()
	for _, f := range confirmed {
		r.findings.WithLabelValues(string(f.Rule), string(f.Action)).Inc()
	}
	r.duration.Observe(time.Since(start).Seconds())
	r.lastRun.Set(float64(time.Now().Unix()))
	return nil
}

// confirm re-reads, past the cache, the object whose absence a finding is about: an informer
// that has not caught up must not make pvguard report a claim or volume as gone.
func (r *Runner) confirm(ctx context.Context, f policy.Finding) (bool, error) {
	var key client.ObjectKey
	var obj client.Object
	switch f.Rule {
	case "PVG020": // the claim a Bound volume names
		pv := &corev1.PersistentVolume{}
		if err := r.o.Live.Get(ctx, client.ObjectKey{Name: f.Object.Name}, pv); err != nil {
			return !apierrors.IsNotFound(err), ignoreNotFound(err)
		}
		if pv.Spec.ClaimRef == nil {
			return false, nil
		}
		key, obj = client.ObjectKey{Namespace: pv.Spec.ClaimRef.Namespace, Name: pv.Spec.ClaimRef.Name}, &corev1.PersistentVolumeClaim{}
		if err := r.o.Live.Get(ctx, key, obj); err == nil {
			return obj.GetUID() != pv.Spec.ClaimRef.UID, nil
		} else if !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("confirming %s: %w", f.Object, err)
		}
		return pv.Status.Phase == corev1.VolumeBound, nil
	case "PVG021": // a claim bound to a missing volume
		if f.Field != "spec.volumeName" {
			return true, nil
		}
		pvc := &corev1.PersistentVolumeClaim{}
		if err := r.o.Live.Get(ctx, client.ObjectKey{Namespace: f.Object.Namespace, Name: f.Object.Name}, pvc); err != nil {
			return false, ignoreNotFound(err)
		}
		err := r.o.Live.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, &corev1.PersistentVolume{})
		if err == nil {
			return false, nil
		}
		return apierrors.IsNotFound(err), ignoreNotFound(err)
	}
	return true, nil
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func (r *Runner) snapshot(ctx context.Context) (*policy.Snapshot, int, error) {
	var pvs corev1.PersistentVolumeList
	var pvcs corev1.PersistentVolumeClaimList
	var scs storagev1.StorageClassList
	var nodes metav1.PartialObjectMetadataList
	nodes.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NodeList"))
	for _, l := range []client.ObjectList{&pvs, &pvcs, &scs, &nodes} {
		if err := r.o.Cache.List(ctx, l); err != nil {
			return nil, 0, fmt.Errorf("listing %T for the audit: %w", l, err)
		}
	}
	s := &policy.Snapshot{}
	for i := range pvs.Items {
		s.PVs = append(s.PVs, &pvs.Items[i])
	}
	for i := range pvcs.Items {
		s.PVCs = append(s.PVCs, &pvcs.Items[i])
	}
	for i := range scs.Items {
		s.Classes = append(s.Classes, &scs.Items[i])
	}
	for i := range nodes.Items {
		s.Nodes = append(s.Nodes, &corev1.Node{ObjectMeta: nodes.Items[i].ObjectMeta})
	}
	return s, len(s.PVs) + len(s.PVCs) + len(s.Classes), nil
}
