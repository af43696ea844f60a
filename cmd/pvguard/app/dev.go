package app

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
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/audit"
	"github.com/pvguard/pvguard/certs"
	"github.com/pvguard/pvguard/test/controlplane"
)

// DevOptions are the flags of `pvguard dev`.
type DevOptions struct {
	// Assets holds kube-apiserver and etcd (default: $KUBEBUILDER_ASSETS, else bin/).
	Assets string
	// Dir receives the kubeconfig, certificates and policy config (default: a new temp dir).
	Dir    string
	Listen string
	// ExitAfterDemo stops everything once the demo has run, instead of serving until interrupted.
	ExitAfterDemo bool
	Out           io.Writer
}

func newDevCommand(logger func() logr.Logger) *cobra.Command {
	o := DevOptions{Listen: "127.0.0.1:9443"}
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Start a local control plane, serve pvguard against it and run the demo",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			o.Out = cmd.OutOrStdout()
			return Dev(ctx, o, logger())
		},
	}
	cmd.Flags().StringVar(&o.Assets, "assets", "", "directory holding kube-apiserver and etcd (default $KUBEBUILDER_ASSETS, else bin/)")
	cmd.Flags().StringVar(&o.Dir, "dir", "", "working directory for kubeconfig, certificates and config (default: a new temporary directory)")
	cmd.Flags().StringVar(&o.Listen, "listen", o.Listen, "address pvguard serves on")
	cmd.Flags().BoolVar(&o.ExitAfterDemo, "exit-after-demo", false, "stop once the demo has run")
	return cmd
}

// devPolicy is the policy config the demo serves with: defaults, plus tenant namespaces whose
// claims may not grab volumes.
const devPolicy = `# pvguard policy config (see docs/configuration.md). Edit me: pvguard reloads on save.
rules:
  volume-grab: {action: deny}
`

// The namespace and Secret of the demo's self-managed certificates.
const (
	devNamespace = "pvguard-system"
	devSecret    = "pvguard-tls"
)

// Dev starts a control plane, serves pvguard against it with the webhook configurations
// installed, and runs the demo scenario.
func Dev(ctx context.Context, o DevOptions, log logr.Logger) (err error) {
	if o.Out == nil {
		o.Out = os.Stdout
	}
	if o.Assets == "" {
		if o.Assets, err = controlplane.AssetsDir(); err != nil {
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
	fmt.Fprintf(o.Out, "Starting kube-apiserver and etcd from %s ...\n", o.Assets)
	cp, err := controlplane.Start(o.Assets)
	if err != nil {
		return err
	}
	defer func() {
		if stopErr := cp.Stop(); stopErr != nil && err == nil {
			err = fmt.Errorf("stopping the control plane: %w", stopErr)
		}
	}()

	kubeconfig := filepath.Join(o.Dir, "kubeconfig")
	policyFile := filepath.Join(o.Dir, "policy.yaml")
	if err := os.WriteFile(kubeconfig, cp.KubeConfig, 0o600); err != nil {
		return fmt.Errorf("writing kubeconfig: %w", err)
	}
	if err := os.WriteFile(policyFile, []byte(devPolicy), 0o600); err != nil {
		return fmt.Errorf("writing policy config: %w", err)
	}
	host, _, err := net.SplitHostPort(o.Listen)
	if err != nil {
		return fmt.Errorf("--listen %q: %w", o.Listen, err)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	// Self-managed certificates, as the chart installs by default: pvguard issues its CA and
	// serving certificate into a Secret and puts the CA into the webhook configurations itself.
	boot, err := client.New(cp.Config, client.Options{})
	if err != nil {
		return fmt.Errorf("connecting to the control plane: %w", err)
	}
	if err := boot.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: devNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", devNamespace, err)
	}

	serveCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	so := DefaultServeOptions()
	so.Kubeconfig, so.Listen, so.ConfigFile = kubeconfig, o.Listen, policyFile
	so.CertSecret, so.Namespace, so.CertHosts = devSecret, devNamespace, []string{"localhost", host}
	so.CertCheckInterval = time.Second // the webhook configurations appear just after start
	so.ShutdownTimeout, so.ShutdownDelay = 5*time.Second, 0
	// No kube-controller-manager runs here: pvguard is the cluster's binder.
	so.Binder, so.LeaderElect, so.BinderResync = "active", false, 2*time.Second
	ready := make(chan net.Addr, 1)
	so.Ready = func(a net.Addr) { ready <- a }
	served := make(chan error, 1)
	go func() { served <- Serve(serveCtx, so, log) }()
	var addr net.Addr
	select {
	case addr = <-ready:
	case err := <-served:
		return fmt.Errorf("pvguard serve: %w", err)
	case <-ctx.Done():
		return ctx.Err()
	}
	baseURL := "https://" + net.JoinHostPort(host, portOf(addr))
	if err := controlplane.InstallWebhooks(ctx, cp.Config, controlplane.WebhookOptions{BaseURL: baseURL}); err != nil {
		return err
	}
	secret := &corev1.Secret{}
	if err := boot.Get(ctx, client.ObjectKey{Namespace: devNamespace, Name: devSecret}, secret); err != nil {
		return fmt.Errorf("reading the self-managed certificates: %w", err)
	}
	caPEM := secret.Data[certs.CAFile]
	fmt.Fprintf(o.Out, "pvguard is serving at %s with its binder active; webhook configurations installed,\n"+
		"their caBundle filled in by pvguard from its self-managed CA (Secret %s/%s).\n\n", baseURL, devNamespace, devSecret)

	if err := RunDemo(ctx, cp.Config, o.Out); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	if err := printAuditReport(ctx, o.Out, baseURL, caPEM); err != nil {
		return fmt.Errorf("demo: %w", err)
	}

	fmt.Fprintf(o.Out, "\nTry it yourself:\n  export KUBECONFIG=%s\n  policy config: %s (reloaded on save)\n  metrics: curl -k %s/metrics\n", kubeconfig, policyFile, baseURL)
	if o.ExitAfterDemo {
		cancel()
		return ignoreCanceled(<-served)
	}
	fmt.Fprintln(o.Out, "Press Ctrl-C to stop.")
	select {
	case <-ctx.Done():
		cancel()
		return ignoreCanceled(<-served)
	case err := <-served:
		return err
	}
}

// printAuditReport waits for the live audit to see the demo's Failed volume and prints the
// report served at /api/v1/report.
func printAuditReport(ctx context.Context, out io.Writer, baseURL string, caPEM []byte) error {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	var r audit.Report
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL+"/api/v1/report", nil)
		if err != nil {
			return false, err
		}
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
			if f.Rule == "PVG024" && f.Object == "pv-scratch" {
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
