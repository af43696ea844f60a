package cli

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// TestServeAsksForUncompressedResponses: every request of pvguard's clients goes without
// Accept-Encoding, so that the apiserver does not gzip the informers' lists (as it does not for
// kube-controller-manager's) and pvguard does not inflate them.
func TestServeAsksForUncompressedResponses(t *testing.T) {
	var mu sync.Mutex
	var encodings []string
	// Over TLS, as an apiserver serves: without TLS options client-go uses Go's default
	// transport, which asks for gzip whatever the config says.
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		encodings = append(encodings, r.Header.Get("Accept-Encoding"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"major":"1","minor":"37","gitVersion":"v1.37.2"}`))
	}))
	defer srv.Close()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: `+srv.URL+`, insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	o := DefaultServeFlags().API
	o.Kubeconfig = kubeconfig
	cfg, err := serveRESTConfig(o)
	if err != nil {
		t.Fatal(err)
	}
	// The controllers' client, and a traffic class's, a copy of its config with a bucket of its own.
	for _, c := range []*rest.Config{cfg, withOwnBucket(cfg, o.Classes.LiveReads, "pvguard-webhook")} {
		cs, err := kubernetes.NewForConfig(c)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cs.Discovery().ServerVersion(); err != nil {
			t.Fatalf("%s: %v", c.UserAgent, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(encodings) == 0 {
		t.Fatal("no request reached the server")
	}
	for _, e := range encodings {
		if e != "" {
			t.Errorf("a request asked for Accept-Encoding %q, want none", e)
		}
	}
}

// started is a leader runnable that reports when it starts.
type started chan time.Time

func (s started) Start(context.Context) error { s <- time.Now(); return nil }
func (started) NeedLeaderElection() bool      { return true }

// TestBinderStartsAfterTheFirstAudit: the binder starts when the first full audit has ended, and
// after the budget when the audit takes longer; it stays elected only.
func TestBinderStartsAfterTheFirstAudit(t *testing.T) {
	ctx := context.Background()
	audit := make(chan struct{})
	s := make(started, 1)
	a := afterFirstAudit{binder: s, audit: audit, budget: time.Hour}
	if !a.NeedLeaderElection() {
		t.Error("the binder would run on every replica")
	}
	go func() { _ = a.Start(ctx) }()
	select {
	case <-s:
		t.Fatal("the binder started before the first audit ended")
	case <-time.After(100 * time.Millisecond):
	}
	close(audit)
	select {
	case <-s:
	case <-time.After(10 * time.Second):
		t.Fatal("the binder did not start once the first audit ended")
	}

	slow := afterFirstAudit{binder: s, audit: make(chan struct{}), budget: 50 * time.Millisecond}
	begun := time.Now()
	go func() { _ = slow.Start(ctx) }()
	select {
	case at := <-s:
		if at.Sub(begun) < 50*time.Millisecond {
			t.Errorf("the binder started %s after it was asked, before its budget", at.Sub(begun))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the binder waits past its budget for an audit that does not end")
	}
}
