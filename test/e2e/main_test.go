package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/pvguard/pvguard/certs"
	"github.com/pvguard/pvguard/cmd/pvguard/app"
	"github.com/pvguard/pvguard/test/controlplane"
)

// suite is the shared control plane and pvguard server of this package's tests.
var suite struct {
	cfg        *rest.Config
	configFile string
	baseURL    string
	caPEM      []byte
}

// Identities the tests write as. The binder and scheduler are impersonated: the apiserver's
// bootstrap RBAC gives them exactly their upstream permissions.
const (
	binderUser    = controlplane.BinderUser
	schedulerUser = "system:kube-scheduler"
)

// baseConfig is the policy config the suite starts with; tests that change it restore it.
const baseConfig = `
controllers:
  serviceAccounts: [csi/csi-provisioner]
rules:
  volume-grab: {action: warn}
exemptions:
  namespaces: [exempt-*]
`

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	assets, err := controlplane.AssetsDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	cp, err := controlplane.Start(assets)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer func() {
		if err := cp.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: stopping control plane:", err)
		}
	}()
	suite.cfg = cp.Config

	dir, err := os.MkdirTemp("", "pvguard-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	kubeconfig := filepath.Join(dir, "kubeconfig")
	suite.configFile = filepath.Join(dir, "policy.yaml")
	certDir := filepath.Join(dir, "certs")
	for path, data := range map[string][]byte{kubeconfig: cp.KubeConfig, suite.configFile: []byte(baseConfig)} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			return 1
		}
	}
	bundle, err := certs.Issue(certs.Request{DNSNames: []string{"localhost"}, IPs: []net.IP{net.ParseIP("127.0.0.1")}})
	if err == nil {
		err = bundle.WriteDir(certDir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: issuing certificates:", err)
		return 1
	}
	suite.caPEM = bundle.CA.CertPEM

	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan net.Addr, 1)
	opts := app.DefaultServeOptions()
	opts.Kubeconfig = kubeconfig
	opts.Listen = "127.0.0.1:0"
	opts.CertDir = certDir
	opts.ConfigFile = suite.configFile
	opts.ShutdownTimeout = 5 * time.Second
	opts.Ready = func(a net.Addr) { ready <- a }
	var wg sync.WaitGroup
	wg.Add(1)
	serveErr := make(chan error, 1)
	go func() {
		defer wg.Done()
		serveErr <- app.Serve(ctx, opts, zap.New(zap.UseDevMode(true), zap.Level(zapLevel()), zap.StacktraceLevel(zapcore.PanicLevel)))
	}()
	defer func() { cancel(); wg.Wait() }()
	select {
	case addr := <-ready:
		suite.baseURL = "https://" + addr.String()
	case err := <-serveErr:
		fmt.Fprintln(os.Stderr, "e2e: pvguard serve:", err)
		return 1
	case <-time.After(2 * time.Minute):
		fmt.Fprintln(os.Stderr, "e2e: pvguard did not become ready")
		return 1
	}
	if err := controlplane.InstallWebhooks(ctx, cp.Config, controlplane.WebhookOptions{BaseURL: suite.baseURL, CABundle: suite.caPEM}); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	return m.Run()
}

// --- clients ---

// actor is a client acting as one identity, with the warnings it received.
type actor struct {
	client.Client
	warnings *controlplane.Warnings
}

func newActor(t *testing.T, impersonate string, groups ...string) *actor {
	t.Helper()
	w := &controlplane.Warnings{}
	c, err := controlplane.NewClient(suite.cfg, w, impersonate, groups...)
	if err != nil {
		t.Fatal(err)
	}
	return &actor{Client: c, warnings: w}
}

func admin(t *testing.T) *actor { return newActor(t, "") }
func binder(t *testing.T) *actor {
	return newActor(t, binderUser, "system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated")
}

// namespace creates a fresh namespace for one test.
func namespace(t *testing.T, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	if err := admin(t).Create(context.Background(), ns); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	return ns.Name
}

// uniq makes cluster-scoped names unique per test.
func uniq(t *testing.T, name string) string {
	s := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(s) > 40 {
		s = s[len(s)-40:]
	}
	return strings.Trim(name+"-"+s, "-")
}

// zapLevel keeps pvguard's logs out of test output unless PVGUARD_E2E_VERBOSE is set.
func zapLevel() zapcore.Level {
	if os.Getenv("PVGUARD_E2E_VERBOSE") != "" {
		return zapcore.DebugLevel
	}
	return zapcore.ErrorLevel
}
