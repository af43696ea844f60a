package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"mime"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/pvguard/pvguard/policy"
)

// Endpoint paths. Docs, the chart and tests depend on these names.
const (
	PathValidatePV  = "/validate/persistentvolumes"
	PathValidatePVC = "/validate/persistentvolumeclaims"
	PathValidateSC  = "/validate/storageclasses"
	PathMutatePV    = "/mutate/persistentvolumes"
	PathMutatePVC   = "/mutate/persistentvolumeclaims"
)

// maxReviewBytes bounds an AdmissionReview body. The apiserver caps objects at 3 MiB and a
// review carries at most two of them.
const maxReviewBytes = 7 << 20

// Options configure the webhook server.
type Options struct {
	// Listen is the TLS address for webhooks and all other endpoints (default ":9443").
	Listen string
	// MetricsListen, when set, also serves /metrics, /healthz and /readyz over plain HTTP, for
	// kubelet probes and scrapers that do not speak the webhook's TLS.
	MetricsListen string
	// GetCertificate supplies the serving certificate (hot-reloaded by the caller).
	GetCertificate func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	// Engines and Views are what the handlers consult.
	Engines EngineSource
	Views   ViewSource
	// Registry receives pvguard's metrics; a new registry is made if nil.
	Registry *prometheus.Registry
	// ReadyChecks must all pass for /readyz (caches synced, certificate loaded).
	ReadyChecks map[string]func() error
	// Report and Dashboard, when set, serve the latest audit at GET /api/v1/report (JSON) and
	// GET / (a page).
	Report, Dashboard http.Handler
	// ShutdownTimeout bounds how long in-flight reviews may take to drain (default 25s).
	ShutdownTimeout time.Duration
	Log             logr.Logger
}

func (o *Options) applyDefaults() {
	if o.Listen == "" {
		o.Listen = ":9443"
	}
	if o.Registry == nil {
		o.Registry = prometheus.NewRegistry()
	}
	if o.ShutdownTimeout == 0 {
		o.ShutdownTimeout = 25 * time.Second
	}
}

// Server serves pvguard's endpoints.
type Server struct {
	opts    Options
	router  chi.Router
	metrics *Metrics

	mu       sync.Mutex
	addr     net.Addr
	started  chan struct{}
	stopping bool
}

// NewServer builds the router with every endpoint mounted.
func NewServer(opts Options) *Server {
	opts.applyDefaults()
	s := &Server{opts: opts, started: make(chan struct{})}
	s.metrics = NewMetrics(opts.Registry)
	s.router = s.routes()
	return s
}

// Metrics returns the server's metrics, for the config watcher.
func (s *Server) Metrics() *Metrics { return s.metrics }

// Handler returns the router, for tests and for mounting more endpoints.
func (s *Server) Handler() http.Handler { return s.router }

func (s *Server) routes() chi.Router {
	r := chi.NewRouter()
	r.Use(middleware.CleanPath, middleware.Recoverer)
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	r.Get("/readyz", s.readyz)
	r.Handle("/metrics", promhttp.HandlerFor(s.opts.Registry, promhttp.HandlerOpts{}))
	if s.opts.Report != nil {
		r.Method(http.MethodGet, "/api/v1/report", s.opts.Report)
	}
	if s.opts.Dashboard != nil {
		r.Method(http.MethodGet, "/", s.opts.Dashboard)
	}

	review := func(h admission.Handler) http.Handler {
		wh := &admission.Webhook{Handler: h, RecoverPanic: ptr(true)}
		wh.LogConstructor = func(base logr.Logger, req *admission.Request) logr.Logger {
			return admission.DefaultLogConstructor(s.opts.Log, req)
		}
		return reviewGuard(wh)
	}
	v := func(k policy.Kind) http.Handler {
		return review(NewValidator(k, s.opts.Engines, s.opts.Views, s.metrics))
	}
	m := func(k policy.Kind) http.Handler {
		return review(NewMutator(k, s.opts.Engines, s.opts.Views, s.metrics))
	}
	r.Method(http.MethodPost, PathValidatePV, v(policy.KindPersistentVolume))
	r.Method(http.MethodPost, PathValidatePVC, v(policy.KindPersistentVolumeClaim))
	r.Method(http.MethodPost, PathValidateSC, v(policy.KindStorageClass))
	r.Method(http.MethodPost, PathMutatePV, m(policy.KindPersistentVolume))
	r.Method(http.MethodPost, PathMutatePVC, m(policy.KindPersistentVolumeClaim))
	return r
}

func ptr[T any](v T) *T { return &v }

// reviewGuard answers requests that are not AdmissionReviews at all with a plain HTTP error,
// before controller-runtime decodes the body (it answers those in-band with HTTP 200).
func reviewGuard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || mt != "application/json" {
			http.Error(w, fmt.Sprintf("pvguard: Content-Type %q is not application/json", r.Header.Get("Content-Type")), http.StatusUnsupportedMediaType)
			return
		}
		if r.ContentLength > maxReviewBytes {
			http.Error(w, "pvguard: AdmissionReview larger than "+strconv.Itoa(maxReviewBytes)+" bytes", http.StatusRequestEntityTooLarge)
			return
		}
		// controller-runtime compares the header literally; parameters such as charset are fine.
		r.Header.Set("Content-Type", "application/json")
		r.Body = http.MaxBytesReader(w, r.Body, maxReviewBytes)
		next.ServeHTTP(w, r)
	})
}

func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	stopping := s.stopping
	s.mu.Unlock()
	if stopping {
		http.Error(w, "shutting down", http.StatusServiceUnavailable)
		return
	}
	for name, check := range s.opts.ReadyChecks {
		if err := check(); err != nil {
			http.Error(w, fmt.Sprintf("%s: %v", name, err), http.StatusServiceUnavailable)
			return
		}
	}
	_, _ = w.Write([]byte("ok"))
}

// Addr returns the TLS listener's address once Start has bound it.
func (s *Server) Addr() net.Addr {
	<-s.started
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// TLSConfig is the server's TLS configuration: TLS 1.2 or later with the certificate source.
func (s *Server) TLSConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: s.opts.GetCertificate, NextProtos: []string{"h2", "http/1.1"}}
}

// Start serves until ctx ends, then stops accepting, reports not-ready, and drains in-flight
// reviews for up to ShutdownTimeout.
func (s *Server) Start(ctx context.Context) error {
	if s.opts.GetCertificate == nil {
		return errors.New("webhook server: no serving certificate source")
	}
	ln, err := tls.Listen("tcp", s.opts.Listen, s.TLSConfig())
	if err != nil {
		return fmt.Errorf("listening on %s: %w", s.opts.Listen, err)
	}
	servers := []*http.Server{{Handler: s.router, ReadHeaderTimeout: 10 * time.Second}}
	listeners := []net.Listener{ln}
	if s.opts.MetricsListen != "" {
		mln, err := net.Listen("tcp", s.opts.MetricsListen)
		if err != nil {
			ln.Close()
			return fmt.Errorf("listening on %s: %w", s.opts.MetricsListen, err)
		}
		plain := chi.NewRouter()
		plain.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
		plain.Get("/readyz", s.readyz)
		plain.Handle("/metrics", promhttp.HandlerFor(s.opts.Registry, promhttp.HandlerOpts{}))
		servers = append(servers, &http.Server{Handler: plain, ReadHeaderTimeout: 10 * time.Second})
		listeners = append(listeners, mln)
	}
	s.mu.Lock()
	s.addr = ln.Addr()
	s.mu.Unlock()
	close(s.started)
	s.opts.Log.Info("serving webhooks", "address", ln.Addr().String())

	errc := make(chan error, len(servers))
	for i := range servers {
		go func() {
			if err := servers[i].Serve(listeners[i]); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- err
			}
		}()
	}
	select {
	case err := <-errc:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	s.mu.Lock()
	s.stopping = true
	s.mu.Unlock()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), s.opts.ShutdownTimeout)
	defer cancel()
	var errs []error
	for _, srv := range servers {
		errs = append(errs, srv.Shutdown(shutdownCtx))
	}
	return errors.Join(errs...)
}
