package csisidecars

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DefaultNamespace holds the sidecars' ServiceAccounts unless Options.Namespace names another:
// the namespace an installer lists among pvguard's components (the chart's
// webhook.components.identities), as the storage stack's.
const DefaultNamespace = "csi-default"

// Options say where and how the sidecars run.
type Options struct {
	// Admin reaches the apiserver as a cluster admin: it installs the RBAC and mints the tokens.
	Admin *rest.Config
	// CSIAddress is the plugin's socket (unix:///path).
	CSIAddress string
	// Namespace holds the sidecars' ServiceAccounts (default DefaultNamespace). pvguard's
	// policy config should not list them: a default install does not know them.
	Namespace string
	// Dir receives the kubeconfigs and the log files (required).
	Dir string
	// BinDir holds the binaries (default: bin/ at the repository root).
	BinDir string
	// Verbosity is the sidecars' -v (default 5: each write they make is logged).
	Verbosity int
	// ExtraArgs are appended to a sidecar's flags, by binary name.
	ExtraArgs map[string][]string
}

func (o *Options) defaults() error {
	if o.Admin == nil || o.Dir == "" {
		return errors.New("csisidecars: Options.Admin and Dir are required")
	}
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.BinDir == "" {
		o.BinDir = filepath.Join(RepoRoot(), "bin")
	}
	if o.Verbosity == 0 {
		o.Verbosity = 5
	}
	return nil
}

// Sidecar is a running sidecar and the identity it runs as.
type Sidecar struct {
	*Process
	// ServiceAccount is namespace/name.
	ServiceAccount string
	// User is the username the apiserver gives it: system:serviceaccount:<namespace>:<name>.
	User string
}

// ProvisionerArgs are the external-provisioner's flags besides --csi-address and --kubeconfig:
//   - no leader election (one replica; upstream's Deployment turns it on for several);
//   - --extra-create-metadata: CreateVolume gets the claim's and volume's names, as most
//     drivers' deployments ask;
//   - --timeout 30s (default 10s): a loaded two-core machine must not time calls out;
//   - --retry-interval-max 10s (default 5 minutes): a retry within a test's patience;
//   - --worker-threads 10 (default 100): enough for the tests, fewer goroutines.
//
// Topology needs no flag in v6: the Topology feature gate is GA and locked on (setting it only
// logs a warning), and topology is used because the plugin advertises
// VOLUME_ACCESSIBILITY_CONSTRAINTS. --immediate-topology stays on (the default): Immediate
// claims get the topology of every node the driver is on. --default-fstype stays unset: the
// plugin's volumes are directories with no filesystem type.
func ProvisionerArgs() []string {
	return []string{
		"--leader-election=false",
		"--extra-create-metadata",
		"--timeout=30s",
		"--retry-interval-max=10s",
		"--worker-threads=10",
	}
}

// ResizerArgs are the external-resizer's flags besides --csi-address and --kubeconfig: no
// leader election, --timeout 30s and --retry-interval-max 10s as for the provisioner.
func ResizerArgs() []string {
	return []string{
		"--leader-election=false",
		"--timeout=30s",
		"--retry-interval-max=10s",
	}
}

// StartProvisioner installs the external-provisioner's upstream RBAC, mints its token and
// starts it.
func StartProvisioner(ctx context.Context, o Options) (*Sidecar, error) {
	return start(ctx, o, "csi-provisioner", ProvisionerArgs())
}

// StartResizer installs the external-resizer's upstream RBAC, mints its token and starts it.
func StartResizer(ctx context.Context, o Options) (*Sidecar, error) {
	return start(ctx, o, "csi-resizer", ResizerArgs())
}

// start starts a sidecar: a component talking to the plugin's socket.
func start(ctx context.Context, o Options, binary string, args []string) (*Sidecar, error) {
	if o.CSIAddress == "" {
		return nil, fmt.Errorf("csisidecars: starting %s: Options.CSIAddress is required", binary)
	}
	return launch(ctx, o, binary, append([]string{"--csi-address=" + o.CSIAddress}, args...))
}

// launch installs a component's upstream RBAC in o.Namespace, mints its ServiceAccount's token
// and starts it with args, a kubeconfig for that token and o's verbosity and extra arguments.
func launch(ctx context.Context, o Options, binary string, args []string) (*Sidecar, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	objs, sa, err := UpstreamRBAC(binary, o.Namespace)
	if err != nil {
		return nil, err
	}
	c, err := client.New(o.Admin, client.Options{})
	if err != nil {
		return nil, fmt.Errorf("creating client: %w", err)
	}
	if err := Apply(ctx, c, objs); err != nil {
		return nil, fmt.Errorf("installing %s's RBAC: %w", binary, err)
	}
	kubeconfig := filepath.Join(o.Dir, binary+".kubeconfig")
	if err := ServiceAccountKubeconfig(ctx, o.Admin, sa.Namespace, sa.Name, kubeconfig); err != nil {
		return nil, err
	}
	args = append([]string{"--kubeconfig=" + kubeconfig, fmt.Sprintf("--v=%d", o.Verbosity)}, args...)
	args = append(args, o.ExtraArgs[binary]...)
	p, err := StartProcess(binary, filepath.Join(o.BinDir, binary), args, filepath.Join(o.Dir, binary+".log"))
	if err != nil {
		return nil, err
	}
	return &Sidecar{Process: p, ServiceAccount: sa.Namespace + "/" + sa.Name, User: "system:serviceaccount:" + sa.Namespace + ":" + sa.Name}, nil
}

// WaitStarted waits until the sidecar's log holds marker (a line it logs once it is working),
// failing early when it exits.
func (s *Sidecar) WaitStarted(ctx context.Context, marker string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if strings.Contains(s.Logs(), marker) {
			return nil
		}
		if exited, err := s.Exited(); exited {
			return fmt.Errorf("%s exited (%v) before logging %q:\n%s", s.Name, err, marker, s.Tail(40))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not log %q within %s:\n%s", s.Name, marker, timeout, s.Tail(40))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
