package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/pvguard/pvguard/internal/clusterview"
	"github.com/pvguard/pvguard/internal/leaseguard"
	"github.com/pvguard/pvguard/internal/policyparams"

	"github.com/go-logr/logr"
	openreports "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/pvguard/pvguard/audit"
	"github.com/pvguard/pvguard/binder"
	"github.com/pvguard/pvguard/certs"
	"github.com/pvguard/pvguard/explain"
	"github.com/pvguard/pvguard/internal/access"
	"github.com/pvguard/pvguard/internal/cachelist"
	"github.com/pvguard/pvguard/internal/web"
	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/storage"
	"github.com/pvguard/pvguard/webhook"
)

// ServeFlags are the flags of `pvguard serve`.
type ServeFlags struct {
	Kubeconfig string
	// MemoryLimit is the container's memory limit (the chart passes limits.memory through the
	// downward API). When set and GOMEMLIMIT is not, the Go heap's soft limit is set to 90% of
	// it, so that the collector works harder before the kernel kills the process.
	MemoryLimit   string
	Listen        string
	MetricsListen string
	// Profiling serves Go's profiles at /debug/pprof/ on MetricsListen (docs/install.md, "Sizing").
	Profiling       bool
	CertDir         string
	SelfSigned      bool
	SelfSignedHosts []string
	// CertSecret turns on self-managed certificates: the elected replica issues a CA and serving
	// certificate into this Secret in Namespace and rotates them, every replica serves from it,
	// and the caBundle of the webhook configurations named WebhookConfigurationName follows it.
	CertSecret               string
	Namespace                string
	ServiceName              string
	WebhookConfigurationName string
	// CertHosts are extra DNS names and IPs for the self-managed certificate (beyond the Service's).
	CertHosts         []string
	CertValidity      time.Duration
	CAValidity        time.Duration
	CAOverlap         time.Duration
	CertCheckInterval time.Duration
	// ClientCAFile, when set, makes the webhook paths require a client certificate it signed.
	ClientCAFile string
	// AdmissionReadRights says what admission messages name besides the request's own objects:
	// "request" nothing more; "rbac" also what the requester's RBAC lets it read (asked with
	// SubjectAccessReviews), which trusts the identity a review states, so only the apiserver
	// must be able to send one; "auto" (default) is rbac with ClientCAFile, else request.
	AdmissionReadRights string
	ConfigFile          string
	// AdmissionPolicyParams names the ConfigMap (in Namespace) the admission policies read the
	// config from: every replica reports whether it holds its loaded config, the elected one
	// writes it (policyparams.Sync).
	AdmissionPolicyParams string
	Binder                binder.Mode
	// AuditInterval is how often the whole cache is audited (0 turns the audit off).
	AuditInterval time.Duration
	BinderWorkers int
	BinderResync  time.Duration
	LeaderElect   bool
	// LeaderElectionNamespace holds the binder's Lease (default: pvguard's own namespace in a
	// cluster, else kube-system).
	LeaderElectionNamespace string
	LeaderElectionID        string
	// LeaseDuration, RenewDeadline and RetryPeriod time the election as in kube-controller-manager:
	// a leader that dies without releasing the Lease is replaced after LeaseDuration.
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
	// KubeAPIQPS and KubeAPIBurst size the controllers' token bucket: the informers, the
	// binder's reads and writes, its events, the reports and the certificates. The other
	// traffic classes have buckets of their own (APIClasses), so that none can starve another.
	KubeAPIQPS   float32
	KubeAPIBurst int
	APIClasses   APIClasses
	// LiveReadBudget bounds a denial's live re-read (webhook.Limits); ReviewQueue sizes the fair
	// queue of admission reviews (webhook.FairQueueOptions).
	LiveReadBudget time.Duration
	// RereadsPerRequester is each requester's allowance of live re-reads a second (webhook.Limits).
	RereadsPerRequester float64
	ReviewQueue         webhook.FairQueueOptions
	ShutdownTimeout     time.Duration
	ShutdownDelay       time.Duration
	// Ready, when set, is called with the bound address once the server is ready.
	Ready func(addr net.Addr)
	// BinderHooks let end-to-end tests kill the binder between writes and make its cache lag.
	BinderHooks BinderHooks

	// NoVolumeFitsAfter is how long a claim stays Pending before the binder posts NoVolumeFits
	// on it (when no volume fits and nothing else will give it one); 0 turns the event off.
	NoVolumeFitsAfter time.Duration
}

// APIClasses are the client rate limits of pvguard's traffic classes besides the controllers'
// (--kube-api-qps): each class has a token bucket of its own, so a flood of one (a tenant's
// reviews that each re-read live, a dashboard's viewers) never holds up another (the binder's
// writes, the Lease renewals).
type APIClasses struct {
	// LiveReads: the admission webhooks' live reads (cache misses, re-reads of denials).
	LiveReads APIRate
	// Audit: the audit's and the explanations' live reads (confirming what the cache shows).
	Audit APIRate
	// Access: the TokenReviews and SubjectAccessReviews of the report, dashboard and
	// explanations' callers.
	Access APIRate
	// LeaderElection: the Lease's reads and renewals.
	LeaderElection APIRate
}

// APIRate is one token bucket: QPS tokens a second, at most Burst at once.
type APIRate struct {
	QPS   float32
	Burst int
}

// BinderHooks are test hooks into the binder; production leaves them nil.
type BinderHooks struct {
	BeforeWrite func(op string, obj client.Object) error
	WrapCache   func(client.Reader) client.Reader
}

// DefaultServeFlags are the flag defaults.
func DefaultServeFlags() ServeFlags {
	return ServeFlags{
		Listen:              ":9443",
		SelfSignedHosts:     []string{"localhost", "127.0.0.1"},
		Binder:              binder.ModeOff,
		AdmissionReadRights: "auto",
		AuditInterval:       time.Minute,
		BinderWorkers:       8,
		BinderResync:        15 * time.Second,
		LeaderElect:         true,
		LeaderElectionID:    "pvguard-leader",
		LeaseDuration:       15 * time.Second,
		RenewDeadline:       10 * time.Second,
		RetryPeriod:         2 * time.Second,
		KubeAPIQPS:          50,
		KubeAPIBurst:        100,
		APIClasses: APIClasses{
			LiveReads:      APIRate{QPS: 50, Burst: 100},
			Audit:          APIRate{QPS: 20, Burst: 40},
			Access:         APIRate{QPS: 20, Burst: 40},
			LeaderElection: APIRate{QPS: 5, Burst: 10},
		},
		LiveReadBudget:      webhook.DefaultLiveReadBudget,
		RereadsPerRequester: webhook.DefaultRereadsPerRequester,
		ReviewQueue:         webhook.DefaultFairQueueOptions(),
		ShutdownTimeout:     25 * time.Second,
		ShutdownDelay:       5 * time.Second,

		Namespace:                os.Getenv("POD_NAMESPACE"),
		ServiceName:              "pvguard",
		WebhookConfigurationName: "pvguard",
		CertValidity:             365 * 24 * time.Hour,
		CAValidity:               10 * 365 * 24 * time.Hour,
		CAOverlap:                10 * time.Minute,
		CertCheckInterval:        time.Minute,

		NoVolumeFitsAfter: 2 * time.Minute,
	}
}

func (o *ServeFlags) validate() error {
	var errs []error
	switch {
	case o.CertDir == "" && !o.SelfSigned && o.CertSecret == "":
		errs = append(errs, errors.New("--cert-dir, --cert-secret or --self-signed is required: the apiserver only calls webhooks over TLS"))
	case o.CertSecret != "" && (o.CertDir != "" || o.SelfSigned):
		errs = append(errs, errors.New("--cert-secret (self-managed certificates) excludes --cert-dir and --self-signed"))
	case o.CertSecret != "" && o.Namespace == "":
		errs = append(errs, errors.New("--cert-secret needs --namespace (or $POD_NAMESPACE)"))
	}
	if o.AdmissionPolicyParams != "" && o.Namespace == "" {
		errs = append(errs, errors.New("--admission-policy-params needs --namespace (or $POD_NAMESPACE)"))
	}
	if o.Profiling && o.MetricsListen == "" {
		errs = append(errs, errors.New("--profiling needs --metrics-listen: profiles are served only on the plain-HTTP metrics address, never on the webhook port"))
	}
	if o.CertSecret != "" && (o.CertValidity <= 0 || o.CAValidity < o.CertValidity || o.CAOverlap <= 0 || o.CertCheckInterval <= 0) {
		errs = append(errs, errors.New("--cert-validity, --ca-overlap and --cert-check-interval must be positive and --ca-validity at least --cert-validity"))
	}
	switch o.Binder {
	case binder.ModeOff, binder.ModeActive, binder.ModeShadow:
	default:
		errs = append(errs, fmt.Errorf("--binder=%s: want active, shadow or off", o.Binder))
	}
	if o.LeaderElect && !(0 < o.RetryPeriod && o.RetryPeriod < o.RenewDeadline && o.RenewDeadline < o.LeaseDuration) {
		errs = append(errs, fmt.Errorf("--leader-elect-retry-period (%s) < --leader-elect-renew-deadline (%s) < --leader-elect-lease-duration (%s) must hold, all positive",
			o.RetryPeriod, o.RenewDeadline, o.LeaseDuration))
	}
	if o.NoVolumeFitsAfter < 0 {
		errs = append(errs, fmt.Errorf("--no-volume-fits-after=%s: want 0 (off) or a positive duration", o.NoVolumeFitsAfter))
	}
	if o.KubeAPIQPS <= 0 || o.KubeAPIBurst <= 0 {
		errs = append(errs, errors.New("--kube-api-qps and --kube-api-burst must be positive"))
	}
	for name, r := range map[string]APIRate{"live-read": o.APIClasses.LiveReads, "audit": o.APIClasses.Audit, "access": o.APIClasses.Access, "leader-election": o.APIClasses.LeaderElection} {
		if r.QPS <= 0 || r.Burst <= 0 {
			errs = append(errs, fmt.Errorf("--%s-qps and --%s-burst must be positive", name, name))
		}
	}
	if o.RereadsPerRequester <= 0 {
		errs = append(errs, fmt.Errorf("--live-rereads-per-requester=%v: want a positive rate", o.RereadsPerRequester))
	}
	if o.LiveReadBudget <= 0 || o.LiveReadBudget >= time.Second {
		errs = append(errs, fmt.Errorf("--live-read-budget=%s: want a positive duration under 1s, a fraction of the webhook timeout (the shortest is 1s)", o.LiveReadBudget))
	}
	if _, err := webhook.NewFairQueue(o.ReviewQueue, nil); err != nil {
		errs = append(errs, fmt.Errorf("--review-concurrency, --review-concurrency-per-requester, --review-queue-length, --review-max-waiting: %w", err))
	}
	return errors.Join(errs...)
}

// RESTConfig resolves the cluster to talk to: --kubeconfig, else in-cluster, else $KUBECONFIG
// and ~/.kube/config.
func RESTConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("loading kubeconfig %s: %w", kubeconfig, err)
		}
		return cfg, nil
	}
	if cfg, err := rest.InClusterConfig(); err == nil {
		return cfg, nil
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		clientcmd.NewDefaultClientConfigLoadingRules(), &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("no --kubeconfig, not in a cluster, and no usable $KUBECONFIG: %w", err)
	}
	return cfg, nil
}

// withOwnBucket copies cfg with a token bucket of its own, of the given rate, for one traffic
// class. In a shared bucket the requests admission reviews wait on would queue behind the
// binder's writes, and a binding backlog at a low QPS (after a leader takes over, say) would hold
// reviews past the apiserver's webhook timeout, which with failurePolicy Fail refuses the write
// (TestReviewsDoNotWaitForBinderWrites); the other way round, a tenant's flood of reviews would
// hold up the binder and the Lease renewals.
func withOwnBucket(cfg *rest.Config, r APIRate, userAgent string) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = r.QPS, r.Burst
	cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(r.QPS, r.Burst)
	cfg.UserAgent = userAgent
	return cfg
}

// controllersRate is the --kube-api-qps bucket's size, for the classes sized like it.
func (o ServeFlags) controllersRate() APIRate {
	return APIRate{QPS: o.KubeAPIQPS, Burst: o.KubeAPIBurst}
}

// liveReader is an uncached client of one traffic class, with its own token bucket; limiter,
// when set, makes that bucket (the webhooks' is webhook.NewLiveReadRateLimiter).
func liveReader(cfg *rest.Config, r APIRate, userAgent string, mgr ctrl.Manager, limiter flowcontrol.RateLimiter) (client.Reader, error) {
	cfg = withOwnBucket(cfg, r, userAgent)
	if limiter != nil {
		cfg.RateLimiter = limiter
	}
	c, err := client.New(cfg, client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return nil, fmt.Errorf("building the %s client: %w", userAgent, err)
	}
	return c, nil
}

// Serve runs pvguard until ctx ends: the webhooks and the audit on every replica, the binder,
// the report writer and the certificate rotator on the elected one, all over one informer cache.
func Serve(ctx context.Context, o ServeFlags, log logr.Logger) error {
	if err := o.validate(); err != nil {
		return err
	}
	if err := applyMemoryLimit(o.MemoryLimit, os.Getenv("GOMEMLIMIT"), log); err != nil {
		return err
	}
	cfg, err := serveRESTConfig(o)
	if err != nil {
		return err
	}
	mgr, lease, err := newManager(cfg, o, log)
	if err != nil {
		return err
	}
	if err := clusterview.SetupIndexes(ctx, mgr.GetCache()); err != nil {
		return err
	}
	getCertificate, certReady, err := servingCertificates(ctx, mgr, o, log)
	if err != nil {
		return err
	}
	clientCAs, err := loadClientCAs(o.ClientCAFile)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		certs.NewExpiryCollector(getCertificate))
	if err := clusterview.CountCachedObjects(ctx, mgr.GetCache(), reg); err != nil {
		return err
	}
	engines := &engineRef{}
	// Each traffic class reads live through a client of its own (APIClasses): the webhooks, the
	// audit and explanations, and the binder (the controllers' bucket).
	reviewReader, err := liveReader(cfg, o.APIClasses.LiveReads, "pvguard-webhook", mgr,
		webhook.NewLiveReadRateLimiter(o.APIClasses.LiveReads.QPS, o.APIClasses.LiveReads.Burst))
	if err != nil {
		return err
	}
	auditReader, err := liveReader(cfg, o.APIClasses.Audit, "pvguard-audit", mgr, nil)
	if err != nil {
		return err
	}
	views := clusterview.New(mgr.GetCache(), reviewReader)
	auditViews := clusterview.New(mgr.GetCache(), auditReader)
	report, dashboard, firstAudit, err := addAudit(ctx, mgr, o, engines, auditViews, auditReader, reg, log)
	if err != nil {
		return err
	}
	var b *binder.Binder
	if o.Binder != binder.ModeOff {
		if b, err = addBinder(ctx, mgr, o, lease, engines, clusterview.New(mgr.GetCache(), mgr.GetAPIReader()), firstAudit, reg, log); err != nil {
			return err
		}
	}
	explainAPI, explainPages, err := explainHandlers(ctx, mgr, o, b, engines, auditViews, auditReader, log)
	if err != nil {
		return err
	}
	guard, err := readGuard(withOwnBucket(cfg, o.APIClasses.Access, "pvguard-access"), mgr.GetCache(), log)
	if err != nil {
		return err
	}
	queue, err := webhook.NewFairQueue(o.ReviewQueue, reg)
	if err != nil {
		return err
	}
	rights, err := admissionRights(withOwnBucket(cfg, o.APIClasses.Access, "pvguard-admission-rights"), o)
	if err != nil {
		return err
	}
	var cacheSynced atomic.Bool
	srv := web.NewServer(web.Options{
		Listen:          o.Listen,
		MetricsListen:   o.MetricsListen,
		Profiling:       o.Profiling,
		GetCertificate:  getCertificate,
		ClientCAs:       clientCAs,
		ShutdownDelay:   o.ShutdownDelay,
		Engines:         engines,
		Views:           views,
		Admission:       webhook.Limits{Queue: queue, LiveReadBudget: o.LiveReadBudget, RereadsPerRequester: o.RereadsPerRequester},
		ReadRights:      rights,
		Report:          report,
		Dashboard:       dashboard,
		ExplainAPI:      explainAPI,
		ExplainPages:    explainPages,
		Access:          guard,
		Registry:        reg,
		ShutdownTimeout: o.ShutdownTimeout,
		Log:             log.WithName("webhook"),
		ReadyChecks: map[string]func() error{
			"serving certificate": certReady,
			"informer cache": func() error {
				if !cacheSynced.Load() {
					return errors.New("not synced yet")
				}
				return nil
			},
		},
	})
	reloaded, err := addPolicySource(mgr, o, engines, srv, log)
	if err != nil {
		return err
	}
	if err := addAdmissionPolicyParams(ctx, mgr, o, lease, engines, reloaded, reg, log); err != nil {
		return err
	}
	if err := mgr.Add(everyReplica(srv.Start)); err != nil {
		return fmt.Errorf("adding webhook server: %w", err)
	}
	if err := mgr.Add(everyReplica(func(ctx context.Context) error {
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return nil
		}
		cacheSynced.Store(true)
		log.Info("informer cache synced; ready")
		if o.Ready != nil {
			o.Ready(srv.Addr())
		}
		return nil
	})); err != nil {
		return fmt.Errorf("adding readiness: %w", err)
	}
	return mgr.Start(ctx)
}

// serveRESTConfig is the cluster's config with pvguard's user agent and client rate limit.
func serveRESTConfig(o ServeFlags) (*rest.Config, error) {
	cfg, err := RESTConfig(o.Kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = o.KubeAPIQPS, o.KubeAPIBurst
	// One token bucket for every client made from this config: client-go otherwise gives each
	// resource type its own, and --kube-api-qps would bound volume writes and claim writes
	// separately (found by the binder benchmark against kube-controller-manager). The other
	// traffic classes have their own (APIClasses, withOwnBucket).
	cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(o.KubeAPIQPS, o.KubeAPIBurst)
	cfg.UserAgent = "pvguard"
	// Responses uncompressed, as kube-controller-manager and kube-scheduler ask for theirs: next
	// to the apiserver, gzip costs more than it saves. The informers' first lists were most of
	// the time to ready, the apiserver compressing them and pvguard inflating them
	// (docs/benchmarks.md, "Growth, beside kube-controller-manager's binder").
	cfg.DisableCompression = true
	return cfg, nil
}

// newManager builds the controller-runtime manager: the shared informer cache, the uncached
// reader and leader election. pvguard's own chi router serves every endpoint, so the manager's
// metrics and probe servers stay off.
//
// With leader election the Lease lock is wrapped in a leaseguard.Guard (returned; nil without
// election), which the binder asks before each write.
func newManager(cfg *rest.Config, o ServeFlags, log logr.Logger) (ctrl.Manager, *leaseguard.Guard, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, nil, fmt.Errorf("building scheme: %w", err)
	}
	if err := openreports.AddToScheme(scheme); err != nil {
		return nil, nil, fmt.Errorf("building scheme: %w", err)
	}
	mgrOpts := manager.Options{
		Scheme:                 scheme,
		Logger:                 log,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// The cache resolves a type's REST mapping by discovery when its first informer is
		// made (the report writer's, when this replica is elected), and holds the lock every
		// cache read takes, admission reviews' included, while it does: discovery gets its own
		// bucket so that it never waits for the binder's writes.
		MapperProvider: func(c *rest.Config, hc *http.Client) (meta.RESTMapper, error) {
			return apiutil.NewDynamicRESTMapper(withOwnBucket(c, o.controllersRate(), "pvguard-discovery"), hc)
		},
	}
	// No rule, audit or binder decision reads managedFields, and they are a third of a
	// controller-written object's size (docs/benchmarks.md, "Scale").
	mgrOpts.Cache.DefaultTransform = cache.TransformStripManagedFields()
	// Volumes, claims and classes are cached without what no rule, binder decision or
	// explanation reads (storage.CacheShape, made from what each declares it reads): managedFields,
	// the last-applied annotation, unread status fields. The binder writes them by patch, which
	// leaves what the cache dropped on the server. Their equal labels, annotations and resource
	// lists are shared (storage.Interner): together, half of what a cached object held.
	strip := explain.CacheShape().Transform(storage.NewInterner(cacheInternMaps))
	mgrOpts.Cache.ByObject = map[client.Object]cache.ByObject{
		// Pods are cached only as far as the rules read them (clusterview.StripPod).
		&corev1.Pod{}:                   {Transform: clusterview.StripPod},
		&corev1.PersistentVolume{}:      {Transform: strip},
		&corev1.PersistentVolumeClaim{}: {Transform: strip},
		&storagev1.StorageClass{}:       {Transform: strip},
	}
	if o.CertSecret != "" {
		// Only pvguard's own Secret is cached: not every Secret of its namespace, and no Secret
		// of anyone else's.
		mgrOpts.Cache.ByObject[&corev1.Secret{}] = cache.ByObject{
			Namespaces: map[string]cache.Config{o.Namespace: {}},
			Field:      fields.OneTermEqualSelector("metadata.name", o.CertSecret),
		}
	}
	if o.AdmissionPolicyParams != "" {
		// Likewise only the admission policies' parameter object among ConfigMaps.
		mgrOpts.Cache.ByObject[&corev1.ConfigMap{}] = cache.ByObject{
			Namespaces: map[string]cache.Config{o.Namespace: {}},
			Field:      fields.OneTermEqualSelector("metadata.name", o.AdmissionPolicyParams),
		}
	}
	// Drain the webhook server (delay, then in-flight reviews) before the manager gives up.
	grace := o.ShutdownDelay + o.ShutdownTimeout + 5*time.Second
	mgrOpts.GracefulShutdownTimeout = &grace
	var guard *leaseguard.Guard
	events := &deferredRecorder{}
	if (o.Binder != binder.ModeOff || o.AuditInterval > 0 || o.CertSecret != "" || o.AdmissionPolicyParams != "") && o.LeaderElect {
		// Only the binder, the report writer, the certificate rotator and the writer of the
		// admission policies' parameters are elected: every replica serves webhooks and audits,
		// one binds, writes reports and parameters and rotates certificates.
		mgrOpts.LeaderElection = true
		mgrOpts.LeaderElectionID = o.LeaderElectionID
		mgrOpts.LeaderElectionNamespace = o.LeaderElectionNamespace
		if mgrOpts.LeaderElectionNamespace == "" {
			mgrOpts.LeaderElectionNamespace = o.Namespace
		}
		if mgrOpts.LeaderElectionNamespace == "" {
			mgrOpts.LeaderElectionNamespace = "kube-system"
		}
		mgrOpts.LeaderElectionReleaseOnCancel = true
		mgrOpts.LeaseDuration, mgrOpts.RenewDeadline, mgrOpts.RetryPeriod = &o.LeaseDuration, &o.RenewDeadline, &o.RetryPeriod
		lock, err := leaseLock(cfg, o, mgrOpts.LeaderElectionNamespace, events)
		if err != nil {
			return nil, nil, err
		}
		guard = leaseguard.New(lock, o.RenewDeadline)
		mgrOpts.LeaderElectionResourceLockInterface = guard
	}
	mgr, err := ctrl.NewManager(cfg, mgrOpts)
	if err != nil {
		return nil, nil, fmt.Errorf("creating manager: %w", err)
	}
	if guard != nil {
		events.r = mgr.GetEventRecorderFor(guard.Identity()) //nolint:staticcheck // the election's core/v1 events, as controller-runtime records them
	}
	return mgr, guard, nil
}

// leaseLock is the Lease lock controller-runtime would make (its leaderelection.NewResourceLock):
// the same identity, user agent and request timeout, so that pvguard can wrap it.
func leaseLock(cfg *rest.Config, o ServeFlags, namespace string, events record.EventRecorder) (resourcelock.Interface, error) {
	host, err := os.Hostname()
	if err != nil {
		return nil, fmt.Errorf("naming the leader election identity: %w", err)
	}
	// AddUserAgent changes the config it is given: a copy, or every client of pvguard would write
	// as "leader-election" (and under another field manager than "pvguard").
	cfg = rest.AddUserAgent(withOwnBucket(cfg, o.APIClasses.LeaderElection, cfg.UserAgent), "leader-election")
	// One hung request must not cost the Lease: half the renew deadline, at least a second.
	cfg.Timeout = max(o.RenewDeadline/2, time.Second)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the leader election client: %w", err)
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, namespace, o.LeaderElectionID, cs.CoreV1(), cs.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: host + "_" + string(uuid.NewUUID()), EventRecorder: events})
	if err != nil {
		return nil, fmt.Errorf("creating the leader election lock: %w", err)
	}
	return lock, nil
}

// deferredRecorder lets the Lease lock, made before the manager, record the election's events
// through the manager's recorder, set once the manager exists (before the election starts).
type deferredRecorder struct{ r record.EventRecorder }

func (d *deferredRecorder) Event(obj runtime.Object, eventtype, reason, message string) {
	if d.r != nil {
		d.r.Event(obj, eventtype, reason, message)
	}
}

func (d *deferredRecorder) Eventf(obj runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	if d.r != nil {
		d.r.Eventf(obj, eventtype, reason, messageFmt, args...)
	}
}

func (d *deferredRecorder) AnnotatedEventf(obj runtime.Object, annotations map[string]string, eventtype, reason, messageFmt string, args ...any) {
	if d.r != nil {
		d.r.AnnotatedEventf(obj, annotations, eventtype, reason, messageFmt, args...)
	}
}

// loadClientCAs reads --client-ca-file; nil when it is not set.
func loadClientCAs(file string) (*x509.CertPool, error) {
	if file == "" {
		return nil, nil
	}
	pemData, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("reading --client-ca-file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemData) {
		return nil, fmt.Errorf("--client-ca-file %s: no PEM certificates", file)
	}
	return pool, nil
}

// addAudit registers the audit runner (every replica) and the report writer (the elected one),
// and returns the report and dashboard handlers and a channel closed when the first full audit
// has ended; all nil when the audit is off.
func addAudit(ctx context.Context, mgr ctrl.Manager, o ServeFlags, engines *engineRef, views *clusterview.Source, live client.Reader, reg prometheus.Registerer, log logr.Logger) (report, dashboard http.Handler, firstAudit <-chan struct{}, err error) {
	if o.AuditInterval <= 0 {
		return nil, nil, nil, nil
	}
	auditLog := log.WithName("audit")
	runner := audit.NewRunner(audit.RunnerOptions{
		Interval: o.AuditInterval, Cache: mgr.GetCache(), Live: live, View: views.View,
		Engine: engines.Engine, Registry: reg, Log: auditLog,
	})
	if err := audit.WatchChanges(ctx, mgr.GetCache(), runner); err != nil {
		return nil, nil, nil, err
	}
	if err := mgr.Add(runner); err != nil {
		return nil, nil, nil, fmt.Errorf("adding audit: %w", err)
	}
	if err := mgr.Add(audit.NewWriter(runner, mgr.GetClient(), log.WithName("reports"))); err != nil {
		return nil, nil, nil, fmt.Errorf("adding report writer: %w", err)
	}
	return web.ReportHandler(runner, mgr.GetCache(), auditLog), web.DashboardHandler(runner, mgr.GetCache(), auditLog), runner.FirstAudit(), nil
}

// explainHandlers are the explain endpoints, served with the dashboard (nil when the audit is
// off): explanations computed from the informer cache and, when the binder runs in this process,
// its plans (binder.Options.KeepPlans), so that a page reads the plan the binder binds by. With
// the binder off (or on a replica that is not elected), the pool is planned for all of them once,
// when the cache has synced, and again as objects change (explain.Plans), not once a question:
// one plan per process whatever the mode. Each pair is judged
// by the current policy as the binder that binds writes it: pvguard's, or with it off upstream's,
// whose writes the webhook judges all the same. A claim's provisioner's Lease is read live.
func explainHandlers(ctx context.Context, mgr ctrl.Manager, o ServeFlags, b *binder.Binder, engines *engineRef, views *clusterview.Source, live client.Reader, log logr.Logger) (api, pages http.Handler, err error) {
	if o.AuditInterval <= 0 {
		return nil, nil, nil
	}
	eo := explain.ServeOptions{Cache: mgr.GetCache(), Log: log.WithName("explain"),
		Engine: engines.Engine, View: views.View, Identity: binder.UpstreamBinderIdentity, Leases: live}
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
	return explain.API(eo), explain.Pages(eo), nil
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
// nil (the request's own objects only) unless the reviews' identities can be trusted.
func admissionRights(cfg *rest.Config, o ServeFlags) (webhook.ReadRights, error) {
	switch o.AdmissionReadRights {
	case "", "auto":
		if o.ClientCAFile == "" {
			return nil, nil
		}
	case "request":
		return nil, nil
	case "rbac":
	default:
		return nil, fmt.Errorf("--admission-read-rights=%s: want auto, request or rbac", o.AdmissionReadRights)
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

// addPolicySource gives the engines their policy: the --config file, watched and reloaded on
// every replica (reloaded then says when a new config takes effect), or the defaults.
func addPolicySource(mgr ctrl.Manager, o ServeFlags, engines *engineRef, srv *web.Server, log logr.Logger) (reloaded func() <-chan struct{}, err error) {
	if o.ConfigFile == "" {
		engines.src = webhook.StaticEngine{E: policy.NewEngine(nil)}
		return nil, nil
	}
	cf, err := webhook.LoadConfigFile(o.ConfigFile, srv.Metrics(), log.WithName("config"))
	if err != nil {
		return nil, err
	}
	engines.src = cf
	if err := mgr.Add(everyReplica(func(ctx context.Context) error { return cf.Watch(ctx, 10*time.Second) })); err != nil {
		return nil, fmt.Errorf("adding config watcher: %w", err)
	}
	return cf.Reloaded, nil
}

// addAdmissionPolicyParams keeps the admission policies' parameter object equal to the loaded
// config (--admission-policy-params): the policies and the webhook then enforce the same
// exemptions and actions, before and after a reload. Its writes are held to the Lease as the
// binder's are (leaderWriter).
func addAdmissionPolicyParams(ctx context.Context, mgr ctrl.Manager, o ServeFlags, lease *leaseguard.Guard, engines *engineRef, reloaded func() <-chan struct{}, reg prometheus.Registerer, log logr.Logger) error {
	if o.AdmissionPolicyParams == "" {
		return nil
	}
	writer, writeGuard, err := leaderWriter(mgr, lease)
	if err != nil {
		return fmt.Errorf("building the admission policies' parameter writer: %w", err)
	}
	s, err := policyparams.NewSync(ctx, policyparams.SyncOptions{
		Object:  policy.ParamObject{Namespace: o.Namespace, Name: o.AdmissionPolicyParams},
		Engines: engines, Reloaded: reloaded, Cache: mgr.GetCache(), Writer: writer, Elected: mgr.Elected(),
		WriteGuard: writeGuard, Registry: reg, Log: log.WithName("admission-policy-params"),
	})
	if err != nil {
		return err
	}
	if err := mgr.Add(s); err != nil {
		return fmt.Errorf("adding the admission policies' parameter writer: %w", err)
	}
	return nil
}

// servingCertificates sets up where the serving certificate comes from: a directory reloaded on
// change (--cert-dir, optionally filled by --self-signed), or the self-managed Secret, which the
// elected replica keeps current and every replica serves from.
func servingCertificates(ctx context.Context, mgr manager.Manager, o ServeFlags, log logr.Logger) (func(*tls.ClientHelloInfo) (*tls.Certificate, error), func() error, error) {
	if o.CertSecret == "" {
		certDir := o.CertDir
		if o.SelfSigned {
			if certDir == "" {
				var err error
				if certDir, err = os.MkdirTemp("", "pvguard-certs-"); err != nil {
					return nil, nil, fmt.Errorf("creating certificate directory: %w", err)
				}
			}
			if err := issueSelfSigned(certDir, o.SelfSignedHosts); err != nil {
				return nil, nil, err
			}
			log.Info("issued a self-signed serving certificate", "dir", certDir, "ca", filepath.Join(certDir, certs.CAFile))
		}
		watcher, err := certwatcher.New(filepath.Join(certDir, certs.CertFile), filepath.Join(certDir, certs.KeyFile))
		if err != nil {
			return nil, nil, fmt.Errorf("loading serving certificate from %s: %w", certDir, err)
		}
		if err := mgr.Add(watcher); err != nil {
			return nil, nil, fmt.Errorf("adding certificate watcher: %w", err)
		}
		return watcher.GetCertificate, func() error { return nil }, nil
	}

	svc := o.ServiceName
	sm := certs.SelfManaged{
		Namespace: o.Namespace, SecretName: o.CertSecret, WebhookConfigurationName: o.WebhookConfigurationName,
		DNSNames: []string{svc, svc + "." + o.Namespace, svc + "." + o.Namespace + ".svc", svc + "." + o.Namespace + ".svc.cluster.local"},
		Validity: o.CertValidity, CAValidity: o.CAValidity, Overlap: o.CAOverlap,
	}
	for _, h := range o.CertHosts {
		if ip := net.ParseIP(h); ip != nil {
			sm.IPs = append(sm.IPs, ip)
		} else if h = strings.TrimSpace(h); h != "" {
			sm.DNSNames = append(sm.DNSNames, h)
		}
	}
	rotator := certs.NewRotator(sm, mgr.GetClient(), mgr.GetAPIReader(), o.CertCheckInterval, log.WithName("certs"))
	if err := mgr.Add(rotator); err != nil {
		return nil, nil, fmt.Errorf("adding certificate rotator: %w", err)
	}
	source := &certs.SecretSource{}
	load := func(obj any) {
		if secret, ok := obj.(*corev1.Secret); ok {
			if err := source.Load(secret); err != nil {
				log.Error(err, "keeping the previous serving certificate")
			}
		}
		rotator.Trigger()
	}
	inf, err := mgr.GetCache().GetInformer(ctx, &corev1.Secret{})
	if err != nil {
		return nil, nil, fmt.Errorf("watching Secret %s/%s: %w", o.Namespace, o.CertSecret, err)
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    load,
		UpdateFunc: func(_, obj any) { load(obj) },
		DeleteFunc: func(any) { rotator.Trigger() },
	}); err != nil {
		return nil, nil, fmt.Errorf("watching Secret %s/%s: %w", o.Namespace, o.CertSecret, err)
	}
	return source.GetCertificate, source.Ready, nil
}

// everyReplica is a runnable that runs on every replica, leader or not.
type everyReplica func(context.Context) error

func (f everyReplica) Start(ctx context.Context) error { return f(ctx) }
func (everyReplica) NeedLeaderElection() bool          { return false }

// addBinder builds the binder over the manager's cache and registers it; in active mode it runs
// only on the elected replica. The explain pages read its in-flight state.
func addBinder(ctx context.Context, mgr manager.Manager, o ServeFlags, lease *leaseguard.Guard, engines *engineRef, views *clusterview.Source, firstAudit <-chan struct{}, reg prometheus.Registerer, log logr.Logger) (*binder.Binder, error) {
	identity, err := whoAmI(ctx, mgr.GetConfig())
	if err != nil {
		return nil, err
	}
	writer, writeGuard, err := leaderWriter(mgr, lease)
	if err != nil {
		return nil, err
	}
	var cacheReader client.Reader = mgr.GetCache() // the cache itself: cachelist reads its informers' stores
	if o.BinderHooks.WrapCache != nil {
		cacheReader = o.BinderHooks.WrapCache(cacheReader)
	}
	noFits, err := noVolumeFitsRecorder(mgr, o.NoVolumeFitsAfter)
	if err != nil {
		return nil, err
	}
	b, err := binder.New(binder.Options{
		Mode:        o.Binder,
		Workers:     o.BinderWorkers,
		Resync:      o.BinderResync,
		Engine:      engines.Engine,
		Views:       views.View,
		Identity:    identity,
		Registry:    reg,
		Recorder:    mgr.GetEventRecorderFor("pvguard-binder"), //nolint:staticcheck // core/v1 events, as the upstream controller records them
		Log:         log.WithName("binder"),
		Cache:       cacheReader,
		Live:        mgr.GetAPIReader(),
		Writer:      writer,
		WriteGuard:  writeGuard,
		BeforeWrite: o.BinderHooks.BeforeWrite,

		NoVolumeFitsAfter:    o.NoVolumeFitsAfter,
		Explain:              explain.NoVolumeFits,
		NoVolumeFitsRecorder: noFits,
		// The explanations (served with the audit) read the binder's plans (explainHandlers).
		KeepPlans: o.AuditInterval > 0,
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
	log.Info("binder enabled", "mode", o.Binder, "identity", identity.Username, "leaderElection", o.LeaderElect)
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

// leaderWriter is the client the elected replica's writers (the binder, the admission policies'
// parameter object) write through. With leader election every write is checked against the Lease
// just before it is sent (after the client's rate limiter, which can hold a write longer than a
// Lease lasts), and the writer checks it too (the returned guard) before it starts a write. It
// shares the one token bucket of cfg with the rest of pvguard.
func leaderWriter(mgr manager.Manager, lease *leaseguard.Guard) (client.Client, func() error, error) {
	if lease == nil {
		return mgr.GetClient(), nil, nil
	}
	cfg := rest.CopyConfig(mgr.GetConfig())
	cfg.Wrap(lease.RoundTripper)
	c, err := client.New(cfg, client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return nil, nil, fmt.Errorf("building a Lease-guarded client: %w", err)
	}
	return c, lease.Check, nil
}

// noVolumeFitsRecorder records the binder's NoVolumeFits events (nil when they are off): core/v1
// events, as the binder's others, whose correlator makes a repeat of the same message a higher
// count on the same Event and a new message a new Event (docs/explain.md says why not
// events.k8s.io's series). It has a broadcaster of its own: the correlator's spam filter lets a
// claim's events of one type through 25 at once and then one per 5 minutes, and the Warning
// events the binder repeats on every sync of a claim (VolumeMismatch, ProvisioningFailed) would
// otherwise spend that budget. Its filter lets one event per claim through per
// --no-volume-fits-after (the binder's own pace), and it remembers 32,768 events, so a refresh
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

// whoAmI asks the apiserver who pvguard is, so the binder judges its own writes exactly as the
// webhook will see them.
func whoAmI(ctx context.Context, cfg *rest.Config) (policy.UserInfo, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return policy.UserInfo{}, fmt.Errorf("creating clientset: %w", err)
	}
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return policy.UserInfo{}, fmt.Errorf("asking the apiserver who pvguard is (SelfSubjectReview): %w", err)
	}
	return policy.UserInfo{Username: r.Status.UserInfo.Username, Groups: r.Status.UserInfo.Groups}, nil
}

// engineRef lets the server be built before the config file, whose reload metrics it owns.
type engineRef struct{ src webhook.EngineSource }

func (e *engineRef) Engine() *policy.Engine { return e.src.Engine() }

func issueSelfSigned(dir string, hosts []string) error {
	req := certs.Request{}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			req.IPs = append(req.IPs, ip)
		} else if h = strings.TrimSpace(h); h != "" {
			req.DNSNames = append(req.DNSNames, h)
		}
	}
	b, err := certs.Issue(req)
	if err != nil {
		return err
	}
	return b.WriteDir(dir)
}

// cacheInternMaps bounds the cache's table of shared maps (storage.Interner), per type: a
// cluster's distinct labels, annotations and sizes of volumes and claims are far fewer, and a
// tenant filling it with distinct ones makes it hold at most about 25 MiB (maps of up to 1 KiB,
// each kept with its key), after which it starts again empty.
const cacheInternMaps = 4096
