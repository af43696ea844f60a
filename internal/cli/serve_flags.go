package cli

import (
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/binder"
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

// controllersRate is the --kube-api-qps bucket's size, for the classes sized like it.
func (o ServeFlags) controllersRate() APIRate {
	return APIRate{QPS: o.KubeAPIQPS, Burst: o.KubeAPIBurst}
}
