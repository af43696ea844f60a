package e2eha

import (
	"testing"
	"time"

	"github.com/pvguard/pvguard/test/harness"
)

// TestRollingRestartsLoseNoWrite replaces the two replicas one at a time, six times over, as
// the chart's rolling update does (maxSurge 0, maxUnavailable 1: the old pod is stopped while
// its successor starts, and the next one is replaced only once the successor is ready), while
// a normal user's creates and updates of claims and volumes flow through the apiserver. Every
// one of them must be reviewed with the expected outcome: the apiserver's webhook client is
// what would see a replica going away.
func TestRollingRestartsLoseNoWrite(t *testing.T) {
	const (
		secret   = "ha-restart-tls"
		restarts = 6
		steady   = 2 * time.Second // reviews flow between two replacements
	)
	lb, insts := replicas(t, 2, secret, nil)
	hc := replicaHTTP(t, secret)
	ns := harness.PrefixedNamespace(t, h.Client(t, ""), "ha-restart")
	l := startWriteLoad(t, asStorageUser(t), ns, 8)

	current := [2]*harness.Instance{insts[0], insts[1]}
	busy := 0 // replicas stopped after serving reviews: the restarts that could lose one
	var reviews float64
	for r := range restarts {
		time.Sleep(steady)
		slot := r % 2
		old := current[slot]
		served := reviewsServed(t, hc, old)
		if served > 0 {
			busy++
		}
		reviews += served
		began := time.Now()
		stopped := make(chan error, 1)
		go func() { stopped <- old.Stop() }()
		next := startReplica(t, lb, secret, nil)
		routed := waitRouted(t, lb, next)
		if err := <-stopped; err != nil {
			t.Errorf("restart %d: stopping %s: %v", r+1, old.BaseURL, err)
		}
		current[slot] = next
		t.Logf("restart %d: %s (had served %.0f reviews) replaced by %s, routed %v after its start; replacement took %v",
			r+1, backend(old), served, backend(next), routed.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
	}
	time.Sleep(steady)
	l.finish(t)
	if busy < restarts/3 {
		t.Errorf("only %d of the %d replicas stopped had served reviews: the restarts did not interrupt the traffic", busy, restarts)
	}
	for _, inst := range current {
		reviews += reviewsServed(t, hc, inst)
	}
	t.Logf("%d restarts, %d of them of a replica that had served reviews; the replicas counted at least %.0f reviews (a claim or volume create is two: mutating and validating)", restarts, busy, reviews)
}
