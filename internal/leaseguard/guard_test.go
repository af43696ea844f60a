package leaseguard

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// fakeLock is a lock whose writes succeed or fail as told.
type fakeLock struct {
	resourcelock.Interface
	fail error
}

func (l *fakeLock) Create(context.Context, resourcelock.LeaderElectionRecord) error { return l.fail }
func (l *fakeLock) Update(context.Context, resourcelock.LeaderElectionRecord) error { return l.fail }
func (l *fakeLock) Identity() string                                                { return "me" }

type clock struct{ t time.Time }

func (c *clock) now() time.Time       { return c.t }
func (c *clock) pass(d time.Duration) { c.t = c.t.Add(d) }
func rec(holder string) resourcelock.LeaderElectionRecord {
	return resourcelock.LeaderElectionRecord{HolderIdentity: holder}
}

func TestCheck(t *testing.T) {
	ctx := context.Background()
	failure := errors.New("apiserver unreachable")
	cases := []struct {
		name string
		run  func(g *Guard, l *fakeLock, c *clock)
		held bool
	}{
		{"never acquired", func(*Guard, *fakeLock, *clock) {}, false},
		{"just acquired", func(g *Guard, _ *fakeLock, _ *clock) { _ = g.Create(ctx, rec("me")) }, true},
		{"renewed within the window", func(g *Guard, _ *fakeLock, c *clock) {
			_ = g.Create(ctx, rec("me"))
			c.pass(3 * time.Second)
			_ = g.Update(ctx, rec("me"))
			c.pass(3 * time.Second)
		}, true},
		{"frozen past the window: the monotonic clock ran on", func(g *Guard, _ *fakeLock, c *clock) {
			_ = g.Update(ctx, rec("me"))
			c.pass(4 * time.Second)
		}, false},
		{"a failed renewal keeps the last good one, and no more", func(g *Guard, l *fakeLock, c *clock) {
			_ = g.Update(ctx, rec("me"))
			c.pass(3 * time.Second)
			l.fail = failure
			_ = g.Update(ctx, rec("me"))
			c.pass(2 * time.Second)
		}, false},
		{"a failed acquisition is no lease", func(g *Guard, l *fakeLock, _ *clock) {
			l.fail = failure
			_ = g.Create(ctx, rec("me"))
		}, false},
		{"released", func(g *Guard, _ *fakeLock, _ *clock) {
			_ = g.Update(ctx, rec("me"))
			_ = g.Update(ctx, rec(""))
		}, false},
		{"someone else's record written", func(g *Guard, _ *fakeLock, _ *clock) {
			_ = g.Update(ctx, rec("me"))
			_ = g.Update(ctx, rec("other"))
		}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l, c := &fakeLock{}, &clock{t: time.Unix(1000, 0)}
			g := New(l, 4*time.Second)
			g.now = c.now
			tc.run(g, l, c)
			err := g.Check()
			if held := err == nil; held != tc.held {
				t.Fatalf("Check() = %v, want held %v", err, tc.held)
			}
			if err != nil && !errors.Is(err, ErrLeaseLost) {
				t.Fatalf("Check() = %v, want ErrLeaseLost", err)
			}
		})
	}
}

func TestRoundTripperStopsWritesOnly(t *testing.T) {
	sent := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { sent[r.Method]++ }))
	defer srv.Close()
	c := &clock{t: time.Unix(1000, 0)}
	g := New(&fakeLock{}, 4*time.Second)
	g.now = c.now
	_ = g.Update(context.Background(), rec("me"))
	hc := &http.Client{Transport: g.RoundTripper(http.DefaultTransport)}
	do := func(method string) error {
		req, _ := http.NewRequest(method, srv.URL+"/api/v1/persistentvolumes/pv-1", nil)
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := do(http.MethodPut); err != nil {
		t.Fatalf("a write while the Lease is held: %v", err)
	}
	c.pass(5 * time.Second)
	for _, m := range []string{http.MethodPut, http.MethodPost, http.MethodPatch, http.MethodDelete} {
		if err := do(m); !errors.Is(err, ErrLeaseLost) {
			t.Errorf("%s after the window: err = %v, want ErrLeaseLost", m, err)
		}
	}
	if err := do(http.MethodGet); err != nil {
		t.Errorf("a read after the window: %v", err)
	}
	if sent[http.MethodPut] != 1 || sent[http.MethodPost]+sent[http.MethodPatch]+sent[http.MethodDelete] != 0 || sent[http.MethodGet] != 1 {
		t.Errorf("requests that reached the server: %v, want one PUT and one GET", sent)
	}
}
