package webhook_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/pvguard/pvguard/internal/web"
	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/test/testobj"
	"github.com/pvguard/pvguard/webhook"
)

// throttledView is a live view whose every read first waits for a token of the live reads'
// token bucket, as pvguard's live reader does (its rest.Config's RateLimiter), and remembers the
// deadline it was given.
type throttledView struct {
	*testobj.View
	ctx     context.Context
	limiter flowcontrol.RateLimiter

	mu        *sync.Mutex
	deadlines *[]time.Time
}

func (v throttledView) wait() error {
	dl, _ := v.ctx.Deadline()
	v.mu.Lock()
	*v.deadlines = append(*v.deadlines, dl)
	v.mu.Unlock()
	return v.limiter.Wait(v.ctx)
}

func (v throttledView) PersistentVolume(name string) (*corev1.PersistentVolume, error) {
	if err := v.wait(); err != nil {
		return nil, err
	}
	return v.View.PersistentVolume(name)
}

func (v throttledView) PersistentVolumeClaim(ns, name string) (*corev1.PersistentVolumeClaim, error) {
	if err := v.wait(); err != nil {
		return nil, err
	}
	return v.View.PersistentVolumeClaim(ns, name)
}

// throttledViews reads the cache without limit and live through the token bucket.
type throttledViews struct {
	cache   *testobj.View
	limiter flowcontrol.RateLimiter

	mu        sync.Mutex
	deadlines []time.Time
}

func (s *throttledViews) View(context.Context) policy.View      { return s.cache }
func (s *throttledViews) CacheView(context.Context) policy.View { return s.cache }
func (s *throttledViews) FreshView(ctx context.Context) policy.View {
	return throttledView{View: s.cache, ctx: ctx, limiter: s.limiter, mu: &s.mu, deadlines: &s.deadlines}
}

// TestDenialStandsOnTheCacheWhenNoTokenIsThere: a claim naming another namespace's bound volume,
// judged on the cache and denied, is re-read live through the live reads' token bucket, which
// has no token (a flood spent them): the denial is sent at once on the cache's decision with the
// rule's message, a warning that says so and the fallback counted, and the re-read was given a
// deadline within the budget. With a token there, the re-read is done.
func TestDenialStandsOnTheCacheWhenNoTokenIsThere(t *testing.T) {
	owner := testobj.PVC("team-b", "x", testobj.ClaimBoundTo("pv-b"))
	cache := testobj.NewView(owner, testobj.PV("pv-b", testobj.BoundTo(owner)))
	limiter := webhook.NewLiveReadRateLimiter(0.01, 1) // one token, the next in 100 s
	limiter.Accept()
	views := &throttledViews{cache: cache, limiter: limiter}
	reg := prometheus.NewRegistry()
	budget := 300 * time.Millisecond
	h := web.NewServer(web.Options{
		Engines: webhook.StaticEngine{E: policy.NewEngine(nil)}, Views: views, Registry: reg,
		Admission: webhook.Limits{LiveReadBudget: budget},
	}).Handler()
	grab := testobj.Review(t, testobj.PVCKind, "persistentvolumeclaims", admissionv1.Create,
		testobj.PVC("team-a", "grab", testobj.VolumeName("pv-b")), nil, "system:serviceaccount:team-a:flooder")

	start := time.Now()
	code, resp := post(t, h, webhook.PathValidatePVC+"?timeout=2s", "application/json", bytes.NewReader(grab))
	if code != http.StatusOK || resp.Allowed || resp.Result.Code != http.StatusForbidden || !strings.Contains(resp.Result.Message, "PVG004") {
		t.Fatalf("HTTP %d, %+v; want the cache's PVG004 denial", code, resp)
	}
	if len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], "judged on its informer cache") {
		t.Errorf("warnings %q, want one saying the denial stands on the cache", resp.Warnings)
	}
	if n := counterValue(t, reg, "pvguard_admission_live_read_fallbacks_total", map[string]string{"kind": "PersistentVolumeClaim", "reason": "no-token"}); n != 1 {
		t.Errorf("pvguard_admission_live_read_fallbacks_total{reason=no-token} = %v, want 1", n)
	}
	views.mu.Lock()
	if len(views.deadlines) == 0 {
		t.Fatal("the denial was not re-read live")
	}
	for _, dl := range views.deadlines {
		if dl.IsZero() || dl.After(start.Add(budget+50*time.Millisecond)) {
			t.Errorf("a live re-read had deadline %v, want one within the %v budget of %v", dl, budget, start)
		}
	}
	views.deadlines = nil
	views.mu.Unlock()

	// With tokens, the same denial is confirmed live: no warning, no more fallbacks.
	views.limiter = webhook.NewLiveReadRateLimiter(100, 10)
	_, resp = post(t, h, webhook.PathValidatePVC+"?timeout=2s", "application/json", bytes.NewReader(grab))
	views.mu.Lock()
	defer views.mu.Unlock()
	if resp.Allowed || len(resp.Warnings) != 0 || len(views.deadlines) == 0 {
		t.Errorf("with tokens: allowed %v, warnings %q, %d live reads; want the denial confirmed live", resp.Allowed, resp.Warnings, len(views.deadlines))
	}
	if n := counterValue(t, reg, "pvguard_admission_live_read_fallbacks_total", nil); n != 1 {
		t.Errorf("fallbacks = %v after a confirmed denial, want still 1", n)
	}
}

func counterValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	return testobj.Metric(t, reg, name, labels).GetCounter().GetValue()
}

// blockingView's reads (cache misses read live) wait until their context ends, and record its
// deadline.
type blockingView struct {
	*testobj.View
	ctx       context.Context
	deadlines chan time.Time
}

func (v blockingView) PersistentVolume(string) (*corev1.PersistentVolume, error) {
	dl, _ := v.ctx.Deadline()
	v.deadlines <- dl
	<-v.ctx.Done()
	return nil, v.ctx.Err()
}

type blockingViews struct{ deadlines chan time.Time }

func (b blockingViews) View(ctx context.Context) policy.View {
	return blockingView{View: testobj.NewView(), ctx: ctx, deadlines: b.deadlines}
}

// TestReviewIsAnsweredWithinItsTimeout: a review whose read hangs is answered before the
// timeout the apiserver put on the URL (its reads are given a deadline short of it), with a
// refusal: an error answer, never an admission of what was not judged.
func TestReviewIsAnsweredWithinItsTimeout(t *testing.T) {
	views := blockingViews{deadlines: make(chan time.Time, 1)}
	h := web.NewServer(web.Options{Engines: webhook.StaticEngine{E: policy.NewEngine(nil)}, Views: views}).Handler()
	claim := testobj.Review(t, testobj.PVCKind, "persistentvolumeclaims", admissionv1.Create,
		testobj.PVC("team-a", "c", testobj.VolumeName("pv-1")), nil, "alice")
	start := time.Now()
	code, resp := post(t, h, webhook.PathValidatePVC+"?timeout=1s", "application/json", bytes.NewReader(claim))
	dl := <-views.deadlines
	if dl.IsZero() || !dl.Before(start.Add(time.Second)) {
		t.Errorf("the read's deadline is %v, want one before the 1s timeout from %v", dl, start)
	}
	if code != http.StatusOK || resp.Allowed {
		t.Fatalf("HTTP %d, %+v; want an in-band refusal", code, resp)
	}
}

// TestAFloodersRereadsDoNotSpendOthersTokens: a requester past its allowance of live re-reads has
// its denials stand on the cache without touching the shared bucket, so another requester's
// denial is still confirmed live; the fallback is counted as requester-share.
func TestAFloodersRereadsDoNotSpendOthersTokens(t *testing.T) {
	owner := testobj.PVC("team-b", "x", testobj.ClaimBoundTo("pv-b"))
	cache := testobj.NewView(owner, testobj.PV("pv-b", testobj.BoundTo(owner)))
	// The shared bucket holds 8 tokens and gets no more during the test: enough for the
	// flooder's allowance and the bystander, not for ten re-reads of the flood.
	views := &throttledViews{cache: cache, limiter: webhook.NewLiveReadRateLimiter(0.01, 8)}
	reg := prometheus.NewRegistry()
	h := web.NewServer(web.Options{
		Engines: webhook.StaticEngine{E: policy.NewEngine(nil)}, Views: views, Registry: reg,
		Admission: webhook.Limits{RereadsPerRequester: 1}, // a burst of 2, then one a second
	}).Handler()
	grab := func(user string) []byte {
		return testobj.Review(t, testobj.PVCKind, "persistentvolumeclaims", admissionv1.Create,
			testobj.PVC("team-a", "grab", testobj.VolumeName("pv-b")), nil, user)
	}
	reads := func() int {
		views.mu.Lock()
		defer views.mu.Unlock()
		return len(views.deadlines)
	}
	flood := grab("system:serviceaccount:team-a:flooder")
	for range 10 {
		if _, resp := post(t, h, webhook.PathValidatePVC+"?timeout=2s", "application/json", bytes.NewReader(flood)); resp.Allowed {
			t.Fatal("the flood's grab was admitted")
		}
	}
	floodReads := reads()
	if n := counterValue(t, reg, "pvguard_admission_live_read_fallbacks_total", map[string]string{"kind": "PersistentVolumeClaim", "reason": "requester-share"}); n < 7 {
		t.Errorf("fallbacks{reason=requester-share} = %v after 10 grabs with an allowance of 2 at once, want at least 7", n)
	}
	_, resp := post(t, h, webhook.PathValidatePVC+"?timeout=2s", "application/json", bytes.NewReader(grab("bystander")))
	if resp.Allowed || len(resp.Warnings) != 0 || reads() == floodReads {
		t.Errorf("the bystander's denial: allowed %v, warnings %q, live reads %d -> %d; want it confirmed live", resp.Allowed, resp.Warnings, floodReads, reads())
	}
}

// TestAFloodOfStaleLinksIsHeldToItsShare: volume writes whose claimRef names a claim version the
// cache does not hold are re-read live, as denials are, and from the same allowance: a requester
// sending ten of them re-reads at most its burst, the rest answered on the cache (with the
// warning) without taking a token, counted as requester-share.
func TestAFloodOfStaleLinksIsHeldToItsShare(t *testing.T) {
	const uid = "3c9a1f0e-2b7d-4e6a-8f5c-1d2e3f4a5b6c"
	claim := testobj.PVC("team-a", "data", testobj.ClaimUID(uid), testobj.ClaimMeta(func(m *metav1.ObjectMeta) { m.ResourceVersion = "7" }))
	views := &throttledViews{cache: testobj.NewView(claim), limiter: webhook.NewLiveReadRateLimiter(0.01, 100)}
	reg := prometheus.NewRegistry()
	h := web.NewServer(web.Options{
		Engines: webhook.StaticEngine{E: policy.NewEngine(nil)}, Views: views, Registry: reg,
		Admission: webhook.Limits{RereadsPerRequester: 1}, // a burst of 2, then one a second
	}).Handler()
	warned := 0
	for i := range 10 {
		pv := testobj.PV(fmt.Sprintf("pv-%d", i), testobj.ClaimRef("team-a", "data", uid))
		pv.Spec.ClaimRef.ResourceVersion = "8"
		body := testobj.Review(t, testobj.PVKind, "persistentvolumes", admissionv1.Create, pv, nil, "system:serviceaccount:kube-system:some-provisioner")
		_, resp := post(t, h, webhook.PathValidatePV+"?timeout=2s", "application/json", bytes.NewReader(body))
		if !resp.Allowed {
			t.Fatalf("write %d refused: %+v", i, resp.Result)
		}
		if len(resp.Warnings) > 0 {
			warned++
		}
	}
	views.mu.Lock()
	reread := len(views.deadlines)
	views.mu.Unlock()
	if reread == 0 || reread > 3 {
		t.Errorf("%d of 10 stale links re-read live, want 1 to 3 (the requester's burst)", reread)
	}
	if n := counterValue(t, reg, "pvguard_admission_live_read_fallbacks_total", map[string]string{"kind": "PersistentVolume", "reason": "requester-share"}); n < 7 || warned < 7 {
		t.Errorf("fallbacks{reason=requester-share} = %v, %d warned, after 10 stale links with an allowance of 2 at once; want at least 7 each", n, warned)
	}
}
