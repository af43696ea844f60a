package policy_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/pvguard/pvguard/clusterstate"
	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/test/gen"
)

// BenchmarkAudit audits synthetic clusters of 10k, 50k and 100k objects (half volumes, half
// claims, 5% of pairs with a violation) with the default config and reports objects/s; run with
// -benchmem. Results are in docs/benchmarks.md; nothing here asserts a time.
func BenchmarkAudit(b *testing.B) {
	engine := policy.NewEngine(nil)
	for _, n := range []int{10_000, 50_000, 100_000} {
		st := gen.Inventory(n)
		b.Run(fmt.Sprintf("%dk", n/1000), func(b *testing.B) {
			found, err := engine.Audit(st, gen.InventoryNow, nil)
			if err != nil {
				b.Fatal(err)
			}
			if want := gen.InventoryFindings(n); len(found) != want {
				b.Fatalf("%d findings, want %d: %v", len(found), want, found[:min(len(found), 10)])
			}
			b.ReportAllocs()
			start := time.Now()
			for b.Loop() {
				// A fresh state, so that each audit builds the indexes it reads, as the server's
				// audit of a cache listed again does.
				fresh := clusterstate.New(st.Claims(), st.Volumes(), st.Classes(), st.Nodes())
				if _, err := engine.Audit(fresh, gen.InventoryNow, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/time.Since(start).Seconds(), "objects/s")
			b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(b.N)/float64(n), "ns/object")
		})
	}
}
