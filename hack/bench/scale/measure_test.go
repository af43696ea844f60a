package main

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	gometrics "runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

func TestBucketQuantile(t *testing.T) {
	inf := math.Inf(1)
	before := []bucket{{0.1, 10}, {0.5, 10}, {1, 10}, {inf, 10}}
	for _, c := range []struct {
		name  string
		after []bucket
		q     float64
		want  float64
	}{
		{"nothing observed between the reads", before, 0.5, 0},
		{"the median in the first bucket, from 0", []bucket{{0.1, 20}, {0.5, 20}, {1, 20}, {inf, 20}}, 0.5, 0.05},
		{"halfway into the second bucket", []bucket{{0.1, 15}, {0.5, 25}, {1, 30}, {inf, 30}}, 0.5, 0.3},
		{"the p99 in the third", []bucket{{0.1, 15}, {0.5, 25}, {1, 30}, {inf, 30}}, 0.99, 0.5 + 0.5*(19.8-15)/5},
		{"in +Inf: the highest finite bound", []bucket{{0.1, 10}, {0.5, 10}, {1, 10}, {inf, 14}}, 0.5, 1},
	} {
		if got := bucketQuantile(before, c.after, c.q); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

func TestRise(t *testing.T) {
	for _, c := range []struct {
		peak, base uint64
		want       float64
	}{
		{110, 100, 10},
		{100, 100, 0},
		{90, 100, -10},
		{100, 0, 0}, // no sample before: no rise to speak of
	} {
		if got := rise(c.peak, c.base); got != c.want {
			t.Errorf("rise(%d, %d) = %v, want %v", c.peak, c.base, got, c.want)
		}
	}
}

func TestOverCountsAboveTheBound(t *testing.T) {
	scrape := func(text string) metrics {
		t.Helper()
		parser := expfmt.NewTextParser(model.UTF8Validation)
		families, err := parser.TextToMetricFamilies(strings.NewReader(text))
		if err != nil {
			t.Fatal(err)
		}
		return metrics(families)
	}
	// Two series (kinds): the counts are summed over them.
	const h = `# TYPE pvguard_admission_review_duration_seconds histogram
pvguard_admission_review_duration_seconds_bucket{kind="pv",le="0.005"} %d
pvguard_admission_review_duration_seconds_bucket{kind="pv",le="0.01"} %d
pvguard_admission_review_duration_seconds_bucket{kind="pv",le="0.025"} %d
pvguard_admission_review_duration_seconds_bucket{kind="pv",le="+Inf"} %d
pvguard_admission_review_duration_seconds_sum{kind="pv"} 1
pvguard_admission_review_duration_seconds_count{kind="pv"} %d
pvguard_admission_review_duration_seconds_bucket{kind="pvc",le="0.005"} %d
pvguard_admission_review_duration_seconds_bucket{kind="pvc",le="0.01"} %d
pvguard_admission_review_duration_seconds_bucket{kind="pvc",le="0.025"} %d
pvguard_admission_review_duration_seconds_bucket{kind="pvc",le="+Inf"} %d
pvguard_admission_review_duration_seconds_sum{kind="pvc"} 1
pvguard_admission_review_duration_seconds_count{kind="pvc"} %d
`
	before := scrape(fmt.Sprintf(h, 10, 10, 11, 11, 11, 5, 5, 5, 5, 5))
	after := scrape(fmt.Sprintf(h, 100, 103, 105, 107, 107, 50, 52, 53, 53, 53))
	// pv: 96 more, 93 within 10 ms; pvc: 48 more, 47 within 10 ms.
	if slow, all, bound := over(before, after, admissionDurationMetric, slowBound); slow != 4 || all != 144 || bound != 0.01 {
		t.Fatalf("over = %d of %d above %v, want 4 of 144 above 0.01", slow, all, bound)
	}
	// Quantiles by bucket: of 144, 135 within 5 ms, 140 within 10, 142 within 25.
	for _, tc := range []struct{ q, want float64 }{{0.9, 0.005}, {0.97, 0.01}, {0.98, 0.025}, {0.99, math.Inf(1)}} {
		if got := quantileBound(before, after, admissionDurationMetric, tc.q); got != tc.want {
			t.Errorf("quantileBound(%v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	if got := quantileBound(before, after, admissionRequestMetric, 0.99); got != 0 {
		t.Errorf("quantileBound of an absent histogram = %v, want 0", got)
	}
	// A histogram without a 10 ms bound (the scheduler's) counts above the next one and says so.
	const sched = `# TYPE go_sched_latencies_seconds histogram
go_sched_latencies_seconds_bucket{le="0.0009175039999999999"} %d
go_sched_latencies_seconds_bucket{le="0.010485759999999998"} %d
go_sched_latencies_seconds_bucket{le="0.11744051199999998"} %d
go_sched_latencies_seconds_bucket{le="+Inf"} %d
go_sched_latencies_seconds_sum 1
go_sched_latencies_seconds_count %d
`
	before = scrape(fmt.Sprintf(sched, 1000, 1010, 1012, 1012, 1012))
	after = scrape(fmt.Sprintf(sched, 5000, 5100, 5130, 5131, 5131))
	if slow, all, bound := over(before, after, schedLatencyMetric, slowBound); slow != 29 || all != 4119 || bound != 0.010485759999999998 {
		t.Fatalf("over (scheduler) = %d of %d above %v, want 29 of 4119 above 0.010485759999999998", slow, all, bound)
	}
	// An absent histogram counts nothing.
	if slow, all, _ := over(before, after, admissionRequestMetric, slowBound); slow != 0 || all != 0 {
		t.Fatalf("over (absent) = %d of %d, want none", slow, all)
	}
}

// TestBusiestNamesTheCommandsThatUsedTheMostCPU: processes of one command are summed, the
// server's own is left out, one that started meanwhile counts whole, and idle ones are not named.
func TestBusiestNamesTheCommandsThatUsedTheMostCPU(t *testing.T) {
	proc := func(comm string, cpu float64) struct {
		comm string
		cpu  float64
	} {
		return struct {
			comm string
			cpu  float64
		}{comm, cpu}
	}
	before := processCPU{1: proc("kube-apiserver", 10), 2: proc("etcd", 5), 3: proc("pvguard", 1), 4: proc("sleep", 1)}
	after := processCPU{1: proc("kube-apiserver", 16.1), 2: proc("etcd", 7.95), 3: proc("pvguard", 5), 4: proc("sleep", 1), 5: proc("etcd", 0.5), 6: proc("scale", 0.2)}
	if got, want := busiest(before, after, 3, 2), "kube-apiserver 6.10 s, etcd 3.45 s"; got != want {
		t.Errorf("busiest = %q, want %q", got, want)
	}
	if got, want := busiest(before, after, 3, 5), "kube-apiserver 6.10 s, etcd 3.45 s, scale 0.20 s"; got != want {
		t.Errorf("busiest = %q, want %q", got, want)
	}
}

func TestReadAPIRuntimeReadsTheCollectorsShare(t *testing.T) {
	page := func(gc, cycles float64) string {
		return fmt.Sprintf(`# TYPE go_cpu_classes_gc_total_cpu_seconds_total counter
go_cpu_classes_gc_total_cpu_seconds_total %v
# TYPE go_gc_cycles_total_gc_cycles_total counter
go_gc_cycles_total_gc_cycles_total %v
# TYPE go_gc_heap_goal_bytes gauge
go_gc_heap_goal_bytes 2147483648
# TYPE go_gc_heap_live_bytes gauge
go_gc_heap_live_bytes 1073741824
`, gc, cycles)
	}
	body := page(10, 100)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, body)
	}))
	defer srv.Close()
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	before, err := readAPIRuntime(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	body = page(12.5, 103)
	after, err := readAPIRuntime(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	got := after.since(before)
	want := apiRuntime{GCCPUSeconds: 2.5, GCCycles: 3, HeapGoalBytes: 2 << 30, HeapLiveBytes: 1 << 30}
	if got != want {
		t.Errorf("spent %+v, want %+v", got, want)
	}
	if s := got.String(); !strings.Contains(s, "ran 3 cycles, 2.50 s of CPU") || !strings.Contains(s, "1024 MiB") {
		t.Errorf("said %q", s)
	}
}

func TestHistogramOverCountsBucketsFromTheBound(t *testing.T) {
	h := func(counts ...uint64) *gometrics.Float64Histogram {
		return &gometrics.Float64Histogram{Counts: counts, Buckets: []float64{0, 0.004, 0.008, 0.016, 0.032}}
	}
	// 0.008–0.016 straddles 10 ms: not counted slow; 0.016 is the first bound at or above it.
	slow, all, bound := histogramOver(h(10, 5, 1, 0), h(30, 9, 4, 2), slowBound)
	if slow != 2 || all != 29 || bound != 0.016 {
		t.Errorf("histogramOver = %d of %d from %v, want 2 of 29 from 0.016", slow, all, bound)
	}
	if slow, all, _ := histogramOver(nil, h(1, 1, 1, 1), slowBound); slow != 0 || all != 0 {
		t.Errorf("without a first read: %d of %d, want nothing", slow, all)
	}
}

func TestMeasureReviewsPacesTheReviews(t *testing.T) {
	var sent []time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sent = append(sent, time.Now())
		fmt.Fprint(w, `{"response":{"allowed":true}}`)
	}))
	defer srv.Close()
	cases := []reviewCase{{Name: "pvc-create", path: "/validate"}}
	for _, rate := range []float64{0, 200} {
		sent = nil
		out, err := measureReviews(context.Background(), srv.Client(), srv.URL, cases, 2, 20, rate)
		if err != nil {
			t.Fatal(err)
		}
		if len(out) != 1 || out[0].Requests != 20 || len(sent) != 22 {
			t.Fatalf("rate %v: %+v after %d reviews, want one case of 20 after 22", rate, out, len(sent))
		}
		// Paced, the 20 timed reviews are due 5 ms apart: never sooner (a sleep does not end
		// early), so the last is sent at least 95 ms after the first.
		if took := sent[21].Sub(sent[2]); rate > 0 && took < 95*time.Millisecond {
			t.Errorf("rate %v: the timed reviews were sent within %v, want at least 95ms", rate, took)
		}
	}
}
