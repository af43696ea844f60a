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
	"github.com/pvguard/pvguard/internal/leaseguard"
	"github.com/pvguard/pvguard/internal/web"
	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/webhook"
)

// Serve runs pvguard until ctx ends: the webhooks and the audit on every replica, the binder,
// the report writer and the certificate rotator on the elected one, all over one informer cache.
// It completes the flags into a server, every component built and wired in order (nothing
// reaches a component through a reference filled in later), then runs it.
func Serve(ctx context.Context, o ServeFlags, log logr.Logger) error {
	s, err := completeServe(ctx, o, log)
	if err != nil {
		return err
	}
	return s.run(ctx)
}

// server is pvguard's server as completeServe builds it from the flags.
type server struct {
	o     ServeFlags
	log   logr.Logger
	cfg   *rest.Config
	mgr   ctrl.Manager
	lease *leaseguard.Guard
	reg   *prometheus.Registry
	// metrics are the admission metrics, which the config watcher counts into too.
	metrics *webhook.Metrics
	// engines is the policy every component judges with, reloaded from --config.
	engines  webhook.EngineSource
	reloaded func() <-chan struct{}
	web      *web.Server
	// cacheSynced is set once the informers have synced: the readiness check.
	cacheSynced atomic.Bool
}

// completeServe validates the flags and builds the server: the manager and its cache, the
// policy source, then the components that judge with it and the web server that serves them.
func completeServe(ctx context.Context, o ServeFlags, log logr.Logger) (*server, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	if err := applyMemoryLimit(o.MemoryLimit, os.Getenv("GOMEMLIMIT"), log); err != nil {
		return nil, err
	}
	cfg, err := serveRESTConfig(o)
	if err != nil {
		return nil, err
	}
	mgr, lease, err := newManager(cfg, o, log)
	if err != nil {
		return nil, err
	}
	if err := clusterview.SetupIndexes(ctx, mgr.GetCache(), policy.ReadKinds(policy.Catalogue())); err != nil {
		return nil, err
	}
	s := &server{o: o, log: log, cfg: cfg, mgr: mgr, lease: lease, reg: prometheus.NewRegistry()}
	s.metrics = webhook.NewMetrics(s.reg)
	if s.engines, s.reloaded, err = addPolicySource(mgr, o, s.metrics, log); err != nil {
		return nil, err
	}
	if s.web, err = s.buildWeb(ctx); err != nil {
		return nil, err
	}
	if err := addAdmissionPolicyParams(ctx, mgr, o, lease, s.engines, s.reloaded, s.reg, log); err != nil {
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

// addComponents builds the audit, the binder (unless off) and the explanations, each reading
// live through a client of its own traffic class (APIClasses): the webhooks', the audit's and
// explanations', and the binder's (the controllers' bucket).
func (s *server) addComponents(ctx context.Context) (served, error) {
	var out served
	reviewReader, err := liveReader(s.cfg, s.o.APIClasses.LiveReads, "pvguard-webhook", s.mgr,
		webhook.NewLiveReadRateLimiter(s.o.APIClasses.LiveReads.QPS, s.o.APIClasses.LiveReads.Burst))
	if err != nil {
		return out, err
	}
	auditReader, err := liveReader(s.cfg, s.o.APIClasses.Audit, "pvguard-audit", s.mgr, nil)
	if err != nil {
		return out, err
	}
	out.views = clusterview.New(s.mgr.GetCache(), reviewReader)
	auditViews := clusterview.New(s.mgr.GetCache(), auditReader)
	var firstAudit <-chan struct{}
	if out.report, out.dashboard, firstAudit, err = addAudit(ctx, s.mgr, s.o, s.engines, auditViews, s.reg, s.log); err != nil {
		return out, err
	}
	var b *binder.Binder
	if s.o.Binder != binder.ModeOff {
		if b, err = addBinder(ctx, s.mgr, s.o, s.lease, s.engines, clusterview.New(s.mgr.GetCache(), s.mgr.GetAPIReader()), firstAudit, s.reg, s.log); err != nil {
			return out, err
		}
	}
	out.explainAPI, out.explainPgs, err = explainHandlers(ctx, s.mgr, s.o, b, s.engines, auditViews, auditReader, s.log)
	return out, err
}

// buildWeb builds the components and the web server that serves them and the admission
// handlers, with its certificates, access checks, fair queue and readiness checks.
func (s *server) buildWeb(ctx context.Context) (*web.Server, error) {
	getCertificate, certReady, err := servingCertificates(ctx, s.mgr, s.o, s.log)
	if err != nil {
		return nil, err
	}
	clientCAs, err := loadClientCAs(s.o.ClientCAFile)
	if err != nil {
		return nil, err
	}
	s.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		certs.NewExpiryCollector(getCertificate))
	if err := clusterview.CountCachedObjects(ctx, s.mgr.GetCache(), s.reg); err != nil {
		return nil, err
	}
	h, err := s.addComponents(ctx)
	if err != nil {
		return nil, err
	}
	guard, err := readGuard(withOwnBucket(s.cfg, s.o.APIClasses.Access, "pvguard-access"), s.mgr.GetCache(), s.log)
	if err != nil {
		return nil, err
	}
	queue, err := webhook.NewFairQueue(s.o.ReviewQueue, s.reg)
	if err != nil {
		return nil, err
	}
	rights, err := admissionRights(withOwnBucket(s.cfg, s.o.APIClasses.Access, "pvguard-admission-rights"), s.o)
	if err != nil {
		return nil, err
	}
	o := s.o
	return web.NewServer(web.Options{
		Listen: o.Listen, MetricsListen: o.MetricsListen, Profiling: o.Profiling,
		GetCertificate: getCertificate, ClientCAs: clientCAs,
		ShutdownDelay: o.ShutdownDelay, ShutdownTimeout: o.ShutdownTimeout,
		Engines: s.engines, Views: h.views,
		Admission:  webhook.Limits{Queue: queue, LiveReadBudget: o.LiveReadBudget, RereadsPerRequester: o.RereadsPerRequester},
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
		if s.o.Ready != nil {
			s.o.Ready(s.web.Addr())
		}
		return nil
	})); err != nil {
		return fmt.Errorf("adding readiness: %w", err)
	}
	return s.mgr.Start(ctx)
}
