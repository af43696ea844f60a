package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync/atomic"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/pvguard/pvguard/binder"
	"github.com/pvguard/pvguard/certs"
	"github.com/pvguard/pvguard/internal/clusterview"
	"github.com/pvguard/pvguard/internal/cores"
	"github.com/pvguard/pvguard/internal/leaseguard"
	"github.com/pvguard/pvguard/internal/web"
	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/webhook"
)

// Serve runs pvguard until ctx ends: the webhooks and the audit on every replica, the binder,
// the report writer and the certificate rotator on the elected one, all over one informer cache.
// It completes the flags into a server, every component built from its own options and wired in
// order (nothing reaches a component through a reference filled in later), then runs it.
func Serve(ctx context.Context, o ServeFlags, log logr.Logger) error {
	return ServeWith(ctx, o, ServeHooks{}, log)
}

// ServeWith is Serve with hooks into the running server, for programs that run it in their own
// process (the end-to-end tests, pvguard-dev).
func ServeWith(ctx context.Context, o ServeFlags, hooks ServeHooks, log logr.Logger) error {
	s, err := completeServe(ctx, o, hooks, log)
	if err != nil {
		return err
	}
	defer s.start.end()
	return s.run(ctx)
}

// server is pvguard's server as completeServe builds it from the flags.
type server struct {
	shared
	o     ServeFlags
	hooks ServeHooks
	cfg   *rest.Config
	// steadyGC is the collector's headroom once the start is over (0: GOGC's, set by the
	// operator), which steadyHeadroom sets.
	steadyGC int
	// start is the server's share of the collector's goal while the cache fills, whose end sets
	// steadyGC (nil with steadyGC 0): steadyHeadroom ends it, or the server's end.
	start *serverStart
	// metrics are the admission metrics, which the config watcher counts into too.
	metrics  *webhook.Metrics
	reloaded func() <-chan struct{}
	web      *web.Server
	// cacheSynced is set once the informers have synced: the readiness check.
	cacheSynced atomic.Bool
}

// shared is what every component is built over, besides its own options: the manager (its
// cache, clients and election), the Lease guard (nil without election), the policy and the
// metrics registry.
type shared struct {
	mgr   ctrl.Manager
	lease *leaseguard.Guard
	// engines is the policy every component judges with, reloaded from --config.
	engines webhook.EngineSource
	reg     *prometheus.Registry
	log     logr.Logger
	// seats are shared by the long computations (the binder's syncs and plans, explanations),
	// so that they leave a core to the admission reviews (internal/cores).
	seats *cores.Seats
}

// completeServe validates the flags and builds the server: the manager and its cache, the
// policy source, then the components that judge with it and the web server that serves them.
func completeServe(ctx context.Context, o ServeFlags, hooks ServeHooks, log logr.Logger) (_ *server, err error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	if err := applyMemoryLimit(o.MemoryLimit, os.Getenv("GOMEMLIMIT"), log); err != nil {
		return nil, err
	}
	start, steadyGC, err := applyGCPercent(o.GCPercent, os.Getenv("GOGC"), log)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			start.end()
		}
	}()
	cfg, err := serveRESTConfig(o.API)
	if err != nil {
		return nil, err
	}
	mgr, lease, err := newManager(cfg, o, start.listed, log)
	if err != nil {
		return nil, err
	}
	if err := clusterview.SetupIndexes(ctx, mgr.GetCache(), policy.ReadKinds(policy.Catalogue())); err != nil {
		return nil, err
	}
	s := &server{o: o, hooks: hooks, cfg: cfg, steadyGC: steadyGC, start: start, shared: shared{mgr: mgr, lease: lease, reg: prometheus.NewRegistry(), log: log, seats: cores.ForProcess()}}
	s.metrics = webhook.NewMetrics(s.reg)
	if s.engines, s.reloaded, err = addPolicySource(mgr, o.ConfigFile, s.metrics, log); err != nil {
		return nil, err
	}
	if s.web, err = s.buildWeb(ctx); err != nil {
		return nil, err
	}
	params := policy.ParamObject{Namespace: o.Namespace, Name: o.AdmissionPolicyParams}
	if err := addAdmissionPolicyParams(ctx, s.shared, params, s.reloaded); err != nil {
		return nil, err
	}
	return s, nil
}

// served is what the web server serves besides admission: the components' handlers.
type served struct {
	views                  *clusterview.Source
	report, dashboard      http.Handler
	explainAPI, explainPgs http.Handler
}

// addComponents builds the audit, the binder (unless off) and the explanations, each from its
// own options and reading live through a client of its own traffic class (APIOptions.Classes):
// the webhooks', the audit's and explanations', and the binder's (the controllers' bucket).
func (s *server) addComponents(ctx context.Context) (served, error) {
	var out served
	classes := s.o.API.Classes
	reviewReader, err := liveReader(s.cfg, classes.LiveReads, "pvguard-webhook", s.mgr,
		webhook.NewLiveReadRateLimiter(classes.LiveReads.QPS, classes.LiveReads.Burst))
	if err != nil {
		return out, err
	}
	auditReader, err := liveReader(s.cfg, classes.Audit, "pvguard-audit", s.mgr, nil)
	if err != nil {
		return out, err
	}
	out.views = clusterview.New(s.mgr.GetCache(), reviewReader)
	auditViews := clusterview.New(s.mgr.GetCache(), auditReader)
	var firstAudit <-chan struct{}
	if out.report, out.dashboard, firstAudit, err = addAudit(ctx, s.shared, s.o.Audit, auditViews); err != nil {
		return out, err
	}
	if s.start != nil {
		h := steadyHeadroom{cache: s.mgr.GetCache(), audit: firstAudit, budget: binderStartBudget, end: s.start.end, announced: s.start.announced, pct: s.steadyGC, log: s.log}
		if err := s.mgr.Add(h); err != nil {
			return out, fmt.Errorf("adding the collector's steady headroom: %w", err)
		}
	}
	var b *binder.Binder
	if s.o.Binder.Mode != binder.ModeOff {
		// The explanations (served with the audit) read the binder's plans (explainHandlers).
		keepPlans := s.o.Audit.on()
		if b, err = addBinder(ctx, s.shared, s.o.Binder, s.hooks.Binder, keepPlans, clusterview.New(s.mgr.GetCache(), s.mgr.GetAPIReader()), firstAudit); err != nil {
			return out, err
		}
	}
	out.explainAPI, out.explainPgs, err = explainHandlers(ctx, s.shared, s.o.Audit, b, auditViews, auditReader)
	return out, err
}

// buildWeb builds the components and the web server that serves them and the admission
// handlers, with its certificates, access checks, fair queue and readiness checks.
func (s *server) buildWeb(ctx context.Context) (*web.Server, error) {
	getCertificate, certReady, err := servingCertificates(ctx, s.mgr, s.o.Certs, s.o.Namespace, s.log)
	if err != nil {
		return nil, err
	}
	clientCAs, err := loadClientCAs(s.o.Certs.ClientCAFile)
	if err != nil {
		return nil, err
	}
	// The scheduler's metrics (go_sched_latencies_seconds: how long goroutines waited to run)
	// tell a slow review that waited for a core from one that was slow to decide.
	s.reg.MustRegister(collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(collectors.MetricsScheduler)), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		certs.NewExpiryCollector(getCertificate))
	if err := clusterview.CountCachedObjects(ctx, s.mgr.GetCache(), s.reg); err != nil {
		return nil, err
	}
	h, err := s.addComponents(ctx)
	if err != nil {
		return nil, err
	}
	guard, err := readGuard(withOwnBucket(s.cfg, s.o.API.Classes.Access, "pvguard-access"), s.mgr.GetCache(), s.log)
	if err != nil {
		return nil, err
	}
	queue, err := webhook.NewFairQueue(s.o.Webhook.ReviewQueue, s.reg)
	if err != nil {
		return nil, err
	}
	rights, err := admissionRights(withOwnBucket(s.cfg, s.o.API.Classes.Access, "pvguard-admission-rights"), s.o.Webhook, s.o.Certs.ClientCAFile)
	if err != nil {
		return nil, err
	}
	o := s.o
	return web.NewServer(web.Options{
		Listen: o.Listen, MetricsListen: o.MetricsListen, Profiling: o.Profiling,
		GetCertificate: getCertificate, ClientCAs: clientCAs,
		ShutdownDelay: o.ShutdownDelay, ShutdownTimeout: o.ShutdownTimeout,
		Engines: s.engines, Views: h.views,
		Admission:  webhook.Limits{Queue: queue, LiveReadBudget: o.Webhook.LiveReadBudget, RereadsPerRequester: o.Webhook.RereadsPerRequester},
		ReadRights: rights,
		Report:     h.report, Dashboard: h.dashboard, ExplainAPI: h.explainAPI, ExplainPages: h.explainPgs,
		Access: guard, Registry: s.reg, Metrics: s.metrics,
		Log: s.log.WithName("webhook"),
		ReadyChecks: map[string]func() error{
			"serving certificate": certReady,
			"informer cache": func() error {
				if !s.cacheSynced.Load() {
					return errors.New("not synced yet")
				}
				return nil
			},
		},
	}), nil
}

// run starts the web server on every replica, marks the server ready once the informers have
// synced, and runs the manager (and with it every component) until ctx ends.
func (s *server) run(ctx context.Context) error {
	if err := s.mgr.Add(everyReplica(s.web.Start)); err != nil {
		return fmt.Errorf("adding webhook server: %w", err)
	}
	if err := s.mgr.Add(everyReplica(func(ctx context.Context) error {
		if !s.mgr.GetCache().WaitForCacheSync(ctx) {
			return nil
		}
		s.cacheSynced.Store(true)
		s.log.Info("informer cache synced; ready")
		if s.hooks.Ready != nil {
			s.hooks.Ready(s.web.Addr())
		}
		return nil
	})); err != nil {
		return fmt.Errorf("adding readiness: %w", err)
	}
	return s.mgr.Start(ctx)
}
