package e2e

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/test/harness"
	"github.com/pvguard/pvguard/test/testobj"
)

// TestClaimMutationOnlyForClaimsThatNameAVolume: with mutation.alignPreboundClaimClass on, a new
// claim that names a volume of another class, and so gets the default class from the
// DefaultStorageClass admission plugin, is given the volume's class by the mutating webhook. A
// claim that names no volume is never sent to that webhook (the chart's matchCondition): it
// pays for one webhook call, the validating one, not two.
func TestClaimMutationOnlyForClaimsThatNameAVolume(t *testing.T) {
	ctx := context.Background()
	a := admin(t)
	ns := harness.PrefixedNamespace(t, admin(t), "align")
	setConfig(t, baseConfig+"mutation:\n  alignPreboundClaimClass: true\n")

	def := testobj.StorageClass(uniq(t, "sc-default"), "example.com/csi", testobj.DefaultClass)
	harness.Must(t, a.Create(ctx, def), "creating a default class")
	t.Cleanup(func() { _ = a.Delete(context.Background(), def) })
	slow := uniq(t, "pv-slow")
	harness.Must(t, a.Create(ctx, harness.FreshPV(testobj.PV(slow, testobj.Class("slow"), testobj.ClaimRef(ns, "data", "")))), "creating volume")

	harness.Eventually(t, time.Minute, "a pre-bound claim given its volume's class", func(context.Context) error {
		pvc := harness.FreshPVC(testobj.PVC(ns, "data", testobj.ClaimNoClass, testobj.VolumeName(slow)))
		if err := a.Create(ctx, pvc, client.DryRunAll); err != nil {
			return err
		}
		if got := pvc.Spec.StorageClassName; got == nil || *got != "slow" {
			return fmt.Errorf("class %s, want slow (the config or the cache not caught up yet?)", className(got))
		}
		return nil
	})

	mutated, validated := claimReviews(t, "mutate"), claimReviews(t, "validate")
	harness.Must(t, a.Create(ctx, harness.FreshPVC(testobj.PVC(ns, "dynamic", testobj.ClaimNoClass))), "creating a claim that names no volume")
	if got := claimReviews(t, "mutate"); got != mutated {
		t.Errorf("a claim that names no volume was sent to the mutating webhook (%v reviews, was %v)", got, mutated)
	}
	if got := claimReviews(t, "validate"); got != validated+1 {
		t.Errorf("validating reviews of claims: %v, want %v", got, validated+1)
	}

	pvc := harness.FreshPVC(testobj.PVC(ns, "data", testobj.ClaimNoClass, testobj.VolumeName(slow)))
	harness.Must(t, a.Create(ctx, pvc), "creating the pre-bound claim")
	if got := claimReviews(t, "mutate"); got != mutated+1 {
		t.Errorf("mutating reviews of claims after a pre-bound claim: %v, want %v", got, mutated+1)
	}
	if got := pvc.Spec.StorageClassName; got == nil || *got != "slow" {
		t.Errorf("stored class %s, want slow", className(got))
	}
}

func className(c *string) string {
	if c == nil {
		return "<nil>"
	}
	return strconv.Quote(*c)
}

// claimReviews reads pvguard_admission_reviews_total for claims and one handler (mutate or
// validate), summed over operations and decisions, from the suite's pvguard.
func claimReviews(t *testing.T, handler string) float64 {
	t.Helper()
	n, err := harness.MetricSum(tlsClient(), suite.baseURL, "pvguard_admission_reviews_total",
		map[string]string{"kind": "PersistentVolumeClaim", "handler": handler})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
