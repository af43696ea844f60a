package web_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"

	"github.com/pvguard/pvguard/internal/web"
	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/test/testobj"
	"github.com/pvguard/pvguard/webhook"
)

// TestAdmissionRequestsAreTimedWhole: pvguard_admission_request_duration_seconds times each
// admission request from its handler's start to its answer, so a review that waited in the fair
// queue behind another counts its wait there, while pvguard_admission_review_duration_seconds
// times only its decision; a request refused before any decision is timed too, by its status.
func TestAdmissionRequestsAreTimedWhole(t *testing.T) {
	const hold = 150 * time.Millisecond // the bound both histograms have above it is 0.5 s; below, 0.1 s
	view := &blockingView{View: testobj.NewView(), entered: make(chan struct{}, 1), release: make(chan struct{})}
	reg := prometheus.NewRegistry()
	q, err := webhook.NewFairQueue(webhook.FairQueueOptions{Concurrency: 1, PerRequester: 1, QueueLength: 4, MaxWaiting: 4}, reg)
	if err != nil {
		t.Fatal(err)
	}
	h := web.NewServer(web.Options{Engines: webhook.StaticEngine{E: policy.NewEngine(nil)}, Views: webhook.StaticView{V: view},
		Registry: reg, Admission: webhook.Limits{Queue: q}}).Handler()
	post := func(user string) int {
		body := testobj.Review(t, testobj.PVCKind, "persistentvolumeclaims", admissionv1.Create, testobj.PVC("team-a", "c", testobj.VolumeName("pv-1")), nil, user)
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, webhook.PathValidatePVC, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	var wg sync.WaitGroup
	codes := make([]int, 2)
	wg.Add(1)
	go func() { defer wg.Done(); codes[0] = post("alice") }() // holds the one seat
	<-view.entered
	wg.Add(1)
	go func() { defer wg.Done(); codes[1] = post("bob") }() // waits in the queue behind it
	waitFor(t, func() bool {
		return testobj.Metric(t, reg, "pvguard_admission_reviews_waiting", nil).GetGauge().GetValue() == 1
	})
	time.Sleep(hold)
	close(view.release)
	wg.Wait()
	if codes[0] != http.StatusOK || codes[1] != http.StatusOK {
		t.Fatalf("reviews answered %v, want 200 each", codes)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, webhook.PathValidatePVC, bytes.NewReader([]byte("{}")))) // no Content-Type
	if rec.Code != http.StatusUnsupportedMediaType {
		t.Fatalf("review without a Content-Type: HTTP %d, want 415", rec.Code)
	}

	whole := histogramOver(t, reg, "pvguard_admission_request_duration_seconds", map[string]string{"code": "200"}, 0.1)
	decided := histogramOver(t, reg, "pvguard_admission_review_duration_seconds", nil, 0.1)
	if whole != [2]uint64{2, 2} {
		t.Errorf("whole requests: %d of %d over 0.1 s, want both (the held one and the one queued behind it)", whole[0], whole[1])
	}
	if decided != [2]uint64{1, 2} {
		t.Errorf("decisions: %d of %d over 0.1 s, want only the held one's", decided[0], decided[1])
	}
	if refused := histogramOver(t, reg, "pvguard_admission_request_duration_seconds", map[string]string{"code": "415"}, 0.1); refused[1] != 1 {
		t.Errorf("requests refused with 415: %d timed, want 1", refused[1])
	}
}

// histogramOver is {observations above the bucket bound le, all observations} of the first
// series of histogram name carrying labels.
func histogramOver(t *testing.T, g prometheus.Gatherer, name string, labels map[string]string, le float64) (n [2]uint64) {
	t.Helper()
	h := testobj.Metric(t, g, name, labels).GetHistogram()
	under := uint64(0)
	for _, b := range h.GetBucket() {
		if b.GetUpperBound() == le {
			under = b.GetCumulativeCount()
		}
	}
	return [2]uint64{h.GetSampleCount() - under, h.GetSampleCount()}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10 s")
		}
	}
}
