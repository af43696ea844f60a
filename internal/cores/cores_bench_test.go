package cores_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pvguard/pvguard/internal/cores"
)

// BenchmarkRequestBesideComputations: requests to an HTTP server (a review's trip, without the
// review) while two computations that never block run beside it on two Ps, with and without
// seats (one seat: one P left free). It reports the requests' p99 and slowest in ms, and how many
// steps the computations made a millisecond (the work the seats cost them).
//
//	go test ./internal/cores -run '^$' -bench RequestBesideComputations -benchtime 2000x
func BenchmarkRequestBesideComputations(b *testing.B) {
	for _, tc := range []struct {
		name  string
		seats *cores.Seats
	}{
		{"no seats", nil},
		{"one seat", cores.New(1)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				_, _ = w.Write([]byte("ok"))
			}))
			defer srv.Close()
			ctx, cancel := context.WithCancel(b.Context())
			var wg sync.WaitGroup
			var steps [2]int64
			start := time.Now()
			for i := range steps {
				wg.Go(func() {
					x := uint64(1)
					for ctx.Err() == nil {
						// A unit of work on a seat, as a binder sync or an explanation takes one:
						// about 200 µs of 200 steps.
						_, give := tc.seats.Take(ctx)
						for range 200 {
							for range 1000 {
								x = x*6364136223846793005 + 1442695040888963407
							}
							steps[i]++
						}
						give()
					}
					_ = x
				})
			}
			c := srv.Client()
			d := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for b.Loop() {
				t := time.Now()
				resp, err := c.Get(srv.URL)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				d = append(d, time.Since(t))
			}
			b.StopTimer()
			cancel()
			wg.Wait()
			slices.Sort(d)
			ms := func(x time.Duration) float64 { return float64(x) / float64(time.Millisecond) }
			b.ReportMetric(ms(d[len(d)*99/100]), "p99-ms")
			b.ReportMetric(ms(d[len(d)-1]), "max-ms")
			b.ReportMetric(float64(steps[0]+steps[1])/ms(time.Since(start)), "steps/ms")
		})
	}
}
