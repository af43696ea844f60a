package binder

import "github.com/prometheus/client_golang/prometheus"

// metrics are the binder's Prometheus metrics; labels come from fixed sets.
type metrics struct {
	pending       prometheus.Gauge
	binds         prometheus.Counter
	unbinds       prometheus.Counter
	releases      prometheus.Counter
	reclaims      *prometheus.CounterVec
	errors        *prometheus.CounterVec
	policyDenials prometheus.Counter
	disagreements prometheus.Counter
	shadowDecided prometheus.GaugeFunc
	bindLatency   prometheus.Histogram
	planDuration  prometheus.Histogram
}

// queueDepthDesc is pvguard_binder_queue_depth, exported by queueDepth.
var queueDepthDesc = prometheus.NewDesc("pvguard_binder_queue_depth",
	"Keys waiting in the running binder's work queues: sync (claims and volumes to sync) and plan (a plan requested). Exported only by the replica running the binder.",
	[]string{"queue"}, nil)

// queueDepth exports the depth of the binder's queues, read at each scrape. depths reports
// running false on a replica that is not running the binder (not elected, or stopped): its
// queues fill from the informers but no worker drains them, so their length there says nothing
// about the binder's backlog and is not exported.
type queueDepth struct {
	depths func() (sync, plan int, running bool)
}

func (q queueDepth) Describe(ch chan<- *prometheus.Desc) { ch <- queueDepthDesc }

func (q queueDepth) Collect(ch chan<- prometheus.Metric) {
	sync, plan, running := q.depths()
	if !running {
		return
	}
	ch <- prometheus.MustNewConstMetric(queueDepthDesc, prometheus.GaugeValue, float64(sync), "sync")
	ch <- prometheus.MustNewConstMetric(queueDepthDesc, prometheus.GaugeValue, float64(plan), "plan")
}

// newMetrics registers the metrics; shadowDecided and queues are read at every scrape.
func newMetrics(reg prometheus.Registerer, shadowDecided func() float64, queues func() (sync, plan int, running bool)) *metrics {
	m := &metrics{
		pending: prometheus.NewGauge(prometheus.GaugeOpts{Name: "pvguard_binder_pending_claims",
			Help: "Unbound claims considered by the last pool plan."}),
		binds: prometheus.NewCounter(prometheus.CounterOpts{Name: "pvguard_binder_binds_total",
			Help: "Bindings completed (all four writes)."}),
		unbinds: prometheus.NewCounter(prometheus.CounterOpts{Name: "pvguard_binder_unbinds_total",
			Help: "Volumes unbound from claims that went elsewhere."}),
		releases: prometheus.NewCounter(prometheus.CounterOpts{Name: "pvguard_binder_releases_total",
			Help: "Volumes released after a live read confirmed their claim gone."}),
		reclaims: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pvguard_binder_reclaims_total",
			Help: "Reclaim decisions on released volumes, by action."}, []string{"action"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pvguard_binder_errors_total",
			Help: "Failed binder operations, by operation."}, []string{"operation"}),
		policyDenials: prometheus.NewCounter(prometheus.CounterOpts{Name: "pvguard_binder_policy_denials_total",
			Help: "Bindings the binder did not make because policy denies them."}),
		disagreements: prometheus.NewCounter(prometheus.CounterOpts{Name: "pvguard_binder_shadow_disagreements_total",
			Help: "In shadow mode, claims the cluster's binder bound to another volume than pvguard would have."}),
		shadowDecided: prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "pvguard_binder_shadow_decided_claims",
			Help: "In shadow mode, pending claims for which pvguard has chosen a volume, waiting for the cluster's binder."}, shadowDecided),
		bindLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "pvguard_binder_bind_duration_seconds",
			Help: "Time from the binder's decision to the last of the four bind writes.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)}),
		planDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "pvguard_binder_plan_duration_seconds",
			Help: "Time to plan the assignment of the pending claims.", Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)}),
	}
	reg.MustRegister(m.pending, m.binds, m.unbinds, m.releases, m.reclaims, m.errors, m.policyDenials, m.disagreements, m.shadowDecided, m.bindLatency, m.planDuration, queueDepth{queues})
	return m
}
