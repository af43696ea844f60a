package devcli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/audit"
	"github.com/pvguard/pvguard/certs"
	"github.com/pvguard/pvguard/internal/cli"
	"github.com/pvguard/pvguard/internal/devcluster"
)

// DevFlags are the flags of pvguard-dev.
type DevFlags struct {
	// Assets holds kube-apiserver and etcd (default: $KUBEBUILDER_ASSETS, else bin/).
	Assets string
	// Dir receives the kubeconfigs, certificates, policy config and log (default: a new temp dir).
	Dir    string
	Listen string
	// ExitAfterDemo stops everything once the demo has run, instead of serving until interrupted.
	ExitAfterDemo bool
	// Out receives the demo's story; pvguard's own logs go to pvguard.log in Dir.
	Out io.Writer
	// Logger builds pvguard's logger over the log file (default: JSON at info level).
	Logger func(io.Writer) logr.Logger
}

// devLogFile is the file in DevFlags.Dir that pvguard's logs go to, so that they do not
// interleave with the demo's story.
const devLogFile = "pvguard.log"

// NewRootCommand builds the pvguard-dev command: a local control plane, pvguard serving against
// it as the Helm chart installs it, and the demo (`make demo` runs it with --exit-after-demo,
// `make dev` without).
func NewRootCommand() *cobra.Command {
	var verbose bool
	o := DevFlags{Listen: "127.0.0.1:9443", Logger: func(w io.Writer) logr.Logger { return cli.NewLogger(w, verbose) }}
	cmd := &cobra.Command{
		Use:           "pvguard-dev",
		Short:         "Start a local control plane, serve pvguard against it and run the demo",
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			o.Out = cmd.OutOrStdout()
			return Dev(ctx, o)
		},
	}
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "log at debug level")
	cmd.Flags().StringVar(&o.Assets, "assets", "", "directory holding kube-apiserver and etcd (default $KUBEBUILDER_ASSETS, else bin/)")
	cmd.Flags().StringVar(&o.Dir, "dir", "", "working directory for kubeconfigs, certificates, config and the log (default: a new temporary directory)")
	cmd.Flags().StringVar(&o.Listen, "listen", o.Listen, "address pvguard serves on")
	cmd.Flags().BoolVar(&o.ExitAfterDemo, "exit-after-demo", false, "stop once the demo has run")
	return cmd
}

// devPolicyHeader heads the policy config file; the config itself is what the chart's ConfigMap
// holds for devValues.
const devPolicyHeader = `# pvguard policy config (see docs/configuration.md), as the Helm chart renders it for
# pvguard-dev. Edit me: pvguard reloads on save.
`

// Dev starts a control plane, installs the Helm chart's ServiceAccount and RBAC into it, serves
// pvguard as that ServiceAccount (a token from the TokenRequest API, the Deployment's arguments,
// the ConfigMap's policy config) with the chart's webhook configurations installed, and runs the
// demo scenario. pvguard's logs go to pvguard.log in Dir.
func Dev(ctx context.Context, o DevFlags) (err error) {
	if err := o.complete(); err != nil {
		return err
	}
	host, err := listenHost(o.Listen)
	if err != nil {
		return err
	}
	files := newDevFiles(o.Dir)
	logFile, err := os.OpenFile(files.log, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("creating the log file: %w", err)
	}
	defer logFile.Close()
	log := o.Logger(logFile)
	// client-go's own components (leader election, reflectors) log through klog, to stderr
	// unless told otherwise.
	klog.SetLogger(log)
	defer klog.ClearLogger()

	ci, so, err := renderDevChart()
	if err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "Starting kube-apiserver and etcd from %s ...\n", o.Assets)
	cp, err := devcluster.Start(o.Assets)
	if err != nil {
		return err
	}
	defer func() {
		if stopErr := cp.Stop(); stopErr != nil && err == nil {
			err = fmt.Errorf("stopping the control plane: %w", stopErr)
		}
	}()
	if err := files.write(cp, ci); err != nil {
		return err
	}
	admin, cs, err := installChartIdentity(ctx, cp, ci)
	if err != nil {
		return err
	}
	// The ServiceAccount's token, as the kubelet would project it into pvguard's pod, and a
	// kubeconfig that uses nothing else: every request pvguard makes is the ServiceAccount's.
	mint := func(ctx context.Context) (time.Time, error) { return mintToken(ctx, cs, ci, files.token) }
	expires, err := mint(ctx)
	if err != nil {
		return err
	}
	if err := writeServiceAccountKubeconfig(cp.KubeConfig, files.token, files.saKubeconfig); err != nil {
		return err
	}

	so = outsideAPod(so, files, o.Listen, host)
	srv := startServing(ctx, so, log, mint, expires)
	defer func() { _ = srv.stop() }()
	addr, err := srv.waitReady(ctx, files.log)
	if err != nil {
		return err
	}
	baseURL := "https://" + net.JoinHostPort(host, portOf(addr))
	caPEM, err := installWebhooks(ctx, cp.Config, admin, baseURL, so)
	if err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "pvguard is serving at %s with its binder active, as the chart's ServiceAccount %s/%s\n"+
		"with the chart's RBAC and policy config (kubeconfig %s, token from the TokenRequest API);\n"+
		"webhook configurations installed, their caBundle filled in by pvguard from its self-managed CA\n"+
		"(Secret %s/%s). pvguard's logs go to %s\n\n",
		baseURL, ci.Namespace, ci.ServiceAccount, files.saKubeconfig, so.Namespace, so.Certs.Secret, files.log)
	if err := runDemoAndReport(ctx, cp.Config, o.Out, baseURL, caPEM, files.token); err != nil {
		return err
	}
	printTryIt(o.Out, files, baseURL)
	if o.ExitAfterDemo {
		return srv.stop()
	}
	fmt.Fprintln(o.Out, "Press Ctrl-C to stop.")
	return srv.serveUntilDone(ctx, files.log)
}

// complete fills in the defaults of the flags and creates the working directory.
func (o *DevFlags) complete() error {
	if o.Out == nil {
		o.Out = os.Stdout
	}
	if o.Logger == nil {
		o.Logger = func(w io.Writer) logr.Logger { return cli.NewLogger(w, false) }
	}
	var err error
	if o.Assets == "" {
		if o.Assets, err = devcluster.AssetsDir(); err != nil {
			return err
		}
	}
	if o.Dir == "" {
		if o.Dir, err = os.MkdirTemp("", "pvguard-dev-"); err != nil {
			return fmt.Errorf("creating working directory: %w", err)
		}
	} else if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return fmt.Errorf("creating working directory %s: %w", o.Dir, err)
	}
	return nil
}

// listenHost is the host of the --listen address, 127.0.0.1 when it names none.
func listenHost(listen string) (string, error) {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("--listen %q: %w", listen, err)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return host, nil
}

// outsideAPod adapts the chart's serve arguments to pvguard serving outside a pod.
func outsideAPod(so cli.ServeFlags, files devFiles, listen, host string) cli.ServeFlags {
	// The chart's arguments, but for what differs outside a pod: the kubeconfig (in a pod:
	// the mounted token), the listener and config path, and the names the apiserver calls
	// pvguard by (a URL, not the Service).
	so.API.Kubeconfig, so.Listen, so.ConfigFile = files.saKubeconfig, listen, files.policy
	so.Certs.Hosts = append(so.Certs.Hosts, "localhost", host)
	so.Certs.CheckInterval = time.Second // the webhook configurations appear just after start
	return so
}

// printTryIt tells how to reach the cluster and pvguard by hand.
func printTryIt(out io.Writer, files devFiles, baseURL string) {
	fmt.Fprintf(out, "\nTry it yourself:\n  export KUBECONFIG=%s\n  policy config: %s (reloaded on save)\n  metrics: curl -k %s/metrics\n"+
		"  report: curl -k -H \"Authorization: Bearer $(cat %s)\" %s/api/v1/report\n", files.kubeconfig, files.policy, baseURL, files.token, baseURL)
}

// devFiles are the paths of the files pvguard-dev writes into its working directory.
type devFiles struct {
	log, kubeconfig, saKubeconfig, token, policy string
}

// newDevFiles names the files pvguard-dev writes into dir.
func newDevFiles(dir string) devFiles {
	return devFiles{
		log:          filepath.Join(dir, devLogFile),
		kubeconfig:   filepath.Join(dir, "kubeconfig"),
		saKubeconfig: filepath.Join(dir, "pvguard.kubeconfig"),
		token:        filepath.Join(dir, "pvguard.token"),
		policy:       filepath.Join(dir, "policy.yaml"),
	}
}

// write writes the admin kubeconfig of the control plane and the chart's policy config.
func (f devFiles) write(cp *devcluster.ControlPlane, ci *chartInstall) error {
	if err := os.WriteFile(f.kubeconfig, cp.KubeConfig, 0o600); err != nil {
		return fmt.Errorf("writing kubeconfig: %w", err)
	}
	if err := os.WriteFile(f.policy, []byte(devPolicyHeader+ci.Policy), 0o600); err != nil {
		return fmt.Errorf("writing policy config: %w", err)
	}
	return nil
}

// renderDevChart renders the Helm chart with devValues and parses its container arguments.
func renderDevChart() (*chartInstall, cli.ServeFlags, error) {
	ci, err := renderChartInstall(devcluster.ChartRelease, devcluster.ChartNamespace, devValues())
	if err != nil {
		return nil, cli.ServeFlags{}, fmt.Errorf("rendering the Helm chart: %w", err)
	}
	so, err := cli.ParseServeArgs(ci.ServeArgs)
	if err != nil {
		return nil, cli.ServeFlags{}, fmt.Errorf("the chart's container arguments: %w", err)
	}
	return ci, so, nil
}

// installChartIdentity creates what `helm install --create-namespace` creates for pvguard's
// identity: the namespace, the ServiceAccount and the RBAC, as the chart renders them; it
// returns the admin clients it used once the RBAC is in force.
func installChartIdentity(ctx context.Context, cp *devcluster.ControlPlane, ci *chartInstall) (client.Client, kubernetes.Interface, error) {
	admin, err := client.New(cp.Config, client.Options{})
	if err != nil {
		return nil, nil, fmt.Errorf("connecting to the control plane: %w", err)
	}
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ci.Namespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, nil, fmt.Errorf("creating namespace %s: %w", ci.Namespace, err)
	}
	for _, obj := range ci.Objects {
		if err := admin.Create(ctx, obj.DeepCopy()); err != nil {
			return nil, nil, fmt.Errorf("creating %s %s from the chart: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		return nil, nil, fmt.Errorf("connecting to the control plane: %w", err)
	}
	if err := waitForRBAC(ctx, cs, ci); err != nil {
		return nil, nil, err
	}
	return admin, cs, nil
}

// installWebhooks installs the chart's webhook configurations pointing at baseURL and returns
// the trust bundle of pvguard's self-managed certificates.
func installWebhooks(ctx context.Context, cfg *rest.Config, admin client.Client, baseURL string, so cli.ServeFlags) ([]byte, error) {
	if err := devcluster.InstallWebhooks(ctx, cfg, devcluster.WebhookOptions{BaseURL: baseURL}); err != nil {
		return nil, err
	}
	secret := &corev1.Secret{}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: so.Namespace, Name: so.Certs.Secret}, secret); err != nil {
		return nil, fmt.Errorf("reading the self-managed certificates: %w", err)
	}
	return secret.Data[certs.CAFile], nil
}

// runDemoAndReport runs the demo and prints the audit report it leads to.
func runDemoAndReport(ctx context.Context, cfg *rest.Config, out io.Writer, baseURL string, caPEM []byte, tokenFile string) error {
	if err := RunDemo(ctx, cfg, out); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	// The report asks for a bearer token: pvguard's own, which may list every claim, volume and
	// class.
	token, err := os.ReadFile(tokenFile)
	if err != nil {
		return fmt.Errorf("reading the ServiceAccount token: %w", err)
	}
	if err := printAuditReport(ctx, out, baseURL, caPEM, strings.TrimSpace(string(token))); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	return nil
}

// devServer is pvguard serving in the background; stop stops it and waits for it, once,
// whichever way Dev returns: nothing may log into the closed log file or reach the stopped
// control plane.
type devServer struct {
	cancel   context.CancelFunc
	ready    chan net.Addr
	served   chan error
	stopped  bool
	serveErr error
}

// startServing starts pvguard with so, and the renewal of its token, in the background.
func startServing(ctx context.Context, so cli.ServeFlags, log logr.Logger, mint func(context.Context) (time.Time, error), expires time.Time) *devServer {
	serveCtx, cancel := context.WithCancel(ctx)
	s := &devServer{cancel: cancel, ready: make(chan net.Addr, 1), served: make(chan error, 1)}
	go renewToken(serveCtx, mint, expires, log.WithName("token"))
	hooks := cli.ServeHooks{Ready: func(a net.Addr) { s.ready <- a }}
	go func() { s.served <- cli.ServeWith(serveCtx, so, hooks, log) }()
	return s
}

// stop stops pvguard, once, and returns what serving ended with (nil when stopped).
func (s *devServer) stop() error {
	s.cancel() // also when serving ended by itself: the token's renewal stops with it
	if !s.stopped {
		s.serveErr, s.stopped = ignoreCanceled(<-s.served), true
	}
	return s.serveErr
}

// exited records that serving ended by itself with err.
func (s *devServer) exited(err error) {
	s.stopped, s.serveErr = true, err
}

// waitReady waits until pvguard listens and returns its address.
func (s *devServer) waitReady(ctx context.Context, logPath string) (net.Addr, error) {
	select {
	case addr := <-s.ready:
		return addr, nil
	case err := <-s.served:
		s.exited(err)
		return nil, fmt.Errorf("pvguard serve stopped before it was ready (log: %s): %v", logPath, err)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// serveUntilDone serves until ctx ends (then stops pvguard) or pvguard stops by itself.
func (s *devServer) serveUntilDone(ctx context.Context, logPath string) error {
	select {
	case <-ctx.Done():
		return s.stop()
	case err := <-s.served:
		s.exited(err)
		if err != nil {
			return fmt.Errorf("pvguard serve (log: %s): %w", logPath, err)
		}
		return nil
	}
}

// printAuditReport waits for the live audit to see the demo's Failed volume and prints the
// report served at /api/v1/report, presenting token.
func printAuditReport(ctx context.Context, out io.Writer, baseURL string, caPEM []byte, token string) error {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	var r audit.Report
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL+"/api/v1/report", nil)
		if err != nil {
			return false, err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := hc.Do(req)
		if err != nil {
			return false, nil
		}
		defer resp.Body.Close()
		r = audit.Report{}
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
			return false, nil
		}
		for _, f := range r.Findings {
			if f.Name == "failed-volume" && f.Object == "pv-scratch" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the audit to report pv-scratch: %w", err)
	}
	fmt.Fprintf(out, "   audit report (GET %s/api/v1/report, %d objects):\n", baseURL, r.Summary.Objects)
	for _, f := range r.Findings {
		obj := f.Kind + " " + f.Object
		if f.Namespace != "" {
			obj = f.Kind + " " + f.Namespace + "/" + f.Object
		}
		fmt.Fprintf(out, "   - [%s %s] %s %s: %s\n", f.Rule, f.Name, f.Action, obj, f.Message)
	}
	return nil
}

func portOf(a net.Addr) string {
	_, port, _ := net.SplitHostPort(a.String())
	return port
}

func ignoreCanceled(err error) error {
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
