package webhook_test

import (
	"encoding/json"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/test/gen"
	"github.com/pvguard/pvguard/webhook"
)

// TestDecodeReviewLeavesManagedFieldsUnread: a reviewed object is decoded whole except for
// metadata.managedFields, which nothing reads; the skipped value must still be JSON.
func TestDecodeReviewLeavesManagedFieldsUnread(t *testing.T) {
	claim := gen.PreboundClaim()
	if len(claim.ManagedFields) == 0 {
		t.Fatal("the fixture has no managedFields to skip")
	}
	raw, err := json.Marshal(claim)
	if err != nil {
		t.Fatal(err)
	}
	request := func(raw []byte) admission.Request {
		return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			UID: "1", Operation: admissionv1.Create, Name: claim.Name, Namespace: claim.Namespace,
			Kind:   metav1.GroupVersionKind{Version: "v1", Kind: "PersistentVolumeClaim"},
			Object: runtime.RawExtension{Raw: raw},
		}}
	}

	r, resp, ok := webhook.DecodeReview(policy.KindPersistentVolumeClaim, request(raw))
	if !ok {
		t.Fatalf("refused: %+v", resp.Result)
	}
	want := claim.DeepCopy()
	want.ManagedFields = nil
	if !apiequality.Semantic.DeepEqual(r.PVC, want) {
		t.Fatalf("decoded\n%+v\nwant\n%+v", r.PVC, want)
	}

	managed := strings.Index(string(raw), `"managedFields":[`)
	if managed < 0 {
		t.Fatalf("no managedFields in %s", raw)
	}
	at := managed + len(`"managedFields":[`)
	for name, broken := range map[string]string{
		"unterminated":   string(raw[:at]) + `{"manager":"x"` + string(raw[at:]),
		"invalid UTF-8":  string(raw[:at]) + `{"manager":"` + "\xff" + `"},` + string(raw[at:]),
		"not a JSON key": string(raw[:at]) + `{manager:"x"},` + string(raw[at:]),
	} {
		if _, _, ok := webhook.DecodeReview(policy.KindPersistentVolumeClaim, request([]byte(broken))); ok {
			t.Errorf("%s managedFields: decoded", name)
		}
	}
}
