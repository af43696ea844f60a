package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/pvguard/pvguard/policy"
)

// Mutator is the mutating admission handler for volumes and claims. It only normalises: it never
// changes what a binding means, so the validating webhook judges what the user asked for.
type Mutator struct {
	kind    policy.Kind
	engines EngineSource
	views   ViewSource
	metrics *Metrics
}

var _ admission.Handler = &Mutator{}

// NewMutator returns the mutating handler for PersistentVolume or PersistentVolumeClaim.
func NewMutator(kind policy.Kind, engines EngineSource, views ViewSource, m *Metrics) *Mutator {
	return &Mutator{kind: kind, engines: engines, views: views, metrics: m}
}

// Handle implements admission.Handler.
func (m *Mutator) Handle(ctx context.Context, req admission.Request) admission.Response {
	start := time.Now()
	resp := m.handle(ctx, req)
	decision := "unchanged"
	switch {
	case len(resp.Patches) > 0:
		decision = "patched"
	case resp.Result != nil && resp.Result.Code >= 400:
		decision = "error"
	}
	m.metrics.observeReview(m.kind, "mutate", req, decision, time.Since(start))
	return resp
}

func (m *Mutator) handle(ctx context.Context, req admission.Request) admission.Response {
	review, resp, ok := decodeReview(m.kind, req)
	if !ok {
		return resp
	}
	if req.Operation == admissionv1.Delete {
		return admission.Allowed("")
	}
	var (
		mutated any
		changed bool
		err     error
	)
	switch m.kind {
	case policy.KindPersistentVolume:
		mutated, changed = review.PV, policy.NormalizeClaimRef(review.PV)
	case policy.KindPersistentVolumeClaim:
		if req.Operation == admissionv1.Create {
			mutated = review.PVC
			changed, err = policy.AlignPreboundClaimClass(review.PVC, m.views.View(ctx), m.engines.Engine().Config())
		}
	}
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("pvguard could not mutate %s: %w", review.Object(), err))
	}
	if !changed {
		return admission.Allowed("")
	}
	raw, err := json.Marshal(mutated)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("encoding %s: %w", review.Object(), err))
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, raw)
}
