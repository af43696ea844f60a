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
	if o.Out == nil {
		o.Out = os.Stdout
	}
	if o.Logger == nil {
		o.Logger = func(w io.Writer) logr.Logger { return cli.NewLogger(w, false) }
	}
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
	host, _, err := net.SplitHostPort(o.Listen)
	if err != nil {
		return fmt.Errorf("--listen %q: %w", o.Listen, err)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	logPath := filepath.Join(o.Dir, devLogFile)
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("creating the log file: %w", err)
	}
	defer logFile.Close()
	log := o.Logger(logFile)
	// client-go's own components (leader election, reflectors) log through klog, to stderr
	// unless told otherwise.
	klog.SetLogger(log)
	defer klog.ClearLogger()

	ci, err := renderChartInstall(devcluster.ChartRelease, devcluster.ChartNamespace, devValues())
	if err != nil {
		return fmt.Errorf("rendering the Helm chart: %w", err)
	}
	so, err := cli.ParseServeArgs(ci.ServeArgs)
	if err != nil {
		return fmt.Errorf("the chart's container arguments: %w", err)
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

	kubeconfig := filepath.Join(o.Dir, "kubeconfig")
	saKubeconfig := filepath.Join(o.Dir, "pvguard.kubeconfig")
	tokenFile := filepath.Join(o.Dir, "pvguard.token")
	policyFile := filepath.Join(o.Dir, "policy.yaml")
	if err := os.WriteFile(kubeconfig, cp.KubeConfig, 0o600); err != nil {
		return fmt.Errorf("writing kubeconfig: %w", err)
	}
	if err := os.WriteFile(policyFile, []byte(devPolicyHeader+ci.Policy), 0o600); err != nil {
		return fmt.Errorf("writing policy config: %w", err)
	}

	// What `helm install --create-namespace` creates for pvguard's identity: the namespace,
	// the ServiceAccount and the RBAC, as the chart renders them.
	admin, err := client.New(cp.Config, client.Options{})
	if err != nil {
		return fmt.Errorf("connecting to the control plane: %w", err)
	}
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ci.Namespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", ci.Namespace, err)
	}
	for _, obj := range ci.Objects {
		if err := admin.Create(ctx, obj.DeepCopy()); err != nil {
			return fmt.Errorf("creating %s %s from the chart: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		return fmt.Errorf("connecting to the control plane: %w", err)
	}
	if err := waitForRBAC(ctx, cs, ci); err != nil {
		return err
	}
	// The ServiceAccount's token, as the kubelet would project it into pvguard's pod, and a
	// kubeconfig that uses nothing else: every request pvguard makes is the ServiceAccount's.
	expires, err := mintToken(ctx, cs, ci, tokenFile)
	if err != nil {
		return err
	}
	if err := writeServiceAccountKubeconfig(cp.KubeConfig, tokenFile, saKubeconfig); err != nil {
		return err
	}

	serveCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go renewToken(serveCtx, func(ctx context.Context) (time.Time, error) { return mintToken(ctx, cs, ci, tokenFile) }, expires, log.WithName("token"))
	// The chart's arguments, but for what differs outside a pod: the kubeconfig (in a pod:
	// the mounted token), the listener and config path, and the names the apiserver calls
	// pvguard by (a URL, not the Service).
	so.Kubeconfig, so.Listen, so.ConfigFile = saKubeconfig, o.Listen, policyFile
	so.CertHosts = append(so.CertHosts, "localhost", host)
	so.CertCheckInterval = time.Second // the webhook configurations appear just after start
	ready := make(chan net.Addr, 1)
	so.Ready = func(a net.Addr) { ready <- a }
	served := make(chan error, 1)
	go func() { served <- cli.Serve(serveCtx, so, log) }()
	// stop stops pvguard and waits for it, once, whichever way Dev returns: nothing may log
	// into the closed log file or reach the stopped control plane.
	var (
		stopped  bool
		serveErr error
	)
	stop := func() error {
		if !stopped {
			cancel()
			serveErr, stopped = ignoreCanceled(<-served), true
		}
		return serveErr
	}
	defer func() { _ = stop() }()
	var addr net.Addr
	select {
	case addr = <-ready:
	case err := <-served:
		stopped, serveErr = true, err
		return fmt.Errorf("pvguard serve stopped before it was ready (log: %s): %v", logPath, err)
	case <-ctx.Done():
		return ctx.Err()
	}
	baseURL := "https://" + net.JoinHostPort(host, portOf(addr))
	if err := devcluster.InstallWebhooks(ctx, cp.Config, devcluster.WebhookOptions{BaseURL: baseURL}); err != nil {
		return err
	}
	secret := &corev1.Secret{}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: so.Namespace, Name: so.CertSecret}, secret); err != nil {
		return fmt.Errorf("reading the self-managed certificates: %w", err)
	}
	caPEM := secret.Data[certs.CAFile]
	fmt.Fprintf(o.Out, "pvguard is serving at %s with its binder active, as the chart's ServiceAccount %s/%s\n"+
		"with the chart's RBAC and policy config (kubeconfig %s, token from the TokenRequest API);\n"+
		"webhook configurations installed, their caBundle filled in by pvguard from its self-managed CA\n"+
		"(Secret %s/%s). pvguard's logs go to %s\n\n",
		baseURL, ci.Namespace, ci.ServiceAccount, saKubeconfig, so.Namespace, so.CertSecret, logPath)

	if err := RunDemo(ctx, cp.Config, o.Out); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	// The report asks for a bearer token: pvguard's own, which may list every claim, volume and
	// class.
	token, err := os.ReadFile(tokenFile)
	if err != nil {
		return fmt.Errorf("reading the ServiceAccount token: %w", err)
	}
	if err := printAuditReport(ctx, o.Out, baseURL, caPEM, strings.TrimSpace(string(token))); err != nil {
		return fmt.Errorf("demo: %w", err)
	}

	fmt.Fprintf(o.Out, "\nTry it yourself:\n  export KUBECONFIG=%s\n  policy config: %s (reloaded on save)\n  metrics: curl -k %s/metrics\n"+
		"  report: curl -k -H \"Authorization: Bearer $(cat %s)\" %s/api/v1/report\n", kubeconfig, policyFile, baseURL, tokenFile, baseURL)
	if o.ExitAfterDemo {
		return stop()
	}
	fmt.Fprintln(o.Out, "Press Ctrl-C to stop.")
	select {
	case <-ctx.Done():
		return stop()
	case err := <-served:
		stopped, serveErr = true, err
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
