package cluster

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.uber.org/zap/zapcore"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crzap "sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/pvguard/pvguard/binder"
	"github.com/pvguard/pvguard/certs"
	"github.com/pvguard/pvguard/charts"
	"github.com/pvguard/pvguard/internal/cli"
	"github.com/pvguard/pvguard/internal/devcluster"
	"github.com/pvguard/pvguard/test/harness"
)

// The chart is rendered as devcluster's release, so the webhook configurations
// devcluster.InstallWebhooks renders and the RBAC rendered here are the same release's.
const (
	release   = devcluster.ChartRelease
	namespace = devcluster.ChartNamespace
)

// ConflictLine is what pvguard's binder logs (at V(1)) when a write of it lost to another
// writer (HTTP 409): counted per instance, see PVGuard.Conflicts.
const ConflictLine = "retrying after a conflict"

// PVGuard is a running `pvguard serve`, in this process (the same code as the binary), as the
// chart's ServiceAccount.
type PVGuard struct {
	// BaseURL is https://127.0.0.1:port of its listener (webhooks, /metrics).
	BaseURL string
	// Log is its log file (JSON lines, debug level).
	Log string
	// Binder is its --binder mode.
	Binder binder.Mode
	// Args are the chart's container arguments it was started with (before the overrides
	// documented in startPVGuard).
	Args []string
	// ConfigFile is the policy config it reads (the chart's policy ConfigMap).
	ConfigFile string

	hc        *http.Client
	cancel    context.CancelFunc
	done      chan error
	stopOnce  sync.Once
	stopErr   error
	exited    chan struct{}
	conflicts *lineCounter
	logFile   *os.File
}

// startPVGuard installs the chart's ServiceAccount and RBAC for the binder mode (the chart
// grants volume and claim writes only with --binder=active) and runs `pvguard serve` with the
// chart's Deployment arguments and policy ConfigMap, authenticated by a token of the chart's
// ServiceAccount. What differs from a pod: it listens on a loopback port; the chart's cert-manager
// variant is rendered (--cert-dir) and the directory holds a certificate issued here, since the
// test apiserver cannot reach a Service and calls the webhooks by URL
// (devcluster.InstallWebhooks, the chart's webhook configurations pointed at the URL); no
// shutdown delay (no Service endpoints to drain).
func (c *Cluster) startPVGuard(ctx context.Context, mode binder.Mode) (*PVGuard, error) {
	args, policyYAML, sa, values, err := c.installChart(ctx, mode)
	if err != nil {
		return nil, err
	}
	token, err := c.serviceAccountToken(ctx, namespace, sa)
	if err != nil {
		return nil, err
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["cluster"] = &clientcmdapi.Cluster{Server: c.Admin.Host, CertificateAuthorityData: c.Admin.CAData}
	kc.AuthInfos[sa] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["pvguard"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: sa}
	kc.CurrentContext = "pvguard"
	kubeconfig := filepath.Join(c.LogDir, "pvguard.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		return nil, err
	}
	policyFile := filepath.Join(c.LogDir, "pvguard-policy.yaml")
	if err := os.WriteFile(policyFile, []byte(policyYAML), 0o600); err != nil {
		return nil, err
	}
	if len(args) > 0 && args[0] == "serve" {
		args = args[1:]
	}
	o, err := cli.ParseServeArgs(args)
	if err != nil {
		return nil, fmt.Errorf("the chart's container arguments %q: %w", args, err)
	}
	o.API.Kubeconfig, o.Listen, o.ConfigFile, o.Certs.Dir = kubeconfig, "127.0.0.1:0", policyFile, c.files.pvguardCerts
	o.ShutdownDelay, o.ShutdownTimeout = 0, 5*time.Second

	logPath := filepath.Join(c.LogDir, "pvguard.log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(f, "=== %s pvguard serve %q (overridden: --kubeconfig --listen --config --cert-dir --shutdown-delay=0)\n", time.Now().Format(time.RFC3339Nano), args)
	counter := &lineCounter{w: f, needle: []byte(ConflictLine)}
	log := FileLogger(counter)

	// The dashboard, the report and the explanations need a bearer token: a cluster reader's.
	readerToken, err := harness.ClusterReaderToken(c.Admin)
	if err != nil {
		f.Close()
		return nil, err
	}
	ready := make(chan net.Addr, 1)
	hooks := cli.ServeHooks{Ready: func(a net.Addr) { ready <- a }}
	sctx, cancel := context.WithCancel(context.Background())
	p := &PVGuard{Log: logPath, Binder: o.Binder.Mode, Args: args, ConfigFile: policyFile, cancel: cancel, done: make(chan error, 1), exited: make(chan struct{}),
		conflicts: counter, logFile: f, hc: harness.WithBearer(httpsClient(c.files.pvguardCA), readerToken)}
	go func() {
		err := cli.ServeWith(sctx, o, hooks, log)
		p.done <- err
		close(p.exited)
	}()
	select {
	case a := <-ready:
		p.BaseURL = "https://" + a.String()
	case err := <-p.done:
		cancel()
		f.Close()
		return nil, fmt.Errorf("pvguard serve: %w (log: %s)", err, logPath)
	case <-time.After(2 * time.Minute):
		cancel()
		return nil, fmt.Errorf("pvguard serve did not become ready (log: %s)", logPath)
	}
	c.webhookValues = values
	if err := devcluster.InstallWebhooks(ctx, c.Admin, devcluster.WebhookOptions{BaseURL: p.BaseURL, CABundle: c.files.pvguardCA, Values: values}); err != nil {
		return nil, errors.Join(err, p.Stop())
	}
	return p, nil
}

// installChart renders the chart for the binder mode and creates or updates its ServiceAccount
// and RBAC; it returns the Deployment's container arguments, the policy ConfigMap's config, the
// ServiceAccount's name and the values it rendered the chart with (for the webhook
// configurations).
func (c *Cluster) installChart(ctx context.Context, mode binder.Mode) (args []string, policyYAML, sa string, values map[string]any, err error) {
	if err := c.ensureNamespace(ctx, namespace); err != nil {
		return nil, "", "", nil, err
	}
	values = map[string]any{
		"binder":      map[string]any{"mode": string(mode)},
		"certManager": map[string]any{"enabled": true},
		"webhook":     map[string]any{"components": map[string]any{"identities": c.componentIdentities()}},
	}
	if c.chartValues != nil {
		c.chartValues(values)
	}
	manifests, err := charts.Render(release, namespace, values)
	if err != nil {
		return nil, "", "", nil, err
	}
	for _, m := range manifests {
		switch m.Object.GetKind() {
		case "Deployment":
			d := &appsv1.Deployment{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m.Object.Object, d); err != nil {
				return nil, "", "", nil, fmt.Errorf("%s: %w", m.Template, err)
			}
			if args, err = charts.ContainerArgs(d.Spec.Template.Spec.Containers[0], namespace); err != nil {
				return nil, "", "", nil, fmt.Errorf("%s: %w", m.Template, err)
			}
			sa = d.Spec.Template.Spec.ServiceAccountName
		case "ConfigMap":
			cm := &corev1.ConfigMap{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m.Object.Object, cm); err != nil {
				return nil, "", "", nil, fmt.Errorf("%s: %w", m.Template, err)
			}
			if p, ok := cm.Data["policy.yaml"]; ok {
				policyYAML = p
				continue
			}
			// The admission policies' parameter object, which pvguard then keeps current.
			if err := c.apply(ctx, m.Object); err != nil {
				return nil, "", "", nil, fmt.Errorf("%s: %w", m.Template, err)
			}
		case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
			// The guards the apiserver enforces by itself, as the chart installs them.
			"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
			if err := c.apply(ctx, m.Object); err != nil {
				return nil, "", "", nil, fmt.Errorf("%s: %w", m.Template, err)
			}
		}
	}
	if args == nil || sa == "" || policyYAML == "" {
		return nil, "", "", nil, errors.New("the chart rendered no Deployment with a ServiceAccount, or no policy ConfigMap")
	}
	return args, policyYAML, sa, values, nil
}

// apply creates obj or replaces the live object's content with it.
func (c *Cluster) apply(ctx context.Context, obj *unstructured.Unstructured) error {
	obj = obj.DeepCopy()
	err := c.Client.Create(ctx, obj)
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(obj.GroupVersionKind())
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(obj), live); err != nil {
		return err
	}
	obj.SetResourceVersion(live.GetResourceVersion())
	return c.Client.Update(ctx, obj)
}

// writePVGuardCerts issues pvguard's serving certificate for 127.0.0.1.
func (c *Cluster) writePVGuardCerts() error {
	b, err := certs.Issue(certs.Request{DNSNames: []string{"localhost"}, IPs: []net.IP{net.ParseIP("127.0.0.1")}})
	if err != nil {
		return fmt.Errorf("issuing pvguard's certificate: %w", err)
	}
	c.files.pvguardCerts = filepath.Join(c.LogDir, "pvguard-certs")
	c.files.pvguardCA = b.CA.CertPEM
	return b.WriteDir(c.files.pvguardCerts)
}

func httpsClient(ca []byte) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
}

// Metrics reads the samples of the named metric families (all when none is named), keyed
// name{label="value",...} with the labels sorted; a family not exposed yet has no samples.
func (p *PVGuard) Metrics(names ...string) (map[string]float64, error) {
	resp, err := p.hc.Get(p.BaseURL + "/metrics")
	if err != nil {
		return nil, fmt.Errorf("reading pvguard's metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("reading pvguard's metrics: HTTP %d", resp.StatusCode)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("parsing pvguard's metrics: %w", err)
	}
	out := map[string]float64{}
	for name, fam := range families {
		if len(names) > 0 && !slices.Contains(names, name) {
			continue
		}
		for _, m := range fam.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			sort.Strings(labels)
			out[name+"{"+strings.Join(labels, ",")+"}"] = m.GetCounter().GetValue() + m.GetGauge().GetValue() + m.GetUntyped().GetValue()
		}
	}
	return out, nil
}

// HTTPClient reaches BaseURL: it trusts the CA of pvguard's serving certificate, and presents a
// token of a ServiceAccount that may list every claim, volume and class.
func (p *PVGuard) HTTPClient() *http.Client { return p.hc }

// Conflicts is how many writes this instance's binder lost to another writer (409) so far.
func (p *PVGuard) Conflicts() int { return p.conflicts.count() }

// Alive returns an error when Serve has returned on its own.
func (p *PVGuard) Alive() error {
	select {
	case <-p.exited:
		return fmt.Errorf("pvguard serve returned; see %s", p.Log)
	default:
		return nil
	}
}

// Stop stops the instance and waits for it.
func (p *PVGuard) Stop() error {
	p.stopOnce.Do(func() {
		p.cancel()
		select {
		case <-p.exited:
		case <-time.After(time.Minute):
			p.stopErr = fmt.Errorf("pvguard serve did not stop within a minute; see %s", p.Log)
			return
		}
		p.logFile.Close()
	})
	return p.stopErr
}

// lineCounter passes writes through and counts those containing needle (zap writes one entry
// per Write).
type lineCounter struct {
	mu     sync.Mutex
	w      *os.File
	needle []byte
	n      int
}

func (l *lineCounter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if bytes.Contains(b, l.needle) {
		l.n++
	}
	return l.w.Write(b)
}

func (l *lineCounter) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

// FileLogger logs JSON lines at debug level (logr V(1) and V(2) included) to w.
func FileLogger(w io.Writer) logr.Logger {
	return crzap.New(crzap.WriteTo(w), crzap.Level(zapcore.Level(-2)), crzap.StacktraceLevel(zapcore.PanicLevel))
}
