// Package admissionload holds what the admission benchmarks share besides their objects (those
// are in test/gen): a no-op controller-runtime webhook as the baseline, pvguard's server over a
// fixed view, a TLS server and an HTTP/2 client, and latency recording. The Go benchmarks in
// webhook/admission_bench_test.go and the load generators in hack/bench/admission and
// hack/bench/scale use the same pieces, so their numbers describe the same work.
package admissionload

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/pvguard/pvguard/certs"
	"github.com/pvguard/pvguard/internal/web"
	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/webhook"
)

// Logger is the logger both servers get: controller-runtime's zap logger at info level, as
// `pvguard serve` sets up, writing to io.Discard. It is also made controller-runtime's root
// logger, which the baseline webhook logs through.
func Logger() logr.Logger {
	log := zap.New(zap.WriteTo(io.Discard))
	ctrllog.SetLogger(log)
	return log
}

// TLS is a serving certificate for 127.0.0.1 and a pool that trusts it.
type TLS struct {
	Cert  tls.Certificate
	Pool  *x509.CertPool
	CAPEM []byte
}

// IssueTLS issues a CA and a serving certificate with pvguard's certs package.
func IssueTLS() (*TLS, error) {
	b, err := certs.Issue(certs.Request{DNSNames: []string{"localhost"}, IPs: []net.IP{net.ParseIP("127.0.0.1")}})
	if err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(b.Serving.CertPEM, b.Serving.KeyPEM)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(b.CA.Cert)
	return &TLS{Cert: pair, Pool: pool, CAPEM: b.CA.CertPEM}, nil
}

// PVGuard builds pvguard's server (default config) over a view. Its TLSConfig is also the one
// the baseline is served with.
func PVGuard(t *TLS, view policy.View, log logr.Logger) *web.Server {
	return web.NewServer(web.Options{
		Listen:         "127.0.0.1:0",
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &t.Cert, nil },
		Engines:        webhook.StaticEngine{E: policy.NewEngine(nil)},
		Views:          webhook.StaticView{V: view},
		Log:            log,
	})
}

// Noop is the baseline: controller-runtime's admission.Webhook with a handler that allows every
// request, mounted on the same endpoints of a chi router with the same middleware as pvguard's.
func Noop() http.Handler {
	wh := &admission.Webhook{Handler: admission.HandlerFunc(func(context.Context, admission.Request) admission.Response {
		return admission.Allowed("")
	})}
	r := chi.NewRouter()
	r.Use(middleware.CleanPath, middleware.Recoverer)
	for _, p := range []string{webhook.PathValidatePV, webhook.PathValidatePVC, webhook.PathValidateSC, webhook.PathMutatePV, webhook.PathMutatePVC} {
		r.Method(http.MethodPost, p, wh)
	}
	return r
}

// Recorder collects durations from many goroutines without a lock: a slot per observation,
// sized beforehand; observations past the end are dropped.
type Recorder struct {
	n     atomic.Int64
	slots []time.Duration
}

// NewRecorder makes room for n observations.
func NewRecorder(n int) *Recorder { return &Recorder{slots: make([]time.Duration, n)} }

// Observe records one duration.
func (r *Recorder) Observe(d time.Duration) {
	if i := r.n.Add(1) - 1; i < int64(len(r.slots)) {
		r.slots[i] = d
	}
}

// Durations returns what was recorded, sorted.
func (r *Recorder) Durations() []time.Duration {
	n := min(int(r.n.Load()), len(r.slots))
	out := slices.Clone(r.slots[:n])
	slices.Sort(out)
	return out
}

// Quantile returns the q-quantile (0..1) of sorted durations, 0 for none.
func Quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// Timed wraps a handler so that each request's time in the handler is recorded into the
// recorder *rec points at (nothing while it is nil).
func Timed(h http.Handler, rec *atomic.Pointer[Recorder]) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		h.ServeHTTP(w, r)
		if rc := rec.Load(); rc != nil {
			rc.Observe(time.Since(start))
		}
	})
}

// Serve serves h over TLS on 127.0.0.1:0 with the given TLS config, as web.Server.Start does
// (same http.Server settings), until stop is called.
func Serve(h http.Handler, cfg *tls.Config) (addr string, stop func(), err error) {
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return ln.Addr().String(), func() { _ = srv.Close() }, nil
}

// Client is an HTTP/2-only keep-alive client that trusts the pool, as the apiserver's webhook
// client is: every request of one client shares one connection.
func Client(pool *x509.CertPool) *http.Client {
	tr := &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 100,
	}
	tr.Protocols = new(http.Protocols)
	tr.Protocols.SetHTTP2(true)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// Post sends one review and checks that it was answered with HTTP 200 and allowed.
func Post(c *http.Client, url string, body []byte) error {
	resp, err := c.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || !bytes.Contains(data, []byte(`"allowed":true`)) {
		return fmt.Errorf("%s: HTTP %d: %s", url, resp.StatusCode, data)
	}
	return nil
}
