package main

import (
	"context"
	"time"

	"github.com/go-logr/logr"

	"github.com/pvguard/pvguard/audit"
	"github.com/pvguard/pvguard/clusterstate"
	"github.com/pvguard/pvguard/internal/clusterview"
	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/test/gen"
	"github.com/pvguard/pvguard/test/storecache"
)

// runnerAudit is the server's full audit (audit.Runner.RunOnce) of st's objects: read from
// informer stores as `pvguard serve` reads its cache (clusterstate.Read through cachelist), its
// findings confirmed on a reader that holds the same objects (the apiserver, which agrees with
// the cache), its results recorded per object and published as the report.
func runnerAudit(st *clusterstate.State) func() (int, error) {
	c := storecache.New(st)
	r := audit.NewRunner(audit.RunnerOptions{Cache: c, Live: clusterview.New(c, storecache.Reader{State: st}).LiveView, Engine: func() *policy.Engine { return policy.NewEngine(nil) },
		Log: logr.Discard(), Now: func() time.Time { return gen.InventoryNow }})
	return func() (int, error) {
		err := r.RunOnce(context.Background())
		found, _, _ := r.LatestFindings()
		return len(found), err
	}
}
