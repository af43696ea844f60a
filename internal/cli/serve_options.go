package cli

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/pvguard/pvguard/binder"
	"github.com/pvguard/pvguard/webhook"
)

// APIOptions say which cluster pvguard talks to and how fast: the token bucket of its
// controllers and those of its other traffic classes.
type APIOptions struct {
	Kubeconfig string
	// QPS and Burst (--kube-api-qps, --kube-api-burst) size the controllers' token bucket: the
	// informers, the binder's reads and writes, its events, the reports and the certificates.
	// The other traffic classes have buckets of their own (Classes), so that none can starve
	// another.
	QPS     float32
	Burst   int
	Classes APIClasses
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

// controllersRate is the --kube-api-qps bucket's size, for the classes sized like it.
func (o APIOptions) controllersRate() APIRate { return APIRate{QPS: o.QPS, Burst: o.Burst} }

// classes are the traffic classes by the flag names of their buckets.
func (o *APIOptions) classes() []apiClass {
	return []apiClass{
		{"live-read", "the admission webhooks' live reads (cache misses, re-reads of denials)", &o.Classes.LiveReads},
		{"audit", "the audit's and the explanations' live reads", &o.Classes.Audit},
		{"access", "the token and access reviews of the report, dashboard and explanations' callers", &o.Classes.Access},
		{"leader-election", "the leader Lease's reads and renewals", &o.Classes.LeaderElection},
	}
}

type apiClass struct {
	name, what string
	rate       *APIRate
}

// AddFlags defines the flags of the cluster connection and its token buckets on f.
func (o *APIOptions) AddFlags(f *pflag.FlagSet) {
	f.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "kubeconfig file (default: in-cluster, else $KUBECONFIG)")
	f.Float32Var(&o.QPS, "kube-api-qps", o.QPS, "client QPS towards the apiserver")
	f.IntVar(&o.Burst, "kube-api-burst", o.Burst, "client burst towards the apiserver")
	for _, c := range o.classes() {
		f.Float32Var(&c.rate.QPS, c.name+"-qps", c.rate.QPS, "client QPS of "+c.what+" (a token bucket of its own)")
		f.IntVar(&c.rate.Burst, c.name+"-burst", c.rate.Burst, "client burst of "+c.what)
	}
}

func (o *APIOptions) validate() []error {
	var errs []error
	if o.QPS <= 0 || o.Burst <= 0 {
		errs = append(errs, errors.New("--kube-api-qps and --kube-api-burst must be positive"))
	}
	for _, c := range o.classes() {
		if c.rate.QPS <= 0 || c.rate.Burst <= 0 {
			errs = append(errs, fmt.Errorf("--%s-qps and --%s-burst must be positive", c.name, c.name))
		}
	}
	return errs
}

// CertOptions say where the serving certificate comes from (a directory, one issued at start-up,
// or the self-managed Secret) and which client certificates the webhook paths require.
type CertOptions struct {
	// Dir holds tls.crt and tls.key, reloaded on change (--cert-dir).
	Dir string
	// SelfSigned issues a CA and serving certificate for SelfSignedHosts at start-up, into Dir
	// when set.
	SelfSigned      bool
	SelfSignedHosts []string
	// Secret turns on self-managed certificates (--cert-secret): the elected replica issues a CA
	// and serving certificate into this Secret in pvguard's namespace and rotates them, every
	// replica serves from it, and the caBundle of the webhook configurations named
	// WebhookConfigurationName follows it.
	Secret string
	// ServiceName is pvguard's Service: the self-managed certificate is valid for its DNS names.
	ServiceName              string
	WebhookConfigurationName string
	// Hosts are extra DNS names and IPs for the self-managed certificate (--cert-hosts).
	Hosts         []string
	Validity      time.Duration
	CAValidity    time.Duration
	CAOverlap     time.Duration
	CheckInterval time.Duration
	// ClientCAFile, when set, makes the webhook paths require a client certificate it signed.
	ClientCAFile string
}

// AddFlags defines the certificates' flags on f.
func (o *CertOptions) AddFlags(f *pflag.FlagSet) {
	f.StringVar(&o.Dir, "cert-dir", o.Dir, "directory with tls.crt and tls.key, reloaded on change")
	f.BoolVar(&o.SelfSigned, "self-signed", o.SelfSigned, "issue a CA and serving certificate at start-up (local use); written to --cert-dir if given")
	f.StringSliceVar(&o.SelfSignedHosts, "self-signed-hosts", o.SelfSignedHosts, "DNS names and IPs of the self-signed certificate")
	f.StringVar(&o.Secret, "cert-secret", o.Secret, "self-managed certificates: keep a CA and serving certificate in this Secret (in --namespace), rotated by the elected replica, with the caBundle of --webhook-configuration-name kept in step")
	f.StringVar(&o.ServiceName, "service-name", o.ServiceName, "pvguard's Service: the self-managed certificate is valid for its DNS names")
	f.StringVar(&o.WebhookConfigurationName, "webhook-configuration-name", o.WebhookConfigurationName, "the Validating and Mutating webhook configurations whose caBundle self-managed certificates keep current")
	f.StringSliceVar(&o.Hosts, "cert-hosts", o.Hosts, "extra DNS names and IPs for the self-managed certificate")
	f.DurationVar(&o.Validity, "cert-validity", o.Validity, "lifetime of self-managed serving certificates (renewed with a third left)")
	f.DurationVar(&o.CAValidity, "ca-validity", o.CAValidity, "lifetime of the self-managed CA (a new one is trusted with a third left, and used --ca-overlap later)")
	f.DurationVar(&o.CAOverlap, "ca-overlap", o.CAOverlap, "how long a new CA is trusted in the caBundle before it signs the serving certificate")
	f.DurationVar(&o.CheckInterval, "cert-check-interval", o.CheckInterval, "how often the elected replica checks the self-managed certificates")
	f.StringVar(&o.ClientCAFile, "client-ca-file", o.ClientCAFile, "PEM CA bundle: webhook requests must present a client certificate it signed")
}

// validate checks the certificates' options; namespace is pvguard's, where the self-managed
// Secret is kept.
func (o *CertOptions) validate(namespace string) []error {
	var errs []error
	switch {
	case o.Dir == "" && !o.SelfSigned && o.Secret == "":
		errs = append(errs, errors.New("--cert-dir, --cert-secret or --self-signed is required: the apiserver only calls webhooks over TLS"))
	case o.Secret != "" && (o.Dir != "" || o.SelfSigned):
		errs = append(errs, errors.New("--cert-secret (self-managed certificates) excludes --cert-dir and --self-signed"))
	case o.Secret != "" && namespace == "":
		errs = append(errs, errors.New("--cert-secret needs --namespace (or $POD_NAMESPACE)"))
	}
	if o.Secret != "" && (o.Validity <= 0 || o.CAValidity < o.Validity || o.CAOverlap <= 0 || o.CheckInterval <= 0) {
		errs = append(errs, errors.New("--cert-validity, --ca-overlap and --cert-check-interval must be positive and --ca-validity at least --cert-validity"))
	}
	return errs
}

// WebhookOptions say how the admission webhooks judge: what their messages may name, how long
// and how often a denial is re-read live, and how reviews queue.
type WebhookOptions struct {
	// ReadRights (--admission-read-rights) says what admission messages name besides the
	// request's own objects: "request" nothing more; "rbac" also what the requester's RBAC lets
	// it read (asked with SubjectAccessReviews), which trusts the identity a review states, so
	// only the apiserver must be able to send one; "auto" (default) is rbac with a client CA
	// (CertOptions.ClientCAFile), else request.
	ReadRights string
	// LiveReadBudget bounds a denial's live re-read (webhook.Limits).
	LiveReadBudget time.Duration
	// RereadsPerRequester is each requester's allowance of live re-reads a second (webhook.Limits).
	RereadsPerRequester float64
	// ReviewQueue sizes the fair queue of admission reviews (webhook.FairQueueOptions).
	ReviewQueue webhook.FairQueueOptions
}

// AddFlags defines the admission webhooks' flags on f.
func (o *WebhookOptions) AddFlags(f *pflag.FlagSet) {
	f.StringVar(&o.ReadRights, "admission-read-rights", o.ReadRights, "what admission messages name beyond the request's own objects: request (nothing), rbac (what the requester may read, by SubjectAccessReview; trusts the review's identity, so only the apiserver may reach the webhook port) or auto (rbac with --client-ca-file, else request)")
	f.Float64Var(&o.RereadsPerRequester, "live-rereads-per-requester", o.RereadsPerRequester, "denials of one requester re-read live a second (twice as many at once); past it that requester's denials stand on the cache, and the live reads' bucket stays for others")
	f.DurationVar(&o.LiveReadBudget, "live-read-budget", o.LiveReadBudget, "how long the live re-read that confirms a decision made on the cache (a denial, or a link to a claim version the cache does not hold) may take, its wait for a rate-limiter token included; past it the cache's decision stands")
	q := &o.ReviewQueue
	f.IntVar(&q.Concurrency, "review-concurrency", q.Concurrency, "admission reviews judged at once; others wait in a queue per requester, served in turn")
	f.IntVar(&q.PerRequester, "review-concurrency-per-requester", q.PerRequester, "admission reviews of one requester judged at once (at most --review-concurrency)")
	f.IntVar(&q.QueueLength, "review-queue-length", q.QueueLength, "admission reviews of one requester that may wait; more are answered unjudged with HTTP 429 (the registration's failure policy decides)")
	f.IntVar(&q.MaxWaiting, "review-max-waiting", q.MaxWaiting, "admission reviews that may wait in all; more are answered unjudged with HTTP 429 (the registration's failure policy decides)")
	f.Int64Var(&q.MaxWaitingBytes, "review-max-waiting-bytes", q.MaxWaitingBytes, "bytes of admission review bodies that may wait in all, a requester's share in proportion to --review-queue-length (0: no bound but the count); a review beyond is answered unjudged with HTTP 429")
}

func (o *WebhookOptions) validate() []error {
	var errs []error
	if o.RereadsPerRequester <= 0 {
		errs = append(errs, fmt.Errorf("--live-rereads-per-requester=%v: want a positive rate", o.RereadsPerRequester))
	}
	if o.LiveReadBudget <= 0 || o.LiveReadBudget >= time.Second {
		errs = append(errs, fmt.Errorf("--live-read-budget=%s: want a positive duration under 1s, a fraction of the webhook timeout (the shortest is 1s)", o.LiveReadBudget))
	}
	if _, err := webhook.NewFairQueue(o.ReviewQueue, nil); err != nil {
		errs = append(errs, fmt.Errorf("--review-concurrency, --review-concurrency-per-requester, --review-queue-length, --review-max-waiting: %w", err))
	}
	return errs
}

// AuditOptions say how often the live audit runs.
type AuditOptions struct {
	// Interval is how often the whole cache is audited (0 turns the audit off, and with it the
	// report, the dashboard and the explanations).
	Interval time.Duration
}

// AddFlags defines the audit's flags on f.
func (o *AuditOptions) AddFlags(f *pflag.FlagSet) {
	f.DurationVar(&o.Interval, "audit-interval", o.Interval, "how often the whole cache is audited (also after changes); 0 turns the audit off")
}

// on says whether the audit (and what is served with it) runs.
func (o AuditOptions) on() bool { return o.Interval > 0 }

// BinderOptions say whether and how pvguard's binder runs.
type BinderOptions struct {
	Mode    binder.Mode
	Workers int
	Resync  time.Duration
	// NoVolumeFitsAfter is how long a claim stays Pending before NoVolumeFits is posted on it
	// after the binder's plans (when no volume fits and nothing else will give it one); 0 turns the event off.
	NoVolumeFitsAfter time.Duration
}

// AddFlags defines the binder's flags on f.
func (o *BinderOptions) AddFlags(f *pflag.FlagSet) {
	f.StringVar((*string)(&o.Mode), "binder", string(o.Mode), "binder mode: active (pvguard binds; disable kube-controller-manager's persistentvolume-binder-controller), shadow (decide and report, write nothing) or off")
	f.IntVar(&o.Workers, "binder-workers", o.Workers, "objects the binder syncs in parallel (writes are bounded by --kube-api-qps)")
	f.DurationVar(&o.Resync, "binder-resync", o.Resync, "how often the binder syncs every object again")
	f.DurationVar(&o.NoVolumeFitsAfter, "no-volume-fits-after", o.NoVolumeFitsAfter, "post a NoVolumeFits warning event on a claim Pending this long that no volume fits (and that no provisioner will serve), naming the closest volume; refreshed at most this often; 0 turns it off")
}

func (o *BinderOptions) validate() []error {
	var errs []error
	switch o.Mode {
	case binder.ModeOff, binder.ModeActive, binder.ModeShadow:
	default:
		errs = append(errs, fmt.Errorf("--binder=%s: want active, shadow or off", o.Mode))
	}
	if o.NoVolumeFitsAfter < 0 {
		errs = append(errs, fmt.Errorf("--no-volume-fits-after=%s: want 0 (off) or a positive duration", o.NoVolumeFitsAfter))
	}
	return errs
}

// LeaderElectionOptions say whether one replica is elected (by a Lease) to run what only one
// may (the binder, the report writer, the certificate rotator, the parameter writer), and how
// the election is timed.
type LeaderElectionOptions struct {
	Elect bool
	// Namespace holds the Lease (default: pvguard's own namespace in a cluster, else kube-system).
	Namespace string
	// ID names the Lease.
	ID string
	// LeaseDuration, RenewDeadline and RetryPeriod time the election as in kube-controller-manager:
	// a leader that dies without releasing the Lease is replaced after LeaseDuration.
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
}

// AddFlags defines the election's flags on f.
func (o *LeaderElectionOptions) AddFlags(f *pflag.FlagSet) {
	f.BoolVar(&o.Elect, "leader-elect", o.Elect, "elect one replica (Lease) to run the binder and write audit reports; webhooks and audits run on every replica")
	f.StringVar(&o.Namespace, "leader-election-namespace", o.Namespace, "namespace of the leader Lease (default kube-system)")
	f.StringVar(&o.ID, "leader-election-id", o.ID, "name of the leader Lease")
	f.DurationVar(&o.LeaseDuration, "leader-elect-lease-duration", o.LeaseDuration, "how long a leader's Lease lasts: a leader that dies is replaced after this")
	f.DurationVar(&o.RenewDeadline, "leader-elect-renew-deadline", o.RenewDeadline, "how long the leader keeps retrying to renew before it stands down (less than the lease duration)")
	f.DurationVar(&o.RetryPeriod, "leader-elect-retry-period", o.RetryPeriod, "how often replicas try to acquire or renew the Lease (less than the renew deadline)")
}

func (o *LeaderElectionOptions) validate() []error {
	if o.Elect && !(0 < o.RetryPeriod && o.RetryPeriod < o.RenewDeadline && o.RenewDeadline < o.LeaseDuration) {
		return []error{fmt.Errorf("--leader-elect-retry-period (%s) < --leader-elect-renew-deadline (%s) < --leader-elect-lease-duration (%s) must hold, all positive",
			o.RetryPeriod, o.RenewDeadline, o.LeaseDuration)}
	}
	return nil
}
