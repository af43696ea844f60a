// Package harness runs pvguard end to end for tests: a real control plane, a policy config file,
// serving certificates, and `pvguard serve` instances (the same code as the binary) with the
// webhook configurations installed. It also holds the helpers the end-to-end suites share, each
// declared once: waiting (Poll, WaitFor, Eventually), reading and readying objects (GetPV,
// GetPVC, FreshPV, FreshPVC, BoundTo, DeleteClaim, EventReasons), namespaces, judging errors
// (DeniedBy, WebhookUnreachable), the audit report, env knobs and child processes.
package harness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	goruntime "runtime"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/pvguard/pvguard/certs"
	"github.com/pvguard/pvguard/internal/cli"
	"github.com/pvguard/pvguard/internal/devcluster"
)

// Harness is a running control plane with everything pvguard instances need.
type Harness struct {
	cp         *devcluster.ControlPlane
	dir        string
	Config     *rest.Config
	Kubeconfig string
	PolicyFile string
	CertDir    string
	CAPEM      []byte
}

// Start starts the control plane and writes the kubeconfig, policy config and certificates.
func Start(policy string) (*Harness, error) { return StartWith(policy, devcluster.Options{}) }

// StartWith is Start with the control plane's options, e.g. an apiserver flag
// (--admission-control-config-file).
func StartWith(policy string, o devcluster.Options) (*Harness, error) {
	assets, err := devcluster.AssetsDir()
	if err != nil {
		return nil, err
	}
	cp, err := devcluster.StartWith(assets, o)
	if err != nil {
		return nil, err
	}
	h := &Harness{cp: cp, Config: cp.Config}
	if err := h.prepare(policy); err != nil {
		_ = h.Stop()
		return nil, err
	}
	return h, nil
}

func (h *Harness) prepare(policy string) error {
	var err error
	if h.dir, err = os.MkdirTemp("", "pvguard-e2e-"); err != nil {
		return err
	}
	h.Kubeconfig = filepath.Join(h.dir, "kubeconfig")
	h.PolicyFile = filepath.Join(h.dir, "policy.yaml")
	h.CertDir = filepath.Join(h.dir, "certs")
	if err := os.WriteFile(h.Kubeconfig, h.cp.KubeConfig, 0o600); err != nil {
		return err
	}
	if err := h.SetPolicy(policy); err != nil {
		return err
	}
	bundle, err := certs.Issue(certs.Request{DNSNames: []string{"localhost"}, IPs: []net.IP{net.ParseIP("127.0.0.1")}})
	if err != nil {
		return fmt.Errorf("issuing certificates: %w", err)
	}
	h.CAPEM = bundle.CA.CertPEM
	return bundle.WriteDir(h.CertDir)
}

// SetPolicy rewrites the policy config file; running instances reload it.
func (h *Harness) SetPolicy(policy string) error {
	return os.WriteFile(h.PolicyFile, []byte(policy), 0o600)
}

// Stop stops the control plane and removes the files.
func (h *Harness) Stop() error {
	err := h.cp.Stop()
	if h.dir != "" {
		err = errors.Join(err, os.RemoveAll(h.dir))
	}
	return err
}

// Instance is one running `pvguard serve`.
type Instance struct {
	BaseURL string
	// Log keeps the instance's log lines (info and above), for a failed test to show.
	Log    *LogTail
	cancel context.CancelFunc
	done   chan error

	stopOnce sync.Once
	stopErr  error
}

// Serve starts a pvguard serve instance on a free loopback port; mutate adjusts its options.
// It returns once the instance is ready.
func (h *Harness) Serve(mutate func(*cli.ServeFlags)) (*Instance, error) {
	return h.ServeWith(cli.BinderHooks{}, mutate)
}

// ServeWith is Serve with hooks into the instance's binder (its writes and its cache), passed
// to it through cli.ServeWith with the harness's own readiness hook.
func (h *Harness) ServeWith(binder cli.BinderHooks, mutate func(*cli.ServeFlags)) (*Instance, error) {
	opts := cli.DefaultServeFlags()
	opts.API.Kubeconfig = h.Kubeconfig
	opts.Listen = "127.0.0.1:0"
	opts.Certs.Dir = h.CertDir
	opts.ConfigFile = h.PolicyFile
	opts.ShutdownTimeout = 5 * time.Second
	opts.ShutdownDelay = 0
	if mutate != nil {
		mutate(&opts)
	}
	ready := make(chan net.Addr, 1)
	hooks := cli.ServeHooks{Ready: func(a net.Addr) { ready <- a }, Binder: binder}
	ctx, cancel := context.WithCancel(context.Background())
	inst := &Instance{cancel: cancel, done: make(chan error, 1), Log: NewLogTail(2000)}
	go func() { inst.done <- cli.ServeWith(ctx, opts, hooks, inst.Log.Logger()) }()
	select {
	case a := <-ready:
		inst.BaseURL = "https://" + a.String()
		return inst, nil
	case err := <-inst.done:
		cancel()
		return nil, fmt.Errorf("pvguard serve: %w", err)
	case <-time.After(2 * time.Minute):
		cancel()
		return nil, errors.New("pvguard serve did not become ready")
	}
}

// Stop stops the instance gracefully and waits for it; later calls return the same result.
func (i *Instance) Stop() error {
	i.stopOnce.Do(func() {
		i.cancel()
		i.stopErr = <-i.done
	})
	return i.stopErr
}

// InstallWebhooks points the apiserver's webhook configurations at an instance.
func (h *Harness) InstallWebhooks(i *Instance) error {
	return devcluster.InstallWebhooks(context.Background(), h.Config, devcluster.WebhookOptions{BaseURL: i.BaseURL, CABundle: h.CAPEM})
}

// Logger keeps pvguard's logs out of test output unless PVGUARD_E2E_VERBOSE is set.
func Logger() logr.Logger {
	lvl := zapcore.ErrorLevel
	if os.Getenv("PVGUARD_E2E_VERBOSE") != "" {
		lvl = zapcore.DebugLevel
	}
	log := zap.New(zap.UseDevMode(true), zap.Level(lvl), zap.StacktraceLevel(zapcore.PanicLevel))
	ctrllog.SetLogger(log) // for controller-runtime parts that log through its global logger
	return log
}

// InstallOpenReportsCRDs installs the openreports.io CRDs the chart ships (charts/pvguard/crds,
// kept equal to the reports-api module pvguard builds against by hack/sync-crds.sh and a test).
func (h *Harness) InstallOpenReportsCRDs() error {
	dir := filepath.Join(RepoRoot(), "charts", "pvguard", "crds")
	if _, err := envtest.InstallCRDs(h.Config, envtest.CRDInstallOptions{Paths: []string{dir}, ErrorIfPathMissing: true}); err != nil {
		return fmt.Errorf("installing the openreports.io CRDs from %s: %w", dir, err)
	}
	return nil
}

// RepoRoot is the checkout this package was built from.
func RepoRoot() string {
	_, file, _, _ := goruntime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}
