package cli

import (
	"errors"
	"net"
	"os"
	"time"

	"github.com/spf13/pflag"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/binder"
	"github.com/pvguard/pvguard/webhook"
)

// ServeFlags are the flags of `pvguard serve`: the process's own and its place in the cluster
// here, each component's in an options type of its own (serve_options.go), which is what that
// component's builder takes, as kube-controller-manager keeps a controller's options.
type ServeFlags struct {
	// MemoryLimit is the container's memory limit (the chart passes limits.memory through the
	// downward API). When set and GOMEMLIMIT is not, the Go heap's soft limit is set to 90% of
	// it, so that the collector works harder before the kernel kills the process.
	MemoryLimit string
	// GCPercent is the collector's headroom (GOGC) unless GOGC is set: pvguard's default keeps
	// less than Go's (defaultGCPercent).
	GCPercent     int
	Listen        string
	MetricsListen string
	// Profiling serves Go's profiles at /debug/pprof/ on MetricsListen (docs/install.md, "Sizing").
	Profiling bool
	// Namespace is pvguard's namespace: where the self-managed certificates' Secret, the
	// admission policies' parameters and (by default) the Lease are kept.
	Namespace  string
	ConfigFile string
	// AdmissionPolicyParams names the ConfigMap (in Namespace) the admission policies read the
	// config from: every replica reports whether it holds its loaded config, the elected one
	// writes it (policyparams.Sync).
	AdmissionPolicyParams string
	ShutdownTimeout       time.Duration
	ShutdownDelay         time.Duration

	API            APIOptions
	Certs          CertOptions
	Webhook        WebhookOptions
	Audit          AuditOptions
	Binder         BinderOptions
	LeaderElection LeaderElectionOptions
}

// ServeHooks let a program that runs the server in its own process follow and steer it
// (ServeWith): the end-to-end tests, and pvguard-dev, which waits for it to be ready.
// `pvguard serve` sets none.
type ServeHooks struct {
	// Ready, when set, is called with the bound address once the server is ready.
	Ready func(addr net.Addr)
	// Binder lets end-to-end tests kill the binder between writes and make its cache lag.
	Binder BinderHooks
}

// BinderHooks are test hooks into the binder; production leaves them nil.
type BinderHooks struct {
	BeforeWrite func(op string, obj client.Object) error
	WrapCache   func(client.Reader) client.Reader
}

// DefaultServeFlags are the flag defaults.
func DefaultServeFlags() ServeFlags {
	return ServeFlags{
		GCPercent:       defaultGCPercent,
		Listen:          ":9443",
		Namespace:       os.Getenv("POD_NAMESPACE"),
		ShutdownTimeout: 25 * time.Second,
		ShutdownDelay:   5 * time.Second,
		API: APIOptions{
			QPS: 50, Burst: 100,
			Classes: APIClasses{
				LiveReads:      APIRate{QPS: 50, Burst: 100},
				Audit:          APIRate{QPS: 20, Burst: 40},
				Access:         APIRate{QPS: 20, Burst: 40},
				LeaderElection: APIRate{QPS: 5, Burst: 10},
			},
		},
		Certs: CertOptions{
			SelfSignedHosts:          []string{"localhost", "127.0.0.1"},
			ServiceName:              "pvguard",
			WebhookConfigurationName: "pvguard",
			Validity:                 365 * 24 * time.Hour,
			CAValidity:               10 * 365 * 24 * time.Hour,
			CAOverlap:                10 * time.Minute,
			CheckInterval:            time.Minute,
		},
		Webhook: WebhookOptions{
			ReadRights:          "auto",
			LiveReadBudget:      webhook.DefaultLiveReadBudget,
			RereadsPerRequester: webhook.DefaultRereadsPerRequester,
			ReviewQueue:         webhook.DefaultFairQueueOptions(),
		},
		Audit:  AuditOptions{Interval: time.Minute},
		Binder: BinderOptions{Mode: binder.ModeOff, Workers: 8, Resync: 15 * time.Second, NoVolumeFitsAfter: 2 * time.Minute},
		LeaderElection: LeaderElectionOptions{
			Elect: true, ID: "pvguard-leader",
			LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
		},
	}
}

// AddFlags defines the flags of `pvguard serve` on f, writing into o: the process's own here,
// each component's by its options.
func (o *ServeFlags) AddFlags(f *pflag.FlagSet) {
	f.StringVar(&o.MemoryLimit, "memory-limit", o.MemoryLimit, "the container's memory limit (a quantity such as 1Gi, or bytes); the Go heap's soft limit is set to 90% of it unless GOMEMLIMIT is set")
	f.IntVar(&o.GCPercent, "gc-percent", o.GCPercent, "the Go collector's headroom (GOGC): a collection starts when the heap has grown by this percentage of the live heap; while the cache fills and the first full audit runs, not before the heap reaches what the objects the informers' first lists announce will take (at most 512 MiB, or half the soft limit --memory-limit sets) or the live heap grown by half as much again; unused when GOGC is set")
	f.StringVar(&o.Listen, "listen", o.Listen, "address of the TLS listener for webhooks, health, readiness and metrics")
	f.StringVar(&o.MetricsListen, "metrics-listen", o.MetricsListen, "optional plain-HTTP address for /metrics, /healthz and /readyz")
	f.BoolVar(&o.Profiling, "profiling", o.Profiling, "serve Go's profiles (net/http/pprof) at /debug/pprof/ on --metrics-listen")
	f.StringVar(&o.Namespace, "namespace", o.Namespace, "pvguard's namespace (default $POD_NAMESPACE)")
	f.StringVar(&o.AdmissionPolicyParams, "admission-policy-params", o.AdmissionPolicyParams, "the ConfigMap (in --namespace) the admission policies read the policy config from: the elected replica keeps it equal to the loaded --config")
	f.StringVar(&o.ConfigFile, "config", o.ConfigFile, "policy config file (YAML), reloaded on change")
	f.DurationVar(&o.ShutdownTimeout, "shutdown-timeout", o.ShutdownTimeout, "how long in-flight reviews may take to drain on shutdown")
	f.DurationVar(&o.ShutdownDelay, "shutdown-delay", o.ShutdownDelay, "on shutdown, how long to keep serving while not ready, so endpoints drop this replica first")
	o.API.AddFlags(f)
	o.Certs.AddFlags(f)
	o.Webhook.AddFlags(f)
	o.Audit.AddFlags(f)
	o.Binder.AddFlags(f)
	o.LeaderElection.AddFlags(f)
}

// validate checks each component's options and what spans them.
func (o *ServeFlags) validate() error {
	errs := o.Certs.validate(o.Namespace)
	if o.AdmissionPolicyParams != "" && o.Namespace == "" {
		errs = append(errs, errors.New("--admission-policy-params needs --namespace (or $POD_NAMESPACE)"))
	}
	if o.Profiling && o.MetricsListen == "" {
		errs = append(errs, errors.New("--profiling needs --metrics-listen: profiles are served only on the plain-HTTP metrics address, never on the webhook port"))
	}
	errs = append(errs, o.Binder.validate()...)
	errs = append(errs, o.LeaderElection.validate()...)
	errs = append(errs, o.API.validate()...)
	errs = append(errs, o.Webhook.validate()...)
	return errors.Join(errs...)
}

// elected says whether anything runs on the elected replica only: then, with --leader-elect,
// the replicas elect one.
func (o *ServeFlags) elected() bool {
	return o.Binder.Mode != binder.ModeOff || o.Audit.on() || o.Certs.Secret != "" || o.AdmissionPolicyParams != ""
}
