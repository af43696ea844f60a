package cli

import (
	"context"
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/pvguard/pvguard/internal/clusterview"
	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/test/testobj"
)

// TestAuditReadsTheCacheOnly: the audit runner's incremental audits read through a view that
// takes a miss of the cache for an absence. The claims of Released volumes are gone; read live,
// each would be a request at the live reads' rate, holding every later audit back for minutes at
// 100,000 pairs. Its confirmations read live.
func TestAuditReadsTheCacheOnly(t *testing.T) {
	ctx := context.Background()
	cache := fake.NewClientBuilder().Build()
	views := clusterview.New(cache, testobj.FailingReader{Source: "the apiserver"})
	o := auditOptions(AuditOptions{}, cache, views, func() *policy.Engine { return policy.NewEngine(nil) }, prometheus.NewRegistry(), logr.Discard())
	if pvc, err := o.View(ctx).PersistentVolumeClaim("team-a", "gone"); err != nil || pvc != nil {
		t.Errorf("the audit's view of a claim the cache lacks: %v (%v), want none, not read live", pvc, err)
	}
	if _, err := o.Live(ctx).PersistentVolumeClaim("team-a", "gone"); err == nil {
		t.Error("the audit's confirmations did not read live")
	}
}
