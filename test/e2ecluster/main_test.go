package e2ecluster

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/pvguard/pvguard/binder"
	"github.com/pvguard/pvguard/test/cluster"
	"github.com/pvguard/pvguard/test/harness"
	"github.com/pvguard/pvguard/test/populators"
)

// cl is the suite's one cluster; each test switches it between modes with cl.Use.
var cl *cluster.Cluster

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	// pvguard is given its own logger (a file); this silences controller-runtime's root logger.
	ctrllog.SetLogger(logr.Discard())
	var err error
	// PVGUARD_CLUSTER_KCM_ARGS adds flags to kube-controller-manager, e.g.
	// "--kube-api-qps=50 --kube-api-burst=100" to give it the rate the chart gives pvguard.
	// PVGUARD_CLUSTER_UPSTREAM_PVGUARD=shadow runs pvguard's binder in shadow mode beside
	// kube-controller-manager's in the upstream mode (default off).
	opts := cluster.Options{
		ControllerManagerArgs: strings.Fields(os.Getenv("PVGUARD_CLUSTER_KCM_ARGS")),
		UpstreamPVGuardBinder: binder.Mode(os.Getenv("PVGUARD_CLUSTER_UPSTREAM_PVGUARD")),
		CSI:                   true,
		Snapshots:             true,
		// The storage stack these tests run as ServiceAccounts, listed as an installer lists
		// it; the CSI sidecars' namespace and kube-system are listed by the cluster.
		Components: []map[string]string{
			{"serviceAccount": populators.CDINamespace + "/" + populators.CDIServiceAccount},
			{"serviceAccount": populators.VeleroNamespace + "/" + populators.VeleroServiceAccount},
			{"serviceAccount": populators.HelloPopulator().Namespace + "/" + populators.HelloPopulator().ServiceAccount},
			{"namespace": localProvisionerNamespace},
			{"serviceAccount": deployerNamespace + "/" + deployerAccount},
		},
	}
	if cl, err = cluster.Start(opts); err != nil {
		fmt.Fprintln(os.Stderr, "e2ecluster:", err)
		return 1
	}
	harness.FailureNote = cl.Logs
	code := m.Run()
	if err := cl.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "e2ecluster: stopping the cluster:", err)
		code = 1
	}
	if code == 0 && os.Getenv("PVGUARD_CLUSTER_KEEP_LOGS") == "" {
		_ = os.RemoveAll(cl.LogDir)
	} else {
		fmt.Fprintln(os.Stderr, "e2ecluster: logs kept in", cl.LogDir)
	}
	return code
}
