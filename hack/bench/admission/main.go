// Command admission measures pvguard's admission webhook against a no-op controller-runtime
// webhook on a noisy machine, in two ways:
//
//   - closed loop: -concurrency workers post reviews back to back over one HTTP/2 connection for
//     -round, alternating between pvguard and the no-op server -rounds times, so both see the same
//     background load; it prints the median reviews/s of each and the median of the per-round
//     ratios;
//   - open loop: reviews are sent at a fixed -rate for -duration whatever the answers do (each in
//     its own goroutine, as an apiserver under load would), and it prints the client-observed and
//     server-side latency quantiles.
//
// Each server runs in a child process of its own (as pvguard runs apart from the apiserver that
// calls it), on 127.0.0.1 with pvguard's TLS configuration; -in-process runs both in this process
// instead, sharing its heap and GC with the load generator. Either way they share the machine's
// cores with it. See docs/benchmarks.md.
package main

import (
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/pvguard/pvguard/test/admissionload"
	"github.com/pvguard/pvguard/test/gen"
)

type server struct {
	name string
	url  string
	c    *http.Client
	// record starts recording server-side durations (room for n); recorded stops and returns them.
	record   func(n int) error
	recorded func() ([]time.Duration, error)
}

func main() {
	rate := flag.Int("rate", 1000, "open loop: reviews per second")
	duration := flag.Duration("duration", 10*time.Second, "open loop: how long each case is sent to each server")
	rounds := flag.Int("rounds", 5, "closed loop: alternating rounds per case")
	round := flag.Duration("round", time.Second, "closed loop: length of one round on one server")
	concurrency := flag.Int("concurrency", 16, "closed loop: concurrent requests")
	only := flag.String("cases", "pv-create,pvc-create,pvc-update", "cases to run")
	inProcess := flag.Bool("in-process", false, "run both servers in this process instead of one child process each")
	child := flag.String("child", "", "internal: serve pvguard or noop in this process and print where")
	flag.Parse()

	if *child != "" {
		if err := serveChild(*child); err != nil {
			log.Fatal(err)
		}
		return
	}
	var servers []server
	for _, name := range []string{"pvguard", "noop"} {
		var s server
		var stop func()
		var err error
		if *inProcess {
			s, stop, err = startInProcess(name)
		} else {
			s, stop, err = startChild(name)
		}
		if err != nil {
			log.Fatalf("starting %s: %v", name, err)
		}
		defer stop()
		servers = append(servers, s)
	}
	var cases []gen.AdmissionCase
	for _, c := range gen.AdmissionCases() {
		if slices.Contains(strings.Split(*only, ","), c.Name) {
			cases = append(cases, c)
		}
	}
	for _, c := range cases {
		for _, s := range servers {
			if err := admissionload.Post(s.c, s.url+c.Path, c.Body); err != nil {
				log.Fatal(err)
			}
		}
	}

	where := "one child process per server"
	if *inProcess {
		where = "servers in the load generator's process"
	}
	fmt.Printf("%s, GOMAXPROCS %d, %s, load average %s\n\n", runtime.Version(), runtime.GOMAXPROCS(0), where, loadavg())
	fmt.Printf("closed loop: %d concurrent requests over one HTTP/2 connection, %d alternating rounds of %s\n\n", *concurrency, *rounds, *round)
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "case\tpvguard reviews/s\tnoop reviews/s\tpvguard/noop (median of rounds)\tper round")
	for _, c := range cases {
		var rps [2][]float64
		var ratios []float64
		for r := range *rounds {
			var got [2]float64
			for k := range 2 {
				i := (k + r) % 2 // alternate which server goes first
				got[i] = closedLoop(servers[i], c, *concurrency, *round)
				rps[i] = append(rps[i], got[i])
			}
			ratios = append(ratios, got[0]/got[1])
		}
		var each []string
		for _, r := range ratios {
			each = append(each, fmt.Sprintf("%.2f", r))
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.2f\t%s\n", c.Name, median(rps[0]), median(rps[1]), median(ratios), strings.Join(each, " "))
	}
	tw.Flush()

	fmt.Printf("\nopen loop: %d reviews/s for %s per case and server; latency in microseconds\n\n", *rate, *duration)
	tw = tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "case\tserver\tsent/s\terrors\tp50\tp90\tp99\tp99.9\tmax\tserver p50\tserver p99")
	for _, c := range cases {
		for _, s := range servers {
			res, err := openLoop(s, c, *rate, *duration)
			if err != nil {
				log.Fatal(err)
			}
			q := func(d []time.Duration, x float64) string {
				return fmt.Sprintf("%.0f", float64(admissionload.Quantile(d, x))/float64(time.Microsecond))
			}
			fmt.Fprintf(tw, "%s\t%s\t%.0f\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.Name, s.name, res.sentPerSec, res.errors,
				q(res.client, 0.5), q(res.client, 0.9), q(res.client, 0.99), q(res.client, 0.999), q(res.client, 1),
				q(res.server, 0.5), q(res.server, 0.99))
		}
	}
	tw.Flush()
	fmt.Printf("\nload average at the end: %s\n", loadavg())
}

func loadavg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(data))[:3], " ")
}

// closedLoop posts the case's review from n workers for d and returns reviews/s.
func closedLoop(s server, c gen.AdmissionCase, n int, d time.Duration) float64 {
	var done atomic.Int64
	deadline := time.Now().Add(d)
	start := time.Now()
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				if err := admissionload.Post(s.c, s.url+c.Path, c.Body); err != nil {
					log.Fatal(err)
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	return float64(done.Load()) / time.Since(start).Seconds()
}

type openResult struct {
	sentPerSec     float64
	errors         int64
	client, server []time.Duration
}

// openLoop sends the case's review at a fixed rate for d, each request on its own goroutine, and
// records client-observed latency (from the moment the request is sent) and server-side time.
func openLoop(s server, c gen.AdmissionCase, rate int, d time.Duration) (openResult, error) {
	total := int(d.Seconds() * float64(rate))
	interval := time.Second / time.Duration(rate)
	client := admissionload.NewRecorder(total)
	if err := s.record(total); err != nil {
		return openResult{}, err
	}
	var errs atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for i := range total {
		if wait := time.Until(start.Add(time.Duration(i) * interval)); wait > 0 {
			time.Sleep(wait)
		}
		wg.Go(func() {
			t0 := time.Now()
			if err := admissionload.Post(s.c, s.url+c.Path, c.Body); err != nil {
				errs.Add(1)
				return
			}
			client.Observe(time.Since(t0))
		})
	}
	sent := time.Since(start)
	wg.Wait()
	srv, err := s.recorded()
	if err != nil {
		return openResult{}, err
	}
	return openResult{sentPerSec: float64(total) / sent.Seconds(), errors: errs.Load(), client: client.Durations(), server: srv}, nil
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
