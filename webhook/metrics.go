package webhook

import (
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/pvguard/pvguard/policy"
)

// Metrics are pvguard's admission metrics. Label values come from fixed sets (kinds, handlers,
// decisions, rule IDs, actions), so cardinality is bounded whatever the cluster sends.
type Metrics struct {
	reviews       *prometheus.CounterVec
	duration      *prometheus.HistogramVec
	findings      *prometheus.CounterVec
	configReloads *prometheus.CounterVec
	liveFallbacks *prometheus.CounterVec
}

// ReviewDurationBuckets are the bounds, in seconds, of the histograms of a review's time: its
// decision's here and its whole request's (internal/web). hack/bench/scale counts the reviews over
// the 10 ms bound.
func ReviewDurationBuckets() []float64 {
	return []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 0.5}
}

// NewMetrics creates the metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		reviews: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pvguard_admission_reviews_total",
			Help: "Admission reviews handled, by kind, handler, operation and decision.",
		}, []string{"kind", "handler", "operation", "decision"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "pvguard_admission_review_duration_seconds",
			Help:    "Time to decide one admission review, server side.",
			Buckets: ReviewDurationBuckets(),
		}, []string{"kind", "handler"}),
		findings: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pvguard_admission_findings_total",
			Help: "Rule findings at admission (dry-run requests excluded), by rule and action.",
		}, []string{"rule", "action"}),
		configReloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pvguard_config_reloads_total",
			Help: "Policy config loads, by result (success or error).",
		}, []string{"result"}),
		liveFallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pvguard_admission_live_read_fallbacks_total",
			Help: "Denials judged on the informer cache whose live re-read did not complete, by kind and reason (requester-share: the requester's allowance of re-reads, --live-rereads-per-requester, was spent; no-token: the live reads' token bucket had none at once; budget: no answer within --live-read-budget; error: the read failed), so that the cache's decision stood.",
		}, []string{"kind", "reason"}),
	}
	reg.MustRegister(m.reviews, m.duration, m.findings, m.configReloads, m.liveFallbacks)
	return m
}

func (m *Metrics) observeReview(kind policy.Kind, handler string, req admission.Request, decision string, d time.Duration) {
	if m == nil {
		return
	}
	op := operationLabel(req.Operation)
	m.reviews.WithLabelValues(string(kind), handler, op, decision).Inc()
	m.duration.WithLabelValues(string(kind), handler).Observe(d.Seconds())
}

func (m *Metrics) observeLiveReadFallback(kind policy.Kind, reason string) {
	if m == nil {
		return
	}
	m.liveFallbacks.WithLabelValues(string(kind), reason).Inc()
}

func (m *Metrics) observeFindings(d policy.Decision) {
	if m == nil {
		return
	}
	for _, group := range [][]policy.Finding{d.Deny, d.Warn, d.Audit} {
		for _, f := range group {
			m.findings.WithLabelValues(string(f.Rule), string(f.Action)).Inc()
		}
	}
}

func (m *Metrics) observeConfigLoad(err error) {
	if m == nil {
		return
	}
	result := "success"
	if err != nil {
		result = "error"
	}
	m.configReloads.WithLabelValues(result).Inc()
}

// operationLabel is the operation label of a review: its operation in lower case, or "unknown".
// The four operations the apiserver sends are answered without building a string.
func operationLabel(o admissionv1.Operation) string {
	switch o {
	case admissionv1.Create:
		return "create"
	case admissionv1.Update:
		return "update"
	case admissionv1.Delete:
		return "delete"
	case admissionv1.Connect:
		return "connect"
	}
	switch op := strings.ToLower(string(o)); op {
	case "create", "update", "delete", "connect":
		return op
	}
	return "unknown"
}
