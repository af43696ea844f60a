package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.uber.org/zap/zapcore"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/pvguard/pvguard/certs"
)

// Version is stamped at build time with -ldflags "-X github.com/pvguard/pvguard/internal/cli.Version=...".
var Version = "dev"

// PluginName is the name kubectl runs the binary by as a plugin: `kubectl pvguard ARGS` runs
// kubectl-pvguard ARGS, the first program of that name on PATH.
const PluginName = "kubectl-pvguard"

// IsPlugin says whether argv0 (os.Args[0]) runs the binary as the kubectl plugin: its base name
// is kubectl-pvguard, or kubectl-pvguard.exe on Windows, where kubectl also finds it.
func IsPlugin(argv0 string) bool {
	base := filepath.Base(argv0)
	if ext := filepath.Ext(base); strings.EqualFold(ext, ".exe") {
		base = strings.TrimSuffix(base, ext)
	}
	return base == PluginName
}

// NewRootCommand builds the pvguard command tree.
func NewRootCommand() *cobra.Command { return NewRootCommandFor("pvguard") }

// NewRootCommandFor builds the command tree for the binary invoked as argv0: the same commands
// and flags either way, but run as the kubectl plugin its help and errors say `kubectl pvguard`.
// kubectl hands a plugin every argument after its name and passes on its exit code, so nothing
// else differs: `explain` takes kubectl's connection flags under either name.
func NewRootCommandFor(argv0 string) *cobra.Command {
	var verbose bool
	root := &cobra.Command{
		Use:           "pvguard",
		Short:         "Admission and audit webhooks for PersistentVolumes, PersistentVolumeClaims and StorageClasses",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	if IsPlugin(argv0) {
		root.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl pvguard"}
	}
	root.PersistentFlags().BoolVarP(&verbose, "verbose", "v", false, "log at debug level; for pvguard test, list the passing cases too")
	logger := func(w io.Writer) logr.Logger { return NewLogger(w, verbose) }
	explain, test := newExplainCommand(), newTestCommand()
	// explain and test exit ExitBadInput on bad input, a bad flag or argument included; audit's
	// exit 2 says that documents could not be read, and its usage errors exit 1.
	badFlagsAndArgs(explain)
	badFlagsAndArgs(test)
	root.AddCommand(newServeCommand(logger), newAuditCommand(), explain, test, newCertsCommand(), newAdmissionPoliciesCommand(), newVersionCommand())
	return root
}

// badFlagsAndArgs makes a bad flag or a wrong number of arguments, of cmd and every command
// under it, an *ExitError with ExitBadInput, as the commands' own bad input is.
func badFlagsAndArgs(cmd *cobra.Command) {
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		if errors.Is(err, pflag.ErrHelp) {
			return err
		}
		return badInput("%v", err)
	})
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		if args := c.Args; args != nil {
			c.Args = func(c *cobra.Command, a []string) error {
				if err := args(c, a); err != nil {
					return badInput("%v", err)
				}
				return nil
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(cmd)
}

// ExitCode is the exit status of the binary whose command returned err: 0 for none, the code of
// an *ExitError, else 1.
func ExitCode(err error) int {
	if err == nil {
		return 0
	}
	var exit *ExitError
	if errors.As(err, &exit) {
		return exit.Code
	}
	return 1
}

// NewLogger is pvguard's logger: JSON lines to w, at debug level when verbose. controller-runtime's
// own components (certwatcher, manager) log through its root logger, which it becomes.
func NewLogger(w io.Writer, verbose bool) logr.Logger {
	lvl := zapcore.InfoLevel
	if verbose {
		lvl = zapcore.DebugLevel
	}
	log := zap.New(zap.WriteTo(w), zap.Level(lvl))
	ctrllog.SetLogger(log)
	return log
}

// ParseServeArgs parses `pvguard serve` arguments (flags only) into options, exactly as the
// command does: tests run the chart's container arguments through it.
func ParseServeArgs(args []string) (ServeFlags, error) {
	o := DefaultServeFlags()
	f := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	bindServeFlags(f, &o)
	if err := f.Parse(args); err != nil {
		return o, fmt.Errorf("pvguard serve %v: %w", args, err)
	}
	if f.NArg() > 0 {
		return o, fmt.Errorf("pvguard serve: unexpected arguments %v", f.Args())
	}
	return o, nil
}

// bindServeFlags defines the flags of `pvguard serve` on f, writing into o.
func bindServeFlags(f *pflag.FlagSet, o *ServeFlags) {
	f.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "kubeconfig file (default: in-cluster, else $KUBECONFIG)")
	f.StringVar(&o.MemoryLimit, "memory-limit", o.MemoryLimit, "the container's memory limit (a quantity such as 1Gi, or bytes); the Go heap's soft limit is set to 90% of it unless GOMEMLIMIT is set")
	f.StringVar(&o.Listen, "listen", o.Listen, "address of the TLS listener for webhooks, health, readiness and metrics")
	f.StringVar(&o.MetricsListen, "metrics-listen", o.MetricsListen, "optional plain-HTTP address for /metrics, /healthz and /readyz")
	f.BoolVar(&o.Profiling, "profiling", o.Profiling, "serve Go's profiles (net/http/pprof) at /debug/pprof/ on --metrics-listen")
	f.StringVar(&o.CertDir, "cert-dir", o.CertDir, "directory with tls.crt and tls.key, reloaded on change")
	f.BoolVar(&o.SelfSigned, "self-signed", o.SelfSigned, "issue a CA and serving certificate at start-up (local use); written to --cert-dir if given")
	f.StringSliceVar(&o.SelfSignedHosts, "self-signed-hosts", o.SelfSignedHosts, "DNS names and IPs of the self-signed certificate")
	f.StringVar(&o.CertSecret, "cert-secret", o.CertSecret, "self-managed certificates: keep a CA and serving certificate in this Secret (in --namespace), rotated by the elected replica, with the caBundle of --webhook-configuration-name kept in step")
	f.StringVar(&o.Namespace, "namespace", o.Namespace, "pvguard's namespace (default $POD_NAMESPACE)")
	f.StringVar(&o.AdmissionPolicyParams, "admission-policy-params", o.AdmissionPolicyParams, "the ConfigMap (in --namespace) the admission policies read the policy config from: the elected replica keeps it equal to the loaded --config")
	f.StringVar(&o.ServiceName, "service-name", o.ServiceName, "pvguard's Service: the self-managed certificate is valid for its DNS names")
	f.StringVar(&o.WebhookConfigurationName, "webhook-configuration-name", o.WebhookConfigurationName, "the Validating and Mutating webhook configurations whose caBundle self-managed certificates keep current")
	f.StringSliceVar(&o.CertHosts, "cert-hosts", o.CertHosts, "extra DNS names and IPs for the self-managed certificate")
	f.DurationVar(&o.CertValidity, "cert-validity", o.CertValidity, "lifetime of self-managed serving certificates (renewed with a third left)")
	f.DurationVar(&o.CAValidity, "ca-validity", o.CAValidity, "lifetime of the self-managed CA (a new one is trusted with a third left, and used --ca-overlap later)")
	f.DurationVar(&o.CAOverlap, "ca-overlap", o.CAOverlap, "how long a new CA is trusted in the caBundle before it signs the serving certificate")
	f.DurationVar(&o.CertCheckInterval, "cert-check-interval", o.CertCheckInterval, "how often the elected replica checks the self-managed certificates")
	f.StringVar(&o.ClientCAFile, "client-ca-file", o.ClientCAFile, "PEM CA bundle: webhook requests must present a client certificate it signed")
	f.StringVar(&o.AdmissionReadRights, "admission-read-rights", o.AdmissionReadRights, "what admission messages name beyond the request's own objects: request (nothing), rbac (what the requester may read, by SubjectAccessReview; trusts the review's identity, so only the apiserver may reach the webhook port) or auto (rbac with --client-ca-file, else request)")
	f.StringVar(&o.ConfigFile, "config", o.ConfigFile, "policy config file (YAML), reloaded on change")
	f.StringVar((*string)(&o.Binder), "binder", string(o.Binder), "binder mode: active (pvguard binds; disable kube-controller-manager's persistentvolume-binder-controller), shadow (decide and report, write nothing) or off")
	f.DurationVar(&o.AuditInterval, "audit-interval", o.AuditInterval, "how often the whole cache is audited (also after changes); 0 turns the audit off")
	f.IntVar(&o.BinderWorkers, "binder-workers", o.BinderWorkers, "objects the binder syncs in parallel (writes are bounded by --kube-api-qps)")
	f.DurationVar(&o.BinderResync, "binder-resync", o.BinderResync, "how often the binder syncs every object again")
	f.DurationVar(&o.NoVolumeFitsAfter, "no-volume-fits-after", o.NoVolumeFitsAfter, "post a NoVolumeFits warning event on a claim Pending this long that no volume fits (and that no provisioner will serve), naming the closest volume; refreshed at most this often; 0 turns it off")
	f.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect, "elect one replica (Lease) to run the binder and write audit reports; webhooks and audits run on every replica")
	f.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", o.LeaderElectionNamespace, "namespace of the leader Lease (default kube-system)")
	f.StringVar(&o.LeaderElectionID, "leader-election-id", o.LeaderElectionID, "name of the leader Lease")
	f.DurationVar(&o.LeaseDuration, "leader-elect-lease-duration", o.LeaseDuration, "how long a leader's Lease lasts: a leader that dies is replaced after this")
	f.DurationVar(&o.RenewDeadline, "leader-elect-renew-deadline", o.RenewDeadline, "how long the leader keeps retrying to renew before it stands down (less than the lease duration)")
	f.DurationVar(&o.RetryPeriod, "leader-elect-retry-period", o.RetryPeriod, "how often replicas try to acquire or renew the Lease (less than the renew deadline)")
	f.Float32Var(&o.KubeAPIQPS, "kube-api-qps", o.KubeAPIQPS, "client QPS towards the apiserver")
	f.IntVar(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst, "client burst towards the apiserver")
	for _, c := range []struct {
		name, what string
		r          *APIRate
	}{
		{"live-read", "the admission webhooks' live reads (cache misses, re-reads of denials)", &o.APIClasses.LiveReads},
		{"audit", "the audit's and the explanations' live reads", &o.APIClasses.Audit},
		{"access", "the token and access reviews of the report, dashboard and explanations' callers", &o.APIClasses.Access},
		{"leader-election", "the leader Lease's reads and renewals", &o.APIClasses.LeaderElection},
	} {
		f.Float32Var(&c.r.QPS, c.name+"-qps", c.r.QPS, "client QPS of "+c.what+" (a token bucket of its own)")
		f.IntVar(&c.r.Burst, c.name+"-burst", c.r.Burst, "client burst of "+c.what)
	}
	f.Float64Var(&o.RereadsPerRequester, "live-rereads-per-requester", o.RereadsPerRequester, "denials of one requester re-read live a second (twice as many at once); past it that requester's denials stand on the cache, and the live reads' bucket stays for others")
	f.DurationVar(&o.LiveReadBudget, "live-read-budget", o.LiveReadBudget, "how long the live re-read that confirms a denial made on the cache may take, its wait for a rate-limiter token included; past it the cache's decision stands")
	f.IntVar(&o.ReviewQueue.Concurrency, "review-concurrency", o.ReviewQueue.Concurrency, "admission reviews judged at once; others wait in a queue per requester, served in turn")
	f.IntVar(&o.ReviewQueue.PerRequester, "review-concurrency-per-requester", o.ReviewQueue.PerRequester, "admission reviews of one requester judged at once (at most --review-concurrency)")
	f.IntVar(&o.ReviewQueue.QueueLength, "review-queue-length", o.ReviewQueue.QueueLength, "admission reviews of one requester that may wait; more are answered unjudged with HTTP 429 (the registration's failure policy decides)")
	f.IntVar(&o.ReviewQueue.MaxWaiting, "review-max-waiting", o.ReviewQueue.MaxWaiting, "admission reviews that may wait in all; more are answered unjudged with HTTP 429 (the registration's failure policy decides)")
	f.Int64Var(&o.ReviewQueue.MaxWaitingBytes, "review-max-waiting-bytes", o.ReviewQueue.MaxWaitingBytes, "bytes of admission review bodies that may wait in all, a requester's share in proportion to --review-queue-length (0: no bound but the count); a review beyond is answered unjudged with HTTP 429")
	f.DurationVar(&o.ShutdownTimeout, "shutdown-timeout", o.ShutdownTimeout, "how long in-flight reviews may take to drain on shutdown")
	f.DurationVar(&o.ShutdownDelay, "shutdown-delay", o.ShutdownDelay, "on shutdown, how long to keep serving while not ready, so endpoints drop this replica first")
}

func newServeCommand(logger func(io.Writer) logr.Logger) *cobra.Command {
	o := DefaultServeFlags()
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the admission webhooks against a cluster",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return Serve(ctx, o, logger(os.Stderr))
		},
	}
	bindServeFlags(cmd.Flags(), &o)
	return cmd
}

func newCertsCommand() *cobra.Command {
	var (
		dir   string
		hosts []string
	)
	cmd := &cobra.Command{
		Use:   "certs",
		Short: "Generate a CA and a serving certificate into a directory (tls.crt, tls.key, ca.crt)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := issueSelfSigned(dir, hosts); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s, %s and %s to %s\n", certs.CertFile, certs.KeyFile, certs.CAFile, dir)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "certs", "output directory")
	cmd.Flags().StringSliceVar(&hosts, "hosts", []string{"pvguard.pvguard-system.svc", "localhost", "127.0.0.1"}, "DNS names and IPs the certificate is for")
	return cmd
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			goVersion := ""
			if bi, ok := debug.ReadBuildInfo(); ok {
				goVersion = bi.GoVersion
			}
			fmt.Fprintf(cmd.OutOrStdout(), "pvguard %s (%s)\n", Version, goVersion)
		},
	}
}
