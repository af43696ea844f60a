package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
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
	case len(resp.Patch) > 0:
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
	var ops []patchOp
	switch m.kind {
	case policy.KindPersistentVolume:
		ops = claimRefPatch(review.PV)
	case policy.KindPersistentVolumeClaim:
		if req.Operation == admissionv1.Create {
			changed, err := policy.AlignPreboundClaimClass(review.PVC, m.views.View(ctx), m.engines.Engine().Config())
			if err != nil {
				return admission.Errored(http.StatusInternalServerError, fmt.Errorf("pvguard could not mutate %s: %w", review.Object(), err))
			}
			if changed {
				ops = append(ops, patchOp{Op: "replace", Path: "/spec/storageClassName", Value: *review.PVC.Spec.StorageClassName})
			}
		}
	}
	if len(ops) == 0 {
		return admission.Allowed("")
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("encoding the patch for %s: %w", review.Object(), err))
	}
	pt := admissionv1.PatchTypeJSONPatch
	return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: true, Patch: patch, PatchType: &pt}}
}

// patchOp is one JSON patch operation. The mutator writes exactly the fields it changes rather
// than diffing the object it decoded against the one it was sent: a diff would also remove every
// field this build's API types do not know (fields of a newer apiserver) and rewrite quantities
// and timestamps into their canonical form.
type patchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value string `json:"value"`
}

// claimRefPatch normalizes the volume's claimRef and returns the operations that do the same to
// the object sent.
func claimRefPatch(pv *corev1.PersistentVolume) []patchOp {
	ref := pv.Spec.ClaimRef
	if ref == nil {
		return nil
	}
	kind, apiVersion := ref.Kind, ref.APIVersion
	if !policy.NormalizeClaimRef(pv) {
		return nil
	}
	var ops []patchOp
	if ref.Kind != kind {
		ops = append(ops, patchOp{Op: "add", Path: "/spec/claimRef/kind", Value: ref.Kind})
	}
	if ref.APIVersion != apiVersion {
		ops = append(ops, patchOp{Op: "add", Path: "/spec/claimRef/apiVersion", Value: ref.APIVersion})
	}
	return ops
}
