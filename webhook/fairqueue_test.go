package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

func newTestQueue(t *testing.T, o FairQueueOptions) *FairQueue {
	t.Helper()
	q, err := NewFairQueue(o, nil)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// occupant holds a seat of q as requester until release is closed; started is closed once it
// holds it.
type occupant struct {
	started, release chan struct{}
	refused          chan string
}

func occupy(q *FairQueue, ctx context.Context, requester string, order *[]string, mu *sync.Mutex) *occupant {
	o := &occupant{started: make(chan struct{}), release: make(chan struct{}), refused: make(chan string, 1)}
	go func() {
		o.refused <- q.Do(ctx, requester, func() {
			if order != nil {
				mu.Lock()
				*order = append(*order, requester)
				mu.Unlock()
			}
			close(o.started)
			<-o.release
		})
	}()
	return o
}

// waitFor polls until cond holds (the queue's state is reached through goroutines).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
	}
}

// started waits until o holds its seat.
func started(t *testing.T, o *occupant) {
	t.Helper()
	select {
	case <-o.started:
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for a review to be given a seat")
	}
}

func (q *FairQueue) waitingNow() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.waiting
}

// TestFairQueueServesAnotherRequesterNext: with every seat held by a flooding requester and more
// of its reviews waiting, a second requester's review gets the next free seat, ahead of the
// flood's backlog, and after it the turns alternate.
func TestFairQueueServesAnotherRequesterNext(t *testing.T) {
	q := newTestQueue(t, FairQueueOptions{Concurrency: 2, PerRequester: 2, QueueLength: 10, MaxWaiting: 20})
	ctx := context.Background()
	var (
		mu    sync.Mutex
		order []string
	)
	held := []*occupant{occupy(q, ctx, "flooder", nil, nil), occupy(q, ctx, "flooder", nil, nil)}
	for _, o := range held {
		started(t, o)
	}
	var backlog []*occupant
	for range 5 {
		backlog = append(backlog, occupy(q, ctx, "flooder", &order, &mu))
	}
	waitFor(t, "the flood's backlog waits", func() bool { return q.waitingNow() == 5 })
	bystander := occupy(q, ctx, "bystander", &order, &mu)
	waitFor(t, "the bystander waits", func() bool { return q.waitingNow() == 6 })
	second := occupy(q, ctx, "bystander", &order, &mu)
	waitFor(t, "the bystander waits too", func() bool { return q.waitingNow() == 7 })

	close(held[0].release)
	started(t, bystander)
	close(held[1].release)
	waitFor(t, "the second seat is handed on", func() bool { mu.Lock(); defer mu.Unlock(); return len(order) == 2 })
	close(bystander.release)
	waitFor(t, "the first seat is handed on again", func() bool { mu.Lock(); defer mu.Unlock(); return len(order) == 3 })
	mu.Lock()
	got := fmt.Sprint(order)
	mu.Unlock()
	if got != "[bystander flooder bystander]" {
		t.Errorf("seats went to %s, want the bystander first and then turns in round robin [bystander flooder bystander]", got)
	}
	close(second.release)
	for _, o := range backlog {
		close(o.release)
	}
	for _, o := range append(append(held, backlog...), bystander, second) {
		if r := <-o.refused; r != "" {
			t.Errorf("a review was refused (%s), want every one judged", r)
		}
	}
	if q.free != 2 || len(q.flows) != 0 || q.turns.Len() != 0 {
		t.Errorf("after the flood: %d seats free, flows %v, %d in turn; want 2 free and nothing left", q.free, q.flows, q.turns.Len())
	}
}

// TestFairQueueLeavesSeatsToOthers: a requester holds at most PerRequester seats even when more
// are free, so a newcomer finds one at once.
func TestFairQueueLeavesSeatsToOthers(t *testing.T) {
	q := newTestQueue(t, FairQueueOptions{Concurrency: 3, PerRequester: 2, QueueLength: 10, MaxWaiting: 20})
	ctx := context.Background()
	a, b := occupy(q, ctx, "flooder", nil, nil), occupy(q, ctx, "flooder", nil, nil)
	started(t, a)
	<-b.started
	c := occupy(q, ctx, "flooder", nil, nil)
	waitFor(t, "the third review of the flood waits", func() bool { return q.waitingNow() == 1 })
	other := occupy(q, ctx, "bystander", nil, nil)
	<-other.started // the free seat, at once
	close(other.release)
	close(a.release)
	started(t, c)
	close(b.release)
	close(c.release)
	for _, o := range []*occupant{a, b, c, other} {
		if r := <-o.refused; r != "" {
			t.Errorf("refused %s", r)
		}
	}
}

// TestFairQueueBoundsWaiting: a requester's queue holds QueueLength reviews, the queue as a
// whole MaxWaiting; more are refused at once, and a review whose wait budget ends leaves the
// queue without its seat (no seat is lost).
func TestFairQueueBoundsWaiting(t *testing.T) {
	q := newTestQueue(t, FairQueueOptions{Concurrency: 1, PerRequester: 1, QueueLength: 2, MaxWaiting: 3})
	ctx := context.Background()
	seat := occupy(q, ctx, "flooder", nil, nil)
	started(t, seat)
	var waiters []*occupant
	for i := range 2 {
		waiters = append(waiters, occupy(q, ctx, "flooder", nil, nil))
		waitFor(t, "the flood's reviews wait", func() bool { return q.waitingNow() == i+1 })
	}
	if r := q.Do(ctx, "flooder", func() { t.Error("ran a review beyond the queue length") }); r != queueFull {
		t.Errorf("third waiting review of one requester: %q, want %q", r, queueFull)
	}
	short, cancel := context.WithCancel(ctx)
	timedOut := occupy(q, short, "bystander", nil, nil)
	waitFor(t, "the bystander waits", func() bool { return q.waitingNow() == 3 })
	if r := q.Do(ctx, "third", func() { t.Error("ran a review beyond MaxWaiting") }); r != queueFull {
		t.Errorf("a review beyond MaxWaiting: %q, want %q", r, queueFull)
	}
	cancel()
	if r := <-timedOut.refused; r != queueTimeout {
		t.Errorf("a review whose wait budget ended: %q, want %q", r, queueTimeout)
	}
	close(seat.release)
	for _, w := range waiters {
		started(t, w)
		close(w.release)
	}
	for _, o := range append(waiters, seat) {
		if r := <-o.refused; r != "" {
			t.Errorf("refused %s", r)
		}
	}
	if q.free != 1 || q.waiting != 0 || len(q.flows) != 0 {
		t.Errorf("after: %d free, %d waiting, flows %v; want the seat back and nothing left", q.free, q.waiting, q.flows)
	}
}

// TestFairQueueBoundsConcurrency: many requesters at once never hold more than Concurrency seats
// together nor more than PerRequester each, and every review is judged.
func TestFairQueueBoundsConcurrency(t *testing.T) {
	o := FairQueueOptions{Concurrency: 4, PerRequester: 3, QueueLength: 200, MaxWaiting: 1000}
	q := newTestQueue(t, o)
	var (
		running, peak atomic.Int32
		mu            sync.Mutex
		per           = map[string]int{}
		wg            sync.WaitGroup
		refused       atomic.Int32
	)
	for i := range 300 {
		who := fmt.Sprintf("user-%d", i%3)
		wg.Go(func() {
			r := q.Do(context.Background(), who, func() {
				n := running.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				mu.Lock()
				per[who]++
				if per[who] > o.PerRequester {
					t.Errorf("%s holds %d seats, more than %d", who, per[who], o.PerRequester)
				}
				mu.Unlock()
				time.Sleep(100 * time.Microsecond)
				mu.Lock()
				per[who]--
				mu.Unlock()
				running.Add(-1)
			})
			if r != "" {
				refused.Add(1)
			}
		})
	}
	wg.Wait()
	if peak.Load() > int32(o.Concurrency) {
		t.Errorf("%d reviews judged at once, more than %d", peak.Load(), o.Concurrency)
	}
	if refused.Load() != 0 {
		t.Errorf("%d reviews refused; the queues had room for all", refused.Load())
	}
}

// TestBusyQueueAnswersAFailedCall: a review the queue refuses is answered in time with HTTP 429
// and no AdmissionReview, never an admission: the registration's failure policy decides, Fail
// for people and tenants, Ignore for the cluster's components.
func TestBusyQueueAnswersAFailedCall(t *testing.T) {
	q := newTestQueue(t, FairQueueOptions{Concurrency: 1, PerRequester: 1, QueueLength: 1, MaxWaiting: 1})
	release := make(chan struct{})
	var calls atomic.Int32
	h := Review(admission.HandlerFunc(func(context.Context, admission.Request) admission.Response {
		calls.Add(1)
		<-release
		return admission.Allowed("")
	}), logr.Discard(), q)
	send := func(uid string) (int, *admissionv1.AdmissionResponse) {
		ar := admissionv1.AdmissionReview{Request: &admissionv1.AdmissionRequest{
			UID: types.UID("uid-" + uid), Kind: metav1.GroupVersionKind{Version: "v1", Kind: "PersistentVolumeClaim"},
			Operation: admissionv1.Create, UserInfo: authenticationv1.UserInfo{Username: "flooder"},
			Object: runtime.RawExtension{Raw: []byte(`{"metadata":{"name":"x"}}`)},
		}}
		ar.APIVersion, ar.Kind = "admission.k8s.io/v1", "AdmissionReview"
		body, _ := json.Marshal(ar)
		req := httptest.NewRequest(http.MethodPost, "/validate?timeout=1s", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var out admissionv1.AdmissionReview
		_ = json.Unmarshal(rec.Body.Bytes(), &out)
		return rec.Code, out.Response
	}
	done := make(chan struct{}, 2)
	go func() { send("held"); done <- struct{}{} }()
	waitFor(t, "the first review holds the seat", func() bool { return calls.Load() == 1 })
	go func() { send("waiting"); done <- struct{}{} }()
	waitFor(t, "the second review waits", func() bool { return q.waitingNow() == 1 })
	code, resp := send("third")
	if code != http.StatusTooManyRequests || resp != nil {
		t.Fatalf("HTTP %d, response %+v; want HTTP 429 and no AdmissionReview", code, resp)
	}
	close(release)
	<-done
	<-done
}

// TestFairQueueBoundsWaitingBytes: one requester's waiting bodies are held to its share of
// MaxWaitingBytes (QueueLength/MaxWaiting of it), so a flood of large objects is refused at once
// while another requester's review still waits for its turn; a requester with nothing waiting
// may always wait with a review the whole bound holds.
func TestFairQueueBoundsWaitingBytes(t *testing.T) {
	// Shares: 1,000 bytes in all, a requester 250 (QueueLength 5 of MaxWaiting 20).
	q := newTestQueue(t, FairQueueOptions{Concurrency: 1, PerRequester: 1, QueueLength: 5, MaxWaiting: 20, MaxWaitingBytes: 1000})
	ctx := context.Background()
	seat := occupy(q, ctx, "holder", nil, nil)
	started(t, seat)
	big := make(chan string, 1)
	go func() { big <- q.DoSized(ctx, "flooder", 200, func() {}) }()
	waitFor(t, "the flood's first large review waits", func() bool { return q.waitingNow() == 1 })
	// A review that should be refused at once is given a short wait, so that a queue that lets it
	// wait fails the test with time-out instead of hanging it.
	short, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if r := q.DoSized(short, "flooder", 100, func() { t.Error("ran a review past its requester's share of the bytes") }); r != queueFull {
		t.Errorf("a review past the requester's share: %q, want %q", r, queueFull)
	}
	// Another requester's large review waits: the bound in all still holds it.
	other := make(chan string, 1)
	go func() { other <- q.DoSized(ctx, "bystander", 700, func() {}) }()
	waitFor(t, "the bystander's review waits", func() bool { return q.waitingNow() == 2 })
	if r := q.DoSized(short, "third", 200, func() { t.Error("ran a review past the bytes in all") }); r != queueFull {
		t.Errorf("a review past the bytes in all: %q, want %q", r, queueFull)
	}
	close(seat.release)
	for _, ch := range []chan string{big, other} {
		if r := <-ch; r != "" {
			t.Errorf("a waiting review within the bounds: refused %q", r)
		}
	}
}
