package harness

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Balancer stands in for a Service in front of several pvguard replicas: it accepts TCP
// connections and hands each to the next ready backend, as kube-proxy does, and it learns
// readiness by probing each backend's /readyz, as the kubelet does (over TLS without verifying
// the certificate, like a kubelet HTTPS probe). A backend that stops being ready gets no new
// connections; connections already open stay with it.
type Balancer struct {
	ln      net.Listener
	mu      sync.Mutex
	ready   map[string]bool
	order   []string
	next    int
	served  map[string]*atomic.Int64
	stopped chan struct{}
	wg      sync.WaitGroup
}

// NewBalancer listens on a free loopback port and starts probing.
func NewBalancer(probeEvery time.Duration) (*Balancer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b := &Balancer{ln: ln, ready: map[string]bool{}, served: map[string]*atomic.Int64{}, stopped: make(chan struct{})}
	b.wg.Add(2)
	go b.accept()
	go b.probe(probeEvery)
	return b, nil
}

// Addr is host:port of the balancer.
func (b *Balancer) Addr() string { return b.ln.Addr().String() }

// Add registers a backend (host:port); it receives connections once its /readyz passes.
func (b *Balancer) Add(backend string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.order = append(b.order, backend)
	b.served[backend] = &atomic.Int64{}
}

// Connections returns how many connections each backend has been given.
func (b *Balancer) Connections() map[string]int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]int64{}
	for k, v := range b.served {
		out[k] = v.Load()
	}
	return out
}

// Ready reports whether the last probe of backend passed, that is whether new connections may be
// given to it.
func (b *Balancer) Ready(backend string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ready[backend]
}

// Close stops accepting and probing; open connections are cut.
func (b *Balancer) Close() {
	select {
	case <-b.stopped:
		return
	default:
	}
	close(b.stopped)
	b.ln.Close()
	b.wg.Wait()
}

func (b *Balancer) pick() (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for range b.order {
		be := b.order[b.next%len(b.order)]
		b.next++
		if b.ready[be] {
			b.served[be].Add(1)
			return be, true
		}
	}
	return "", false
}

func (b *Balancer) accept() {
	defer b.wg.Done()
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		go b.relay(c)
	}
}

func (b *Balancer) relay(c net.Conn) {
	defer c.Close()
	be, ok := b.pick()
	if !ok {
		return // no ready backend: the client sees the connection refused, as with no endpoints
	}
	up, err := net.DialTimeout("tcp", be, 2*time.Second)
	if err != nil {
		return
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	select {
	case <-done:
	case <-b.stopped:
	}
}

func (b *Balancer) probe(every time.Duration) {
	defer b.wg.Done()
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // a kubelet probe does not verify either
		DisableKeepAlives: true,
	}}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		b.mu.Lock()
		backends := append([]string(nil), b.order...)
		b.mu.Unlock()
		for _, be := range backends {
			ok := probeOnce(hc, be)
			b.mu.Lock()
			b.ready[be] = ok
			b.mu.Unlock()
		}
		select {
		case <-b.stopped:
			return
		case <-t.C:
		}
	}
}

func probeOnce(hc *http.Client, backend string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+backend+"/readyz", nil)
	if err != nil {
		return false
	}
	resp, err := hc.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode == http.StatusOK
}
