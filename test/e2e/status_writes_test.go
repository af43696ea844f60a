package e2e

import (
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/internal/devcluster"
	"github.com/pvguard/pvguard/test/harness"
	"github.com/pvguard/pvguard/test/testobj"
)

// protectorUser is kube-controller-manager's pvc-protection controller as it runs with
// --use-service-account-credentials; the apiserver's bootstrap RBAC gives it its upstream rights.
const protectorUser = "system:serviceaccount:kube-system:pvc-protection-controller"

func protector(t *testing.T) *actor {
	return newActor(t, protectorUser, "system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated")
}

// markUnused makes the pvc-protection controller's status write with the
// PersistentVolumeClaimUnusedSinceTime gate on (beta, on by default in 1.37): an update of the
// status subresource (its role may update claims' status, not patch it) that sets the Unused
// condition, True with reason NoPodsUsingPVC when no pod uses the claim, False with PodUsingPVC
// once one does, leaving the rest of the claim as it read it.
func markUnused(ctx context.Context, c client.Client, pvc *corev1.PersistentVolumeClaim, unused bool) error {
	if err := c.Get(ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil {
		return err
	}
	cond := corev1.PersistentVolumeClaimCondition{Type: "Unused", Status: corev1.ConditionFalse, Reason: "PodUsingPVC", LastTransitionTime: metav1.Now()}
	if unused {
		cond.Status, cond.Reason = corev1.ConditionTrue, "NoPodsUsingPVC"
	}
	pvc.Status.Conditions = append(slices.DeleteFunc(pvc.Status.Conditions, func(c corev1.PersistentVolumeClaimCondition) bool { return c.Type == "Unused" }), cond)
	return c.Status().Update(ctx, pvc)
}

func statusPatch(body string) client.Patch {
	return client.RawPatch(types.MergePatchType, []byte(body))
}

// validations reads pvguard_admission_reviews_total of the validating handler for one kind,
// summed over operations and decisions (both webhooks of a kind, people's and components', call
// the same handler).
func validations(t *testing.T, kind string) float64 {
	t.Helper()
	n, err := harness.MetricSum(tlsClient(), suite.baseURL, "pvguard_admission_reviews_total",
		map[string]string{"kind": kind, "handler": "validate"})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestStatusWritesPvguardNeedNotJudge: the chart's generated matchConditions keep from pvguard
// the status writes that change nothing a rule reads. The pvc-protection controller's Unused
// condition, written both ways, the resizer's allocatedResources and a volume's status message
// cost no review; a status write that changes a claim's or a volume's phase, a claim's capacity
// or its labels, and any write of the object itself, are still judged.
func TestStatusWritesPvguardNeedNotJudge(t *testing.T) {
	ctx := context.Background()
	a, p := admin(t), protector(t)
	ns := harness.PrefixedNamespace(t, a, "status")
	pvc := harness.FreshPVC(testobj.PVC(ns, "data"))
	harness.Must(t, a.Create(ctx, pvc), "creating the claim")
	pv := harness.FreshPV(testobj.PV(uniq(t, "pv")))
	harness.Must(t, a.Create(ctx, pv), "creating the volume")
	t.Cleanup(func() { _ = a.Delete(context.Background(), pv) })

	claims, volumes := validations(t, "PersistentVolumeClaim"), validations(t, "PersistentVolume")
	step := func(what string, write func() error, claimReviews, volumeReviews float64) {
		t.Helper()
		harness.Must(t, write(), what)
		claims, volumes = claims+claimReviews, volumes+volumeReviews
		if got := validations(t, "PersistentVolumeClaim"); got != claims {
			t.Errorf("%s: pvguard has judged %v claim writes, want %v", what, got, claims)
			claims = got
		}
		if got := validations(t, "PersistentVolume"); got != volumes {
			t.Errorf("%s: pvguard has judged %v volume writes, want %v", what, got, volumes)
			volumes = got
		}
	}
	status := func(c client.Client, obj client.Object, patch client.Patch) func() error {
		return func() error { return c.Status().Patch(ctx, obj, patch) }
	}
	unused := func(u bool) func() error { return func() error { return markUnused(ctx, p, pvc, u) } }
	step("the pvc-protection controller marks the claim Unused", unused(true), 0, 0)
	step("the pvc-protection controller marks the claim used", unused(false), 0, 0)
	step("the resizer's allocatedResources", status(a, pvc, statusPatch(`{"status":{"allocatedResources":{"storage":"2Gi"}}}`)), 0, 0)
	step("a volume's status message", status(a, pv, statusPatch(`{"status":{"message":"checked"}}`)), 0, 0)
	// What the rules read is still judged.
	step("a claim's phase", status(a, pvc, statusPatch(`{"status":{"phase":"Lost"}}`)), 1, 0)
	step("a claim's capacity", status(a, pvc, statusPatch(`{"status":{"capacity":{"storage":"1Gi"}}}`)), 1, 0)
	step("a claim's labels, through the status subresource", status(a, pvc, statusPatch(`{"metadata":{"labels":{"app":"db"}}}`)), 1, 0)
	step("a volume's phase", status(a, pv, statusPatch(`{"status":{"phase":"Available"}}`)), 0, 1)
	step("a write of the claim itself", func() error { return a.Patch(ctx, pvc, statusPatch(`{"metadata":{"annotations":{"note":"x"}}}`)) }, 1, 0)
}

// TestStatusWritesPvguardNeedNotJudgeDoNotWaitForIt: with every webhook of the chart pointed at
// a pvguard that never answers (failurePolicy Fail for people, Ignore for components, a 2 s
// timeout), the pvc-protection controller's condition writes and a person's reach it not at all:
// the person's succeeds under Fail, which a call would have failed after the timeout. A phase
// write, the control, reaches it and fails after the timeout.
func TestStatusWritesPvguardNeedNotJudgeDoNotWaitForIt(t *testing.T) {
	ctx := context.Background()
	a, p := admin(t), protector(t)
	ns := harness.PrefixedNamespace(t, a, "hung")
	pvc := harness.FreshPVC(testobj.PVC(ns, "data"))
	harness.Must(t, a.Create(ctx, pvc), "creating the claim")

	var calls atomic.Int64
	release := make(chan struct{})
	hung := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		select { // never answers: the apiserver gives up at the webhook's timeout
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(func() {
		close(release)
		hung.Close()
		harness.Must(t, devcluster.InstallWebhooks(context.Background(), suite.cfg, devcluster.WebhookOptions{BaseURL: suite.baseURL, CABundle: suite.caPEM}),
			"pointing the webhooks back at the suite's pvguard")
	})
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: hung.Certificate().Raw})
	harness.Must(t, devcluster.InstallWebhooks(ctx, suite.cfg, devcluster.WebhookOptions{
		BaseURL: hung.URL, CABundle: ca, NoWait: true,
		Values: map[string]any{"webhook": map[string]any{"timeoutSeconds": 2}},
	}), "pointing the webhooks at a pvguard that never answers")

	timed := func(what string, write func() error) (time.Duration, error) {
		t.Helper()
		start := time.Now()
		err := write()
		d := time.Since(start)
		t.Logf("%s: %v after %v, %d calls to the hung pvguard so far", what, err, d.Round(time.Millisecond), calls.Load())
		return d, err
	}
	status := func(c client.Client, patch client.Patch) func() error {
		return func() error { return c.Status().Patch(ctx, pvc, patch) }
	}
	for _, w := range []struct {
		what  string
		write func() error
	}{
		{"the pvc-protection controller marks the claim Unused", func() error { return markUnused(ctx, p, pvc, true) }},
		{"the pvc-protection controller marks the claim used", func() error { return markUnused(ctx, p, pvc, false) }},
		{"a person writes a condition (failurePolicy Fail)", status(a, statusPatch(`{"status":{"conditions":[{"type":"Checked","status":"True"}]}}`))},
	} {
		if _, err := timed(w.what, w.write); err != nil {
			t.Errorf("%s: %v", w.what, err)
		}
		if n := calls.Load(); n != 0 {
			t.Fatalf("%s: the hung pvguard was called %d times, want 0", w.what, n)
		}
	}

	// The control: the same apiserver does call the hung webhook for a write it must judge.
	if _, err := timed("a person writes the claim's phase (failurePolicy Fail)", status(a, statusPatch(`{"status":{"phase":"Lost"}}`))); err == nil || !strings.Contains(err.Error(), "pvguard") {
		t.Errorf("a phase write with pvguard hung under failurePolicy Fail: %v, want the webhook's failure", err)
	}
	if calls.Load() == 0 {
		t.Error("the phase write did not reach the hung pvguard")
	}
	var got corev1.PersistentVolumeClaim
	harness.Must(t, a.Get(ctx, client.ObjectKeyFromObject(pvc), &got), "reading the claim")
	if !hasCondition(got.Status.Conditions, "Checked") || got.Status.Phase == corev1.ClaimLost {
		t.Errorf("stored status %+v: want the condition written and the phase write refused", got.Status)
	}
}

func hasCondition(cs []corev1.PersistentVolumeClaimCondition, typ string) bool {
	for _, c := range cs {
		if string(c.Type) == typ {
			return true
		}
	}
	return false
}
