package web

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/pvguard/pvguard/internal/access"
	"github.com/pvguard/pvguard/webhook"
)

// Where explanations are served, as JSON and as pages: .../pvc/{namespace}/{name} and
// .../pv/{name} (ExplainAPIHandler, ExplainPagesHandler). The admission endpoints' paths are webhook's
// (webhook.PathValidatePV, ...).
const (
	PathExplainAPI   = "/api/v1/explain"
	PathExplainPages = "/explain"
)

// Options configure the server.
type Options struct {
	// Listen is the TLS address for webhooks and all other endpoints (default ":9443").
	Listen string
	// MetricsListen, when set, also serves /metrics, /healthz and /readyz over plain HTTP, for
	// kubelet probes and scrapers that do not speak the webhook's TLS.
	MetricsListen string
	// Profiling serves Go's profiles (net/http/pprof) under /debug/pprof/ on MetricsListen: only
	// there, so that nothing that can reach the webhook port can read or slow the process with
	// them.
	Profiling bool
	// GetCertificate supplies the serving certificate (hot-reloaded by the caller).
	GetCertificate func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	// Engines and Views are what the admission handlers consult (webhook.Handlers).
	Engines webhook.EngineSource
	Views   webhook.ViewSource
	// Admission bounds the admission reviews: the fair queue per requester and the live-read
	// budget (webhook.Limits).
	Admission webhook.Limits
	// ReadRights, when set, lets admission messages name what the requester may read beyond its
	// request (webhook.WithReadRights): set it only when reviews come from the apiserver alone.
	ReadRights webhook.ReadRights
	// Registry receives pvguard's metrics; a new registry is made if nil.
	Registry *prometheus.Registry
	// Metrics are the admission metrics, registered in Registry; made there if nil.
	Metrics *webhook.Metrics
	// ReadyChecks must all pass for /readyz (caches synced, certificate loaded).
	ReadyChecks map[string]func() error
	// Report and Dashboard, when set, serve the latest audit at GET /api/v1/report (JSON) and
	// GET / (a page): ReportHandler, DashboardHandler.
	Report, Dashboard http.Handler
	// ExplainAPI and ExplainPages, when set, serve explanations of claims and volumes: mounted at
	// /api/v1/explain (JSON) and /explain (pages), each with GET /pvc/{namespace}/{name} and
	// GET /pv/{name} below (ExplainAPIHandler, ExplainPagesHandler over an explain.Service).
	ExplainAPI, ExplainPages http.Handler
	// Access authenticates and authorizes the callers of the report, the dashboard and the
	// explanations (bearer tokens, TokenReview and SubjectAccessReview) and limits each caller's
	// explanations. Without it those endpoints answer 401 to everyone: they are never open.
	Access *access.Guard
	// ShutdownTimeout bounds how long in-flight reviews may take to drain (default 25s).
	ShutdownTimeout time.Duration
	// ShutdownDelay is how long the server keeps serving, already not ready, after it is told to
	// stop: the time for the Service's endpoints to drop this replica, so the apiserver's new
	// connections go elsewhere before this one closes its listener.
	ShutdownDelay time.Duration
	// ClientCAs, when set, makes the webhook paths require a client certificate that these CAs
	// signed (for apiservers configured to present one). Probes, metrics, the report, the
	// dashboard and the explanations do not require one (the last three require a bearer token,
	// Access).
	ClientCAs *x509.CertPool
	Log       logr.Logger
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

// Server serves pvguard's endpoints: the admission webhooks, probes and metrics, the report, the
// dashboard and the explanations.
type Server struct {
	opts    Options
	router  chi.Router
	metrics *webhook.Metrics

	mu       sync.Mutex
	addr     net.Addr
	started  chan struct{}
	stopping bool
}

// NewServer builds the router with every endpoint mounted.
func NewServer(opts Options) *Server {
	opts.applyDefaults()
	s := &Server{opts: opts, started: make(chan struct{})}
	s.metrics = opts.Metrics
	if s.metrics == nil {
		s.metrics = webhook.NewMetrics(opts.Registry)
	}
	s.router = s.routes()
	return s
}

// Metrics returns the server's admission metrics, for the config watcher.
func (s *Server) Metrics() *webhook.Metrics { return s.metrics }

// Handler returns the router, for tests and for mounting more endpoints.
func (s *Server) Handler() http.Handler { return s.router }

// plainRoutes are the endpoints of MetricsListen: probes, metrics and, with Profiling, profiles.
func (s *Server) plainRoutes() chi.Router {
	plain := chi.NewRouter()
	plain.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	plain.Get("/readyz", s.readyz)
	plain.Method(http.MethodGet, "/metrics", promhttp.HandlerFor(s.opts.Registry, promhttp.HandlerOpts{}))
	if s.opts.Profiling {
		plain.Mount("/debug", middleware.Profiler())
	}
	return plain
}

func (s *Server) routes() chi.Router {
	r := chi.NewRouter()
	r.Use(middleware.CleanPath, middleware.Recoverer)
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	r.Get("/readyz", s.readyz)
	r.Method(http.MethodGet, "/metrics", promhttp.HandlerFor(s.opts.Registry, promhttp.HandlerOpts{}))
	// The report, the dashboard and the explanations show claims, volumes, findings and nodes
	// of every namespace: each caller must present a bearer token and sees what Kubernetes RBAC
	// lets them list (internal/access, visible.go, explain/visible.go).
	guarded, limited := s.guards()
	if s.opts.Report != nil {
		r.With(guarded).Method(http.MethodGet, "/api/v1/report", s.opts.Report)
	}
	if s.opts.Dashboard != nil {
		r.With(guarded).Method(http.MethodGet, "/", s.opts.Dashboard)
	}
	// An explanation reads the server's one plan of the pool and checks every volume against
	// the claim (its cost: docs/benchmarks.md, "Explanations while callers ask"). The service
	// computes one at a time with a short queue (explain/turns.go), so that a dashboard reloaded
	// in many tabs cannot take the memory the webhooks need; each caller has a rate of their own
	// besides, so that one caller cannot keep the turn. Every request's time, from before its
	// caller is authenticated, is pvguard_explain_request_duration_seconds.
	timed := s.explainTimer()
	if s.opts.ExplainAPI != nil {
		r.With(timed("api"), guarded, limited).Mount(PathExplainAPI, s.opts.ExplainAPI)
	}
	if s.opts.ExplainPages != nil {
		r.With(timed("page"), guarded, limited).Mount(PathExplainPages, s.opts.ExplainPages)
	}
	// The admission webhooks (package webhook), behind a client certificate when ClientCAs is set.
	var vopts []webhook.ValidatorOption
	if s.opts.ReadRights != nil {
		vopts = append(vopts, webhook.WithReadRights(s.opts.ReadRights))
	}
	reviewTimed := s.reviewTimer()
	for path, h := range webhook.Handlers(s.opts.Engines, s.opts.Views, s.metrics, s.opts.Log, s.opts.Admission, vopts...) {
		if s.opts.ClientCAs != nil {
			h = requireClientCert(h)
		}
		r.Method(http.MethodPost, path, reviewTimed(h))
	}
	return r
}

// reviewTimer returns the middleware that times each admission request whole, by HTTP status:
// from its handler's start (the request's headers read) to the answer written, so that the body's
// read, the fair queue's wait, decoding and encoding count beside the decision
// (pvguard_admission_review_duration_seconds times the decision alone).
func (s *Server) reviewTimer() func(http.Handler) http.Handler {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "pvguard_admission_request_duration_seconds",
		Help:    "Time to answer one admission request whole, server side (body read, fair queue, decision, answer written), by HTTP status.",
		Buckets: webhook.ReviewDurationBuckets()}, []string{"code"})
	s.opts.Registry.MustRegister(h)
	return func(next http.Handler) http.Handler { return promhttp.InstrumentHandlerDuration(h, next) }
}

// explainTimer returns the middleware that times the explain endpoints' requests by their
// handler ("api", "page") and status.
func (s *Server) explainTimer() func(handler string) func(http.Handler) http.Handler {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "pvguard_explain_request_duration_seconds",
		Help:    "Time to answer a request for an explanation, server side, by handler (api, page) and HTTP status.",
		Buckets: []float64{.005, .01, .025, .05, .075, .1, .15, .25, .5, .75, 1, 2.5, 5, 10, 30}}, []string{"handler", "code"})
	s.opts.Registry.MustRegister(h)
	return func(handler string) func(http.Handler) http.Handler {
		obs := h.MustCurryWith(prometheus.Labels{"handler": handler})
		return func(next http.Handler) http.Handler { return promhttp.InstrumentHandlerDuration(obs, next) }
	}
}

// guards are the middlewares of the read endpoints: authentication and authorization, and the
// per-caller limit of explanations. Without Access every request is refused.
func (s *Server) guards() (guarded, limited func(http.Handler) http.Handler) {
	if s.opts.Access == nil {
		refuse := func(http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				http.Error(w, "pvguard: no authenticator configured", http.StatusUnauthorized)
			})
		}
		return refuse, func(next http.Handler) http.Handler { return next }
	}
	return s.opts.Access.Authenticate, s.opts.Access.LimitExplanations
}

// logrWriter turns net/http's error log lines into structured log entries.
type logrWriter struct{ l logr.Logger }

func (w logrWriter) Write(p []byte) (int, error) {
	w.l.Info(strings.TrimSpace(string(p)))
	return len(p), nil
}

// requireClientCert refuses a request whose TLS connection did not present a client certificate
// that verified against Options.ClientCAs.
func requireClientCert(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 {
			http.Error(w, "pvguard: a client certificate is required", http.StatusUnauthorized)
			return
		}
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

// modernCiphers are the TLS 1.2 suites offered: forward-secret AEAD only. TLS 1.3 suites are
// not configurable and all modern.
var modernCiphers = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

// TLSConfig is the server's TLS configuration: TLS 1.2 or later, forward-secret AEAD suites, the
// certificate source, and client certificates verified when ClientCAs is set.
func (s *Server) TLSConfig() *tls.Config {
	c := &tls.Config{MinVersion: tls.VersionTLS12, CipherSuites: modernCiphers, GetCertificate: s.opts.GetCertificate, NextProtos: []string{"h2", "http/1.1"}}
	if s.opts.ClientCAs != nil {
		// Optional at the handshake so kubelet probes work; the webhook paths insist.
		c.ClientCAs, c.ClientAuth = s.opts.ClientCAs, tls.VerifyClientCertIfGiven
	}
	return c
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
	// Handshake errors (probes, scanners, an apiserver with a stale caBundle) go to the debug log
	// rather than stderr.
	errorLog := log.New(logrWriter{s.opts.Log.V(1)}, "", 0)
	servers := []*http.Server{{Handler: s.router, ReadHeaderTimeout: 10 * time.Second, ErrorLog: errorLog}}
	listeners := []net.Listener{ln}
	if s.opts.MetricsListen != "" {
		mln, err := net.Listen("tcp", s.opts.MetricsListen)
		if err != nil {
			ln.Close()
			return fmt.Errorf("listening on %s: %w", s.opts.MetricsListen, err)
		}
		servers = append(servers, &http.Server{Handler: s.plainRoutes(), ReadHeaderTimeout: 10 * time.Second, ErrorLog: errorLog})
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
	if s.opts.ShutdownDelay > 0 {
		s.opts.Log.Info("not ready; serving on while endpoints drop this replica", "delay", s.opts.ShutdownDelay)
		time.Sleep(s.opts.ShutdownDelay)
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), s.opts.ShutdownTimeout)
	defer cancel()
	var errs []error
	for _, srv := range servers {
		errs = append(errs, srv.Shutdown(shutdownCtx))
	}
	return errors.Join(errs...)
}
