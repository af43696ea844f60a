package cli

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/pvguard/pvguard/audit"
	"github.com/pvguard/pvguard/binder"
	"github.com/pvguard/pvguard/explain"
	"github.com/pvguard/pvguard/internal/access"
	"github.com/pvguard/pvguard/internal/cachelist"
	"github.com/pvguard/pvguard/internal/clusterview"
	"github.com/pvguard/pvguard/internal/policyparams"
	"github.com/pvguard/pvguard/internal/web"
	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/webhook"
)

// addAudit registers the audit runner (every replica) and the report writer (the elected one),
// and returns the report and dashboard handlers and a channel closed when the first full audit
// has ended; all nil when the audit is off.
func addAudit(ctx context.Context, sh shared, o AuditOptions, views *clusterview.Source) (report, dashboard http.Handler, firstAudit <-chan struct{}, err error) {
	if !o.on() {
		return nil, nil, nil, nil
	}
	mgr := sh.mgr
	auditLog := sh.log.WithName("audit")
	ro := auditOptions(o, mgr.GetCache(), views, sh.engines.Engine, sh.reg, auditLog)
	ro.Seats = sh.seats
	runner := audit.NewRunner(ro)
	if err := audit.WatchChanges(ctx, mgr.GetCache(), runner); err != nil {
		return nil, nil, nil, err
	}
	if err := mgr.Add(runner); err != nil {
		return nil, nil, nil, fmt.Errorf("adding audit: %w", err)
	}
	if err := mgr.Add(audit.NewWriter(runner, mgr.GetClient(), sh.log.WithName("reports"))); err != nil {
		return nil, nil, nil, fmt.Errorf("adding report writer: %w", err)
	}
	return web.ReportHandler(runner, mgr.GetCache(), auditLog), web.DashboardHandler(runner, mgr.GetCache(), auditLog), runner.FirstAudit(), nil
}

// auditOptions are the audit runner's: it reads the cache only (CacheView, as its full audit
// reads the cache's objects) and confirms its findings of gone objects live (LiveView).
func auditOptions(o AuditOptions, c client.Reader, views *clusterview.Source, engine func() *policy.Engine, reg prometheus.Registerer, log logr.Logger) audit.RunnerOptions {
	return audit.RunnerOptions{Interval: o.Interval, Cache: c, Live: views.LiveView, View: views.CacheView,
		Engine: engine, Registry: reg, Log: log}
}

// explainHandlers are the explain endpoints, served with the dashboard (nil when the audit is
// off): explanations computed from the informer cache and, when the binder runs in this process,
// its plans (binder.Options.KeepPlans), so that a page reads the plan the binder binds by. With
// the binder off (or on a replica that is not elected), the pool is planned for all of them once,
// when the cache has synced, and again as objects change (explain.Plans), not once a question:
// one plan per process whatever the mode. Each pair is judged
// by the current policy as the binder that binds writes it: pvguard's, or with it off upstream's,
// whose writes the webhook judges all the same. A claim's provisioner's Lease is read live.
func explainHandlers(ctx context.Context, sh shared, o AuditOptions, b *binder.Binder, views *clusterview.Source, live client.Reader) (api, pages http.Handler, err error) {
	if !o.on() {
		return nil, nil, nil
	}
	mgr := sh.mgr
	eo := explain.ServeOptions{Cache: mgr.GetCache(), Log: sh.log.WithName("explain"),
		Engine: sh.engines.Engine, View: views.View, Identity: binder.UpstreamBinderIdentity, Leases: live, Registry: sh.reg, Seats: sh.seats}
	if b != nil {
		eo.PlanState, eo.Identity, eo.Binder = b.PlanState, b.Identity(), b
	}
	eo.Plans = explain.NewPlans(eo, explain.PlansOptions{})
	if err := explain.WatchChanges(ctx, mgr.GetCache(), eo.Plans); err != nil {
		return nil, nil, err
	}
	if err := mgr.Add(eo.Plans); err != nil { // the first plan, once the cache has synced
		return nil, nil, fmt.Errorf("adding the explanations' plan: %w", err)
	}
	x := explain.NewService(eo)
	return web.ExplainAPIHandler(x, eo.Log), web.ExplainPagesHandler(x, eo.Log), nil
}

// readGuard authenticates the callers of the report, the dashboard and the explanations with
// TokenReviews and asks with SubjectAccessReviews what each may list, over the namespaces of the
// cached claims and of the volumes' claim references. Its client has a token bucket of its own:
// a dashboard's viewers never hold up the webhooks' live reads or the binder's writes.
func readGuard(cfg *rest.Config, c cache.Cache, log logr.Logger) (*access.Guard, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return access.NewGuard(access.Options{Client: cs, Log: log.WithName("access"),
		Namespaces: func(ctx context.Context) ([]string, error) { return cachedNamespaces(ctx, c) }})
}

// admissionRights are the read rights admission messages are rendered with (--admission-read-rights):
// nil (the request's own objects only) unless the reviews' identities can be trusted, which
// "auto" takes them to be when webhook callers must present a certificate of clientCAFile.
func admissionRights(cfg *rest.Config, o WebhookOptions, clientCAFile string) (webhook.ReadRights, error) {
	switch o.ReadRights {
	case "", "auto":
		if clientCAFile == "" {
			return nil, nil
		}
	case "request":
		return nil, nil
	case "rbac":
	default:
		return nil, fmt.Errorf("--admission-read-rights=%s: want auto, request or rbac", o.ReadRights)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return access.NewAdmissionRights(access.AdmissionRightsOptions{Client: cs})
}

// cachedNamespaces are the namespaces of the cached claims and of the cached volumes' claim
// references.
func cachedNamespaces(ctx context.Context, c client.Reader) ([]string, error) {
	claims, err := cachelist.List(ctx, c, &corev1.PersistentVolumeClaim{}, &corev1.PersistentVolumeClaimList{})
	if err != nil {
		return nil, err
	}
	volumes, err := cachelist.List(ctx, c, &corev1.PersistentVolume{}, &corev1.PersistentVolumeList{})
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []string
	add := func(ns string) {
		if ns != "" && !seen[ns] {
			seen[ns] = true
			out = append(out, ns)
		}
	}
	for _, pvc := range claims {
		add(pvc.Namespace)
	}
	for _, pv := range volumes {
		if ref := pv.Spec.ClaimRef; ref != nil {
			add(ref.Namespace)
		}
	}
	return out, nil
}

// addPolicySource is the policy every component judges with: the --config file, watched and
// reloaded on change (reloaded is closed on each reload), or the default policy without one.
func addPolicySource(mgr ctrl.Manager, configFile string, metrics *webhook.Metrics, log logr.Logger) (engines webhook.EngineSource, reloaded func() <-chan struct{}, err error) {
	if configFile == "" {
		return webhook.StaticEngine{E: policy.NewEngine(nil)}, nil, nil
	}
	cf, err := webhook.LoadConfigFile(configFile, metrics, log.WithName("config"))
	if err != nil {
		return nil, nil, err
	}
	if err := mgr.Add(everyReplica(func(ctx context.Context) error { return cf.Watch(ctx, 10*time.Second) })); err != nil {
		return nil, nil, fmt.Errorf("adding config watcher: %w", err)
	}
	return cf, cf.Reloaded, nil
}

// addAdmissionPolicyParams keeps the admission policies' parameter object equal to the loaded
// config (--admission-policy-params; nothing when obj has no name): the policies and the webhook
// then enforce the same exemptions and actions, before and after a reload. Its writes are held
// to the Lease as the binder's are (leaderWriter).
func addAdmissionPolicyParams(ctx context.Context, sh shared, obj policy.ParamObject, reloaded func() <-chan struct{}) error {
	if obj.Name == "" {
		return nil
	}
	mgr := sh.mgr
	writer, writeGuard, err := leaderWriter(mgr, sh.lease)
	if err != nil {
		return fmt.Errorf("building the admission policies' parameter writer: %w", err)
	}
	s, err := policyparams.NewSync(ctx, policyparams.SyncOptions{
		Object:  obj,
		Engines: sh.engines, Reloaded: reloaded, Cache: mgr.GetCache(), Writer: writer, Elected: mgr.Elected(),
		WriteGuard: writeGuard, Registry: sh.reg, Log: sh.log.WithName("admission-policy-params"),
	})
	if err != nil {
		return err
	}
	if err := mgr.Add(s); err != nil {
		return fmt.Errorf("adding the admission policies' parameter writer: %w", err)
	}
	return nil
}

// addBinder builds the binder over the manager's cache and registers it; in active mode it runs
// only on the elected replica. The explain pages read its in-flight state, and its plans when
// keepPlans is set; so does the NoVolumeFits reporter beside it (addNoVolumeFits). hooks are the
// tests' (ServeWith), empty in production.
func addBinder(ctx context.Context, sh shared, o BinderOptions, hooks BinderHooks, keepPlans bool, views *clusterview.Source, firstAudit <-chan struct{}) (*binder.Binder, error) {
	mgr := sh.mgr
	identity, err := whoAmI(ctx, mgr.GetConfig())
	if err != nil {
		return nil, err
	}
	writer, writeGuard, err := leaderWriter(mgr, sh.lease)
	if err != nil {
		return nil, err
	}
	var cacheReader client.Reader = mgr.GetCache() // the cache itself: cachelist reads its informers' stores
	if hooks.WrapCache != nil {
		cacheReader = hooks.WrapCache(cacheReader)
	}
	b, err := binder.New(binder.Options{
		Mode:        o.Mode,
		Workers:     o.Workers,
		Resync:      o.Resync,
		Engine:      sh.engines.Engine,
		Views:       views.View,
		Identity:    identity,
		Registry:    sh.reg,
		Recorder:    mgr.GetEventRecorderFor("pvguard-binder"), //nolint:staticcheck // core/v1 events, as the upstream controller records them
		Log:         sh.log.WithName("binder"),
		Cache:       cacheReader,
		Live:        mgr.GetAPIReader(),
		Writer:      writer,
		WriteGuard:  writeGuard,
		BeforeWrite: hooks.BeforeWrite,
		KeepPlans:   keepPlans || o.NoVolumeFitsAfter > 0,
		Seats:       sh.seats,
	})
	if err != nil {
		return nil, err
	}
	if err := b.SetupInformers(ctx, mgr.GetCache()); err != nil {
		return nil, err
	}
	if err := mgr.Add(afterFirstAudit{binder: b, audit: firstAudit, budget: binderStartBudget}); err != nil {
		return nil, fmt.Errorf("adding binder: %w", err)
	}
	if err := addNoVolumeFits(mgr, b, o.NoVolumeFitsAfter); err != nil {
		return nil, err
	}
	sh.log.Info("binder enabled", "mode", o.Mode, "identity", identity.Username, "leaderElection", sh.lease != nil)
	return b, nil
}

// binderStartBudget is how long the binder waits at most for the first full audit to end before
// it starts.
const binderStartBudget = 10 * time.Second

// afterFirstAudit starts the binder once the first full audit after the cache synced has ended
// (audit nil: at once), or after budget, whichever comes first. Both read every object of the
// cache; at the same time on a replica's cores, the binder's first sync of every claim and
// volume made the audit three to five times longer (docs/benchmarks.md, "Growth, beside
// kube-controller-manager's binder"), while waiting costs the binder what the audit takes,
// about a second at 100,000 pairs, once per start.
type afterFirstAudit struct {
	binder leaderRunnable
	audit  <-chan struct{}
	budget time.Duration
}

// leaderRunnable is a runnable that says whether it runs only on the elected replica.
type leaderRunnable interface {
	manager.Runnable
	manager.LeaderElectionRunnable
}

func (a afterFirstAudit) NeedLeaderElection() bool { return a.binder.NeedLeaderElection() }

func (a afterFirstAudit) Start(ctx context.Context) error {
	if a.audit != nil {
		t := time.NewTimer(a.budget)
		select {
		case <-a.audit:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	return a.binder.Start(ctx)
}

// addNoVolumeFits adds the reporter that posts NoVolumeFits after the binder's plans (none when
// after is 0): package explain reads the binder's plans, the binder never calls it. It runs on
// the elected replica only, where the binder plans.
func addNoVolumeFits(mgr manager.Manager, b *binder.Binder, after time.Duration) error {
	rec, err := noVolumeFitsRecorder(mgr, after)
	if err != nil || rec == nil {
		return err
	}
	r, err := explain.NewNoVolumeFitsReporter(explain.NoVolumeFitsOptions{Binder: b, After: after, Recorder: rec})
	if err != nil {
		return err
	}
	if err := mgr.Add(r); err != nil {
		return fmt.Errorf("adding the NoVolumeFits reporter: %w", err)
	}
	return nil
}

// noVolumeFitsRecorder records the NoVolumeFits events under the binder's identity (nil when
// they are off): core/v1 events, as the binder's others, whose correlator makes a repeat of the same message a higher
// count on the same Event and a new message a new Event (docs/explain.md says why not
// events.k8s.io's series). It has a broadcaster of its own: the correlator's spam filter lets a
// claim's events of one type through 25 at once and then one per 5 minutes, and the Warning
// events the binder repeats on every sync of a claim (VolumeMismatch, ProvisioningFailed) would
// otherwise spend that budget. Its filter lets one event per claim through per
// --no-volume-fits-after (the reporter's own pace), and it remembers 32,768 events, so a refresh
// finds its Event for up to that many stuck claims. Its writes share the client's token bucket
// (cfg.RateLimiter).
func noVolumeFitsRecorder(mgr manager.Manager, after time.Duration) (record.EventRecorder, error) {
	if after <= 0 {
		return nil, nil
	}
	cs, err := kubernetes.NewForConfig(mgr.GetConfig())
	if err != nil {
		return nil, fmt.Errorf("creating the NoVolumeFits event client: %w", err)
	}
	pace := min(after, 5*time.Minute)
	bc := record.NewBroadcaster(record.WithCorrelatorOptions(record.CorrelatorOptions{
		LRUCacheSize: 32768, QPS: float32(1 / pace.Seconds()),
	}))
	bc.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
	if err := mgr.Add(everyReplica(func(ctx context.Context) error {
		<-ctx.Done()
		bc.Shutdown()
		return nil
	})); err != nil {
		return nil, fmt.Errorf("adding the NoVolumeFits event broadcaster: %w", err)
	}
	return bc.NewRecorder(mgr.GetScheme(), corev1.EventSource{Component: "pvguard-binder"}), nil
}
