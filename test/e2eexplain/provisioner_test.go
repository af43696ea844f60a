package e2eexplain

// Whether a claim's external provisioner appears to run, told from the Lease the real
// external-provisioner (bin/csi-provisioner, built by `make tools`) holds with leader election.
// Only kube-apiserver, etcd, the provisioner and a CSI plugin of ours run: no binder annotates the
// claim for the provisioner, so the claim stays Pending, waiting for it.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pvguard/pvguard/explain"
	"github.com/pvguard/pvguard/internal/cli"
	"github.com/pvguard/pvguard/internal/devcluster"
	"github.com/pvguard/pvguard/test/csiplugin"
	"github.com/pvguard/pvguard/test/csisidecars"
	"github.com/pvguard/pvguard/test/harness"
)

// leaseDuration is the provisioner's --leader-election-lease-duration: short, so that a stopped
// provisioner's Lease expires within the test's patience.
const leaseDuration = 4 * time.Second

// TestExplainSaysWhetherTheProvisionerRuns: a claim waiting for its provisioner is explained, by
// `pvguard explain pvc` on the live cluster, as waiting for a provisioner that runs while the real
// external-provisioner holds and renews its Lease; once it is stopped and the Lease expired, as
// one that appears not to run; and with no Lease at all (a provisioner without leader election
// holds none), as one of which this cannot be told.
func TestExplainSaysWhetherTheProvisionerRuns(t *testing.T) {
	ctx := context.Background()
	assets, err := devcluster.AssetsDir()
	harness.Must(t, err, "finding the control plane's binaries")
	cp, err := devcluster.Start(assets)
	harness.Must(t, err, "starting the control plane")
	t.Cleanup(func() { _ = cp.Stop() })
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	harness.Must(t, os.WriteFile(kubeconfig, cp.KubeConfig, 0o600), "writing the kubeconfig")
	admin, err := devcluster.NewClient(cp.Config, nil, "")
	harness.Must(t, err, "creating a client")

	plugin, err := csiplugin.New(csiplugin.Options{Root: filepath.Join(dir, "volumes")})
	harness.Must(t, err, "creating the CSI plugin")
	sockDir, err := os.MkdirTemp("", "csi") // a unix socket's path must stay under 108 bytes
	harness.Must(t, err, "creating the socket's directory")
	t.Cleanup(func() { _ = os.RemoveAll(sockDir) })
	srv, err := plugin.Serve(filepath.Join(sockDir, "csi.sock"))
	harness.Must(t, err, "serving the CSI plugin")
	t.Cleanup(func() { _ = srv.Stop() })
	harness.Must(t, admin.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}), "creating a node")
	harness.Must(t, csisidecars.RegisterDriver(ctx, admin, csisidecars.Driver{Name: plugin.Name(), TopologyKey: plugin.TopologyKey(), Nodes: []string{"node-a"}}),
		"registering the driver")

	// The Lease in the provisioner's own namespace, as upstream's Deployment runs it (the pod's
	// namespace; here there is no pod, so the flag names it).
	const namespace = "csi-default"
	provisioner, err := csisidecars.StartProvisioner(ctx, csisidecars.Options{Admin: cp.Config, CSIAddress: srv.Address, Dir: dir, BinDir: assets,
		Namespace: namespace, ExtraArgs: map[string][]string{"csi-provisioner": {
			"--leader-election=true", "--leader-election-namespace=" + namespace,
			"--leader-election-lease-duration=" + leaseDuration.String(), "--leader-election-renew-deadline=3s", "--leader-election-retry-period=1s",
		}}})
	harness.Must(t, err, "starting the external-provisioner")
	t.Cleanup(func() { _ = provisioner.Stop() })
	harness.Must(t, provisioner.WaitStarted(ctx, "Started provisioner controller", 2*time.Minute), "waiting for the provisioner to lead")

	harness.Must(t, admin.Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "fast"}, Provisioner: plugin.Name()}), "creating the class")
	harness.Must(t, admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}), "creating the namespace")
	class := "fast"
	harness.Must(t, admin.Create(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &class, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}),
		"creating the claim")

	lease := explain.ProvisionerLeaseName(plugin.Name())
	// explained is a condition: the claim is explained as waiting for the plugin's provisioner,
	// which runs as running says, with a state that says each of state. Its error says what the
	// explanation said otherwise.
	explained := func(running string, state ...string) func(context.Context) (bool, error) {
		return func(context.Context) (bool, error) {
			var out, errOut bytes.Buffer
			if err := cli.RunExplainClaim(cli.ExplainFlags{Kubeconfig: kubeconfig, Output: "json"}, "team-a/data", &out, &errOut); err != nil {
				return false, fmt.Errorf("%w (%s)", err, errOut.String())
			}
			var e explain.Explanation
			if err := json.Unmarshal(out.Bytes(), &e); err != nil {
				return false, err
			}
			if e.WaitingFor != explain.WaitingForProvisioner || e.Provisioner != plugin.Name() || e.ProvisionerRunning != running {
				return false, fmt.Errorf("waiting for %q (%q), provisioner running %q: %s", e.WaitingFor, e.Provisioner, e.ProvisionerRunning, e.State.String())
			}
			for _, s := range state {
				if !strings.Contains(e.State.String(), s) {
					return false, fmt.Errorf("state %q lacks %q", e.State.String(), s)
				}
			}
			return true, nil
		}
	}

	harness.WaitFor(t, time.Minute, "the provisioner explained as running",
		explained(explain.ProvisionerRunningYes, "provisioner "+plugin.Name()+" runs: Lease "+namespace+"/"+lease+" held by ", "ago"))

	// Stopped without releasing the Lease (upstream's ReleaseLeaderElectionOnExit is off by
	// default): it expires leaseDuration after the last renewal.
	harness.Must(t, provisioner.Stop(), "stopping the provisioner")
	harness.WaitFor(t, 4*leaseDuration+30*time.Second, "the stopped provisioner explained as not running",
		explained(explain.ProvisionerRunningNo, "appears not to run", "was not renewed in the last "+leaseDuration.String()))

	// No Lease: a provisioner without leader election holds none, so nothing says whether it runs.
	harness.Must(t, admin.Delete(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: lease}}), "deleting the Lease")
	harness.WaitFor(t, 30*time.Second, "the provisioner explained as unknown without a Lease",
		explained(explain.ProvisionerRunningUnknown, "is unknown: no Lease "+lease))
}
