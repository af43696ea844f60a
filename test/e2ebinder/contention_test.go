package e2ebinder

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/internal/cli"
	"github.com/pvguard/pvguard/test/harness"
	"github.com/pvguard/pvguard/test/testobj"
	"github.com/pvguard/pvguard/webhook"
)

// TestReviewsDoNotWaitForBinderWrites: while the binder has more writes queued than its
// --kube-api-qps allows (40 pairs at 1 request/s, so its 8 workers wait on the token bucket),
// a review that must read a volume live (a claim naming a volume the cache has not seen) is
// still answered at once, well inside the apiserver's webhook timeout (2 s in the chart). In
// the binder's bucket that read would queue behind the workers' writes.
func TestReviewsDoNotWaitForBinderWrites(t *testing.T) {
	ctx := context.Background()
	ns := harness.Namespace(t, admin(t), "")
	const pairs = 40
	c := admin(t)
	for i := range pairs {
		pv := fresh(ns, testobj.PV(fmt.Sprintf("%s-pv-%02d", ns, i)))
		harness.Must(t, c.Create(ctx, pv), "creating volume "+pv.Name)
		t.Cleanup(func() { _ = c.Delete(context.Background(), pv) })
		harness.Must(t, c.Create(ctx, freshClaim(testobj.PVC(ns, fmt.Sprintf("c-%02d", i)))), "creating claim")
	}
	inst := startBinder(t, "active", func(o *cli.ServeFlags) { o.API.QPS, o.API.Burst = 1, 1 })
	harness.WaitFor(t, time.Minute, "the binder's first writes", func(context.Context) (bool, error) {
		return boundCount(t, ns) > 0 || claimRefs(t, ns) > 0, nil
	})

	hc := h.HTTPSClient()
	hc.Timeout = 3 * time.Second
	for i := range 3 {
		start := time.Now()
		allowed, err := review(hc, inst.BaseURL, ns, fmt.Sprintf("late-%d", i), fmt.Sprintf("%s-not-yet-%d", ns, i))
		if err != nil {
			t.Fatalf("review %d (a live read of a volume not in the cache) while the binder is busy: %v after %v", i, err, time.Since(start).Round(time.Millisecond))
		}
		if !allowed {
			t.Errorf("review %d: not allowed; a claim naming a volume not created yet is only warned about", i)
		}
		time.Sleep(2 * time.Second) // the reviews' own bucket refills one request a second at this QPS
	}
	// The binder was really held by its rate limit all along.
	if n := boundCount(t, ns); n >= pairs {
		t.Fatalf("all %d claims were bound before the reviews ended: the binder was not busy", n)
	}
}

// review posts a CREATE review of claim ns/name naming volume to the validating webhook of
// baseURL and returns whether it was allowed.
func review(hc *http.Client, baseURL, ns, name, volume string) (bool, error) {
	pvc := testobj.PVC(ns, name, testobj.VolumeName(volume))
	pvc.UID = ""
	raw, err := json.Marshal(pvc)
	if err != nil {
		return false, err
	}
	body, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: types.UID("review-" + name), Kind: metav1.GroupVersionKind{Version: "v1", Kind: "PersistentVolumeClaim"},
			Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"},
			Namespace: ns, Name: name, Operation: admissionv1.Create,
			UserInfo: authenticationv1.UserInfo{Username: "tenant"}, Object: runtime.RawExtension{Raw: raw},
		},
	})
	if err != nil {
		return false, err
	}
	resp, err := hc.Post(baseURL+webhook.PathValidatePVC, "application/json", bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return false, err
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(data, &out); err != nil || out.Response == nil {
		return false, fmt.Errorf("HTTP %d, not a review response: %s", resp.StatusCode, data)
	}
	if out.Response.Result != nil && out.Response.Result.Code >= 400 && out.Response.Result.Code != http.StatusForbidden {
		return false, fmt.Errorf("review error %d: %s", out.Response.Result.Code, out.Response.Result.Message)
	}
	return out.Response.Allowed, nil
}

func boundCount(t *testing.T, ns string) int {
	t.Helper()
	var list corev1.PersistentVolumeClaimList
	harness.Must(t, admin(t).List(context.Background(), &list, client.InNamespace(ns)), "listing claims")
	n := 0
	for _, pvc := range list.Items {
		if pvc.Status.Phase == corev1.ClaimBound {
			n++
		}
	}
	return n
}

// claimRefs counts the test's volumes that carry a claimRef (the binder's first write).
func claimRefs(t *testing.T, ns string) int {
	t.Helper()
	var list corev1.PersistentVolumeList
	harness.Must(t, admin(t).List(context.Background(), &list), "listing volumes")
	n := 0
	for _, pv := range list.Items {
		if pv.Spec.StorageClassName == ns && pv.Spec.ClaimRef != nil {
			n++
		}
	}
	return n
}
