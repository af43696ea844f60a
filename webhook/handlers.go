package webhook

import (
	"net/http"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/pvguard/pvguard/policy"
)

// Endpoint paths. Docs, the chart and tests depend on these names.
const (
	PathValidatePV  = "/validate/persistentvolumes"
	PathValidatePVC = "/validate/persistentvolumeclaims"
	PathValidateSC  = "/validate/storageclasses"
	PathMutatePV    = "/mutate/persistentvolumes"
	PathMutatePVC   = "/mutate/persistentvolumeclaims"
)

// Handlers are pvguard's admission endpoints by path, for the server to mount (internal/web,
// POST only): validating handlers for PersistentVolumes, PersistentVolumeClaims and
// StorageClasses and mutating handlers for PersistentVolumes and PersistentVolumeClaims, each
// judging with the engine and the view of the moment and counting into metrics (nil: none).
func Handlers(engines EngineSource, views ViewSource, metrics *Metrics, log logr.Logger, opts ...ValidatorOption) map[string]http.Handler {
	v := func(k policy.Kind) http.Handler {
		return Review(NewValidator(k, engines, views, metrics, opts...), log)
	}
	m := func(k policy.Kind) http.Handler { return Review(NewMutator(k, engines, views, metrics), log) }
	return map[string]http.Handler{
		PathValidatePV:  v(policy.KindPersistentVolume),
		PathValidatePVC: v(policy.KindPersistentVolumeClaim),
		PathValidateSC:  v(policy.KindStorageClass),
		PathMutatePV:    m(policy.KindPersistentVolume),
		PathMutatePVC:   m(policy.KindPersistentVolumeClaim),
	}
}

// Review is the endpoint that has h judge AdmissionReviews: it refuses a request that is not one
// at all with a plain HTTP error (reviewGuard), decodes the review itself (reviewHandler), and
// hands the request to h through controller-runtime's admission.Webhook, which recovers panics,
// with each request's logger built lazily (requestLogger).
func Review(h admission.Handler, log logr.Logger) http.Handler {
	return reviewGuard(reviewHandler{wh: AdmissionWebhook(h, log), log: log})
}

// AdmissionWebhook is the controller-runtime admission.Webhook through which Review hands h each
// decoded request: it answers a panic in h with an error (code 500) and completes the response
// (uid, code, patch), with each request's logger built lazily (requestLogger). pvguard test
// judges writes through it too.
func AdmissionWebhook(h admission.Handler, log logr.Logger) *admission.Webhook {
	wh := &admission.Webhook{Handler: h, RecoverPanic: ptr(true)}
	wh.LogConstructor = func(base logr.Logger, req *admission.Request) logr.Logger {
		return requestLogger(log, req)
	}
	return wh
}

func ptr[T any](v T) *T { return &v }
