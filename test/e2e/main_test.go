package e2e

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/internal/devcli"
	"github.com/pvguard/pvguard/internal/devcluster"
	"github.com/pvguard/pvguard/test/controlplane"
	"github.com/pvguard/pvguard/test/harness"
)

// suite is the shared control plane and pvguard server of this package's tests.
var suite struct {
	// h starts further pvguard instances on the suite's control plane.
	h          *harness.Harness
	cfg        *rest.Config
	configFile string
	baseURL    string
	caPEM      []byte
	kubeconfig string
	// readerToken is a ServiceAccount's token that may list every claim, volume and class: what
	// the tests read the report, the dashboard and the explanations with.
	readerToken string
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
  users: [` + seederUser + `]
`

func TestMain(m *testing.M) {
	// TestDemo's pvguard-dev processes are this binary re-executed.
	harness.RunChildIfAsked(devcli.NewRootCommand)
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	h, err := harness.Start(baseConfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer func() {
		if err := h.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: stopping control plane:", err)
		}
	}()
	if err := h.InstallOpenReportsCRDs(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	inst, err := h.Serve(nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer func() { _ = inst.Stop() }()
	if err := h.InstallWebhooks(inst); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	suite.cfg, suite.configFile, suite.baseURL, suite.caPEM = h.Config, h.PolicyFile, inst.BaseURL, h.CAPEM
	suite.kubeconfig = h.Kubeconfig
	suite.h = h
	if suite.readerToken, err = harness.ClusterReaderToken(h.Config); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	return m.Run()
}

// actor is a client acting as one identity, with the warnings it received.
type actor struct {
	client.Client
	warnings *devcluster.Warnings
}

func newActor(t *testing.T, impersonate string, groups ...string) *actor {
	t.Helper()
	w := &devcluster.Warnings{}
	c, err := devcluster.NewClient(suite.cfg, w, impersonate, groups...)
	if err != nil {
		t.Fatal(err)
	}
	return &actor{Client: c, warnings: w}
}

func admin(t *testing.T) *actor { return newActor(t, "") }
func binder(t *testing.T) *actor {
	return newActor(t, binderUser, "system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated")
}

// uniq makes cluster-scoped names unique per test.
func uniq(t *testing.T, name string) string {
	s := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(s) > 40 {
		s = s[len(s)-40:]
	}
	return strings.Trim(name+"-"+s, "-")
}
