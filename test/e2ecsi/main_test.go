// Package e2ecsi runs pvguard beside the real CSI sidecars on a real control plane: etcd and
// kube-apiserver (envtest); kube-controller-manager with only the controllers the CSI storage
// path uses besides the binder (pv-protection, pvc-protection, the expander); pvguard `serve`
// with the chart's webhook configurations, its policy and its RBAC, under its ServiceAccount,
// with `--binder=active`; a CSI plugin of ours (test/csiplugin) standing in for the storage
// backend; and the real external-provisioner and external-resizer (bin/, built by
// `make tools`) under their upstream ServiceAccounts and RBAC, which pvguard's policy does not
// list. What talks to the API is the real thing, except the kubelet: no kubelet runs, so nothing
// mounts a volume, no Pod uses one, and the node's part of an expansion never happens.
package e2ecsi

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/charts"
	"github.com/pvguard/pvguard/internal/cli"
	"github.com/pvguard/pvguard/internal/devcluster"
	"github.com/pvguard/pvguard/test/csiplugin"
	"github.com/pvguard/pvguard/test/csisidecars"
	"github.com/pvguard/pvguard/test/harness"
)

// world is everything the suite runs; the tests share it.
type world struct {
	h           *harness.Harness
	pvguard     *harness.Instance
	dir         string
	plugin      *csiplugin.Plugin
	provisioner *csisidecars.Sidecar
	resizer     *csisidecars.Sidecar
	kcm         *csisidecars.Process
}

var w world

// nodes are the fake nodes the driver runs on.
var nodes = []string{"node-a", "node-b", "node-c"}

func TestMain(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2ecsi:", err)
		code = 1
	}
	os.Exit(code)
}

func run(m *testing.M) (code int, err error) {
	ctx := context.Background()
	if w.dir, err = os.MkdirTemp("", "pvguard-e2ecsi-"); err != nil {
		return 1, err
	}
	// The logs stay for a failed run: the failure messages name them.
	defer func() {
		if code == 0 && err == nil {
			_ = os.RemoveAll(w.dir)
		} else {
			fmt.Fprintln(os.Stderr, "e2ecsi: logs kept in", w.dir)
		}
	}()

	chart, err := renderChart()
	if err != nil {
		return 1, err
	}
	if w.h, err = harness.Start(chart.policy); err != nil {
		return 1, err
	}
	defer func() { _ = w.h.Stop() }()
	admin, err := devcluster.NewClient(w.h.Config, nil, "")
	if err != nil {
		return 1, err
	}

	// pvguard as a real install runs it: the chart's ServiceAccount and RBAC, a token for it.
	if err := csisidecars.Apply(ctx, admin, chart.rbac); err != nil {
		return 1, fmt.Errorf("installing the chart's RBAC: %w", err)
	}
	pvguardKubeconfig := filepath.Join(w.dir, "pvguard.kubeconfig")
	if err := csisidecars.ServiceAccountKubeconfig(ctx, w.h.Config, devcluster.ChartNamespace, chart.serviceAccount, pvguardKubeconfig); err != nil {
		return 1, err
	}
	if w.pvguard, err = w.h.Serve(func(o *cli.ServeFlags) {
		o.API.Kubeconfig = pvguardKubeconfig
		o.Binder.Mode = "active"
		o.LeaderElection.Elect = false
		o.Audit.Interval = 0
	}); err != nil {
		return 1, err
	}
	defer func() { _ = w.pvguard.Stop() }()
	if err := w.h.InstallWebhooks(w.pvguard); err != nil {
		return 1, err
	}

	if w.kcm, err = startControllerManager(); err != nil {
		return 1, err
	}
	defer func() { _ = w.kcm.Stop() }()

	for _, n := range nodes {
		if err := admin.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}); err != nil {
			return 1, fmt.Errorf("creating node %s: %w", n, err)
		}
	}
	if w.plugin, err = csiplugin.New(csiplugin.Options{Root: filepath.Join(w.dir, "volumes")}); err != nil {
		return 1, err
	}
	// A short path: a unix socket's must stay under 108 bytes.
	sockDir, err := os.MkdirTemp("", "csi")
	if err != nil {
		return 1, err
	}
	defer func() { _ = os.RemoveAll(sockDir) }()
	srv, err := w.plugin.Serve(filepath.Join(sockDir, "csi.sock"))
	if err != nil {
		return 1, err
	}
	defer func() { _ = srv.Stop() }()
	if err := csisidecars.RegisterDriver(ctx, admin, csisidecars.Driver{Name: w.plugin.Name(), TopologyKey: w.plugin.TopologyKey(), Nodes: nodes}); err != nil {
		return 1, err
	}

	opts := csisidecars.Options{Admin: w.h.Config, CSIAddress: srv.Address, Dir: w.dir}
	if w.provisioner, err = csisidecars.StartProvisioner(ctx, opts); err != nil {
		return 1, err
	}
	defer func() { _ = w.provisioner.Stop() }()
	if w.resizer, err = csisidecars.StartResizer(ctx, opts); err != nil {
		return 1, err
	}
	defer func() { _ = w.resizer.Stop() }()
	if err := w.provisioner.WaitStarted(ctx, "Started provisioner controller", 2*time.Minute); err != nil {
		return 1, err
	}
	if err := w.resizer.WaitStarted(ctx, "Starting external resizer", 2*time.Minute); err != nil {
		return 1, err
	}
	code = m.Run()
	// A component that died during the run would have turned the flows into waits for
	// nothing; say so rather than leave only timeouts.
	for _, p := range []*csisidecars.Process{w.provisioner.Process, w.resizer.Process, w.kcm} {
		if exited, perr := p.Exited(); exited {
			return 1, fmt.Errorf("%s exited during the run (%v); its log: %s", p.Name, perr, p.LogPath)
		}
	}
	return code, nil
}

// chart is what the Helm chart installs for pvguard with the binder active: its policy config
// (which lists pvguard's own ServiceAccount as a controller, and nothing else) and its RBAC.
type chart struct {
	policy         string
	serviceAccount string
	rbac           []client.Object
}

func renderChart() (chart, error) {
	manifests, err := charts.Render(devcluster.ChartRelease, devcluster.ChartNamespace, map[string]any{
		"binder": map[string]any{"mode": "active"},
		// No openreports.io CRDs here, and the audit is not what this suite checks.
		"audit": map[string]any{"interval": "0"},
	})
	if err != nil {
		return chart{}, err
	}
	var c chart
	for _, mf := range manifests {
		obj := mf.Object
		switch obj.GetKind() {
		case "ServiceAccount":
			c.serviceAccount = obj.GetName()
			c.rbac = append(c.rbac, obj)
		case "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
			c.rbac = append(c.rbac, obj)
		case "ConfigMap":
			if p, ok, _ := unstructured.NestedString(obj.Object, "data", "policy.yaml"); ok {
				c.policy = p
			}
		}
	}
	if c.policy == "" || c.serviceAccount == "" {
		return chart{}, fmt.Errorf("the chart rendered no policy ConfigMap or no ServiceAccount")
	}
	return c, nil
}

// startControllerManager runs the real kube-controller-manager with the controllers the CSI
// storage path needs when the binder is pvguard's: the protection controllers remove the
// kubernetes.io/pv(c)-protection finalizers the apiserver's admission adds (without them a
// deleted claim or volume stays Terminating), and the expander is upstream's part of an
// expansion. Each runs as its own kube-system ServiceAccount (--use-service-account-credentials),
// as in a real cluster, which pvguard knows as built-in controllers.
func startControllerManager() (*csisidecars.Process, error) {
	args := []string{
		"--kubeconfig=" + w.h.Kubeconfig,
		"--controllers=persistentvolume-protection-controller,persistentvolumeclaim-protection-controller,persistentvolume-expander-controller",
		"--use-service-account-credentials",
		"--leader-elect=false",
		"--secure-port=0",
		"--v=2",
	}
	bin := filepath.Join(csisidecars.RepoRoot(), "bin", "kube-controller-manager")
	return csisidecars.StartProcess("kube-controller-manager", bin, args, filepath.Join(w.dir, "kube-controller-manager.log"))
}
