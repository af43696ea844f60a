package cli

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"reflect"
	"time"

	"github.com/go-logr/logr"
	openreports "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/pvguard/pvguard/explain"
	"github.com/pvguard/pvguard/internal/cachelist"
	"github.com/pvguard/pvguard/internal/clusterview"
	"github.com/pvguard/pvguard/internal/leaseguard"
	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/storage"
)

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

// serveRESTConfig is the cluster's config with pvguard's user agent and client rate limit.
func serveRESTConfig(o APIOptions) (*rest.Config, error) {
	cfg, err := RESTConfig(o.Kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = o.QPS, o.Burst
	// One token bucket for every client made from this config: client-go otherwise gives each
	// resource type its own, and --kube-api-qps would bound volume writes and claim writes
	// separately (found by the binder benchmark against kube-controller-manager). The other
	// traffic classes have their own (APIOptions.Classes, withOwnBucket).
	cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(o.QPS, o.Burst)
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
// listed is told how many objects each informer's first list holds (cachelist.CutWhereListed).
func newManager(cfg *rest.Config, o ServeFlags, listed func(int64), log logr.Logger) (ctrl.Manager, *leaseguard.Guard, error) {
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
			return apiutil.NewDynamicRESTMapper(withOwnBucket(c, o.API.controllersRate(), "pvguard-discovery"), hc)
		},
	}
	var err error
	if mgrOpts.Cache, err = cacheOptions(cfg, scheme, o, listed); err != nil {
		return nil, nil, err
	}
	// Drain the webhook server (delay, then in-flight reviews) before the manager gives up.
	grace := o.ShutdownDelay + o.ShutdownTimeout + 5*time.Second
	mgrOpts.GracefulShutdownTimeout = &grace
	var guard *leaseguard.Guard
	events := &deferredRecorder{}
	if o.elected() && o.LeaderElection.Elect {
		// Only the binder, the report writer, the certificate rotator and the writer of the
		// admission policies' parameters are elected: every replica serves webhooks and audits,
		// one binds, writes reports and parameters and rotates certificates.
		le := o.LeaderElection
		mgrOpts.LeaderElection = true
		mgrOpts.LeaderElectionID = le.ID
		mgrOpts.LeaderElectionNamespace = le.Namespace
		if mgrOpts.LeaderElectionNamespace == "" {
			mgrOpts.LeaderElectionNamespace = o.Namespace
		}
		if mgrOpts.LeaderElectionNamespace == "" {
			mgrOpts.LeaderElectionNamespace = "kube-system"
		}
		mgrOpts.LeaderElectionReleaseOnCancel = true
		mgrOpts.LeaseDuration, mgrOpts.RenewDeadline, mgrOpts.RetryPeriod = &le.LeaseDuration, &le.RenewDeadline, &le.RetryPeriod
		lock, err := leaseLock(cfg, le, o.API.Classes.LeaderElection, mgrOpts.LeaderElectionNamespace, events)
		if err != nil {
			return nil, nil, err
		}
		guard = leaseguard.New(lock, le.RenewDeadline)
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

// cacheOptions is what the informer cache keeps: of volumes, claims, classes and pods only what
// pvguard reads, and of Secrets and ConfigMaps only pvguard's own. The kinds it keeps cut
// (cutKinds) are listed through page readers that cut their pages before decoding them; scheme
// knows their types.
func cacheOptions(cfg *rest.Config, scheme *runtime.Scheme, o ServeFlags, listed func(int64)) (cache.Options, error) {
	var c cache.Options
	// No rule, audit or binder decision reads managedFields, and they are a third of a
	// controller-written object's size (docs/benchmarks.md, "Scale").
	c.DefaultTransform = cache.TransformStripManagedFields()
	c.ByObject = map[client.Object]cache.ByObject{}
	kinds := cutKinds()
	for _, k := range kinds {
		c.ByObject[k.obj] = cache.ByObject{Transform: k.transform}
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return c, fmt.Errorf("creating the informers' HTTP client: %w", err)
	}
	c.HTTPClient = hc // the informers' and the page readers': one pool of connections
	if o.Certs.Secret != "" {
		// Only pvguard's own Secret is cached: not every Secret of its namespace, and no Secret
		// of anyone else's.
		c.ByObject[&corev1.Secret{}] = cache.ByObject{
			Namespaces: map[string]cache.Config{o.Namespace: {}},
			Field:      fields.OneTermEqualSelector("metadata.name", o.Certs.Secret),
		}
	}
	if o.AdmissionPolicyParams != "" {
		// Likewise only the admission policies' parameter object among ConfigMaps.
		c.ByObject[&corev1.ConfigMap{}] = cache.ByObject{
			Namespaces: map[string]cache.Config{o.Namespace: {}},
			Field:      fields.OneTermEqualSelector("metadata.name", o.AdmissionPolicyParams),
		}
	}
	reads, err := pageReaders(cfg, scheme, hc, kinds)
	if err != nil {
		return c, err
	}
	// Volumes, claims, classes and pods are cut where they arrive, in the page of the list or
	// the watch event that brings them, and listed in pages, each decoded where it arrived.
	c.NewInformer = cachelist.CutWhereListed(c.ByObject, reads, listed)
	return c, nil
}

// pageReaders are the cut kinds' page readers, by type, each over hc (the informers' client), each
// cutting its pages' managed fields and last-applied annotations before decoding them: the kinds
// are cached in every namespace and without a selector, so that the reader asks for what the
// informer's own list function would.
func pageReaders(cfg *rest.Config, scheme *runtime.Scheme, hc *http.Client, kinds map[string]cutKind) (map[reflect.Type]cachelist.ListFunc, error) {
	codecs := serializer.NewCodecFactory(scheme)
	// As client-go decodes a list for controller-runtime's cache: the list's kind left unset.
	decoder := runtime.WithoutVersionDecoder{Decoder: codecs.UniversalDeserializer()}
	params := runtime.NewParameterCodec(scheme)
	reads := make(map[reflect.Type]cachelist.ListFunc, len(kinds))
	for resource, k := range kinds {
		gvk, err := apiutil.GVKForObject(k.obj, scheme)
		if err != nil {
			return nil, fmt.Errorf("reading the pages of %s: %w", resource, err)
		}
		list, err := scheme.New(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err != nil {
			return nil, fmt.Errorf("reading the pages of %s: %w", resource, err)
		}
		rc, err := apiutil.RESTClientForGVK(gvk, false, false, cfg, codecs, hc)
		if err != nil {
			return nil, fmt.Errorf("reading the pages of %s: %w", resource, err)
		}
		reads[reflect.TypeOf(k.obj)] = cachelist.NewPageReader(rc, resource, list, params, decoder, storage.AnnLastApplied).List
	}
	return reads, nil
}

// cutKind is a kind cached through a transform.
type cutKind struct {
	obj       client.Object
	transform toolscache.TransformFunc
}

// cutKinds are the kinds the cache keeps cut, by resource. Each transform drops managedFields and
// kubectl's last-applied annotation (and more), so their lists arrive without those
// (cachelist.PageReader): a share of the start's decoding and of its garbage
// (TestCutListsKeepWhatTheCacheKeeps holds each transform to it).
func cutKinds() map[string]cutKind {
	// Volumes, claims and classes are cached without what no rule, binder decision or
	// explanation reads (storage.CacheShape, made from what each declares it reads): managedFields,
	// the last-applied annotation, unread status fields. The binder writes them by patch, which
	// leaves what the cache dropped on the server. Their equal strings, maps, slices and small
	// structs (labels, annotations, sizes, classes, drivers, node affinities, ...) are shared
	// between objects (storage.Interner): together, most of what a cached object held.
	strip := explain.CacheTransform()
	return map[string]cutKind{
		// Pods are cached only as far as the rules read them (clusterview.StripPod).
		"pods":                   {&corev1.Pod{}, clusterview.StripPod},
		"persistentvolumes":      {&corev1.PersistentVolume{}, strip},
		"persistentvolumeclaims": {&corev1.PersistentVolumeClaim{}, strip},
		"storageclasses":         {&storagev1.StorageClass{}, strip},
	}
}

// leaseLock is the Lease lock controller-runtime would make (its leaderelection.NewResourceLock):
// the same identity, user agent and request timeout, so that pvguard can wrap it. Its client has
// the Lease's token bucket (rate).
func leaseLock(cfg *rest.Config, o LeaderElectionOptions, rate APIRate, namespace string, events record.EventRecorder) (resourcelock.Interface, error) {
	host, err := os.Hostname()
	if err != nil {
		return nil, fmt.Errorf("naming the leader election identity: %w", err)
	}
	// AddUserAgent changes the config it is given: a copy, or every client of pvguard would write
	// as "leader-election" (and under another field manager than "pvguard").
	cfg = rest.AddUserAgent(withOwnBucket(cfg, rate, cfg.UserAgent), "leader-election")
	// One hung request must not cost the Lease: half the renew deadline, at least a second.
	cfg.Timeout = max(o.RenewDeadline/2, time.Second)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the leader election client: %w", err)
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, namespace, o.ID, cs.CoreV1(), cs.CoordinationV1(),
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

// everyReplica is a runnable that runs on every replica, leader or not.
type everyReplica func(context.Context) error

func (f everyReplica) Start(ctx context.Context) error { return f(ctx) }

func (everyReplica) NeedLeaderElection() bool { return false }

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
