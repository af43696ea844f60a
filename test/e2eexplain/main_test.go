package e2eexplain

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/pvguard/pvguard/internal/devcluster"
	"github.com/pvguard/pvguard/test/cluster"
	"github.com/pvguard/pvguard/test/harness"
)

// Timings of the suite's pvguard (chart values): a claim gets NoVolumeFits after noVolumeFitsAfter,
// at the first plan after that; plans run at least every resync.
const (
	noVolumeFitsAfter = 2 * time.Second
	resync            = time.Second
)

// env is what the reasons' test shares: one cluster (its start is most of the suite's time) and
// the freshly built pvguard binary, also on PATH as the kubectl plugin.
type env struct {
	cl         *cluster.Cluster
	binDir     string // pvguard and kubectl-pvguard, the only directory on the commands' PATH
	pvguard    string
	kubectl    string
	kubeconfig string // the cluster admin's
}

// shared starts env once, on first use: a test of this package that needs no cluster does not
// pay for one.
var shared struct {
	once sync.Once
	env  *env
	err  error
	dir  string
}

func TestMain(m *testing.M) {
	// pvguard is given its own logger (a file); this silences controller-runtime's root logger.
	ctrllog.SetLogger(logr.Discard())
	code := m.Run()
	if e := shared.env; e != nil {
		if err := e.cl.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "e2eexplain: stopping the cluster:", err)
			code = 1
		}
		if code == 0 && os.Getenv("PVGUARD_CLUSTER_KEEP_LOGS") == "" {
			_ = os.RemoveAll(e.cl.LogDir)
		} else {
			fmt.Fprintln(os.Stderr, "e2eexplain: logs kept in", e.cl.LogDir)
		}
	}
	if shared.dir != "" {
		_ = os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}

// suite returns the shared env, starting it on the first call.
func suite(t *testing.T) *env {
	t.Helper()
	shared.once.Do(func() { shared.env, shared.err = start() })
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.env
}

// start builds pvguard while the cluster starts, then runs the cluster in ModePVGuard with short
// NoVolumeFits timings and volume-grab (PVG010) set to deny, the policy the "policy" case needs.
// The test's administrator (system:masters) is exempt from it: PVG010 refuses the write that
// leaves a free volume named by a claim it does not grant, the volume's creation too, and the
// cases that name a volume create it after the claim; pvguard's binder is not exempt, and meets
// the denial when it binds.
func start() (*env, error) {
	assets, err := devcluster.AssetsDir()
	if err != nil {
		return nil, err
	}
	e := &env{kubectl: filepath.Join(assets, "kubectl")}
	if _, err := os.Stat(e.kubectl); err != nil {
		return nil, fmt.Errorf("no kubectl in %s: run `make tools`: %w", assets, err)
	}
	if shared.dir, err = os.MkdirTemp("", "e2eexplain-"); err != nil {
		return nil, err
	}
	e.binDir = filepath.Join(shared.dir, "bin")
	e.pvguard = filepath.Join(e.binDir, "pvguard")
	built := make(chan error, 1)
	go func() {
		// The binary as `make build` builds it, and the plugin as the symlink it makes.
		out, err := exec.Command("go", "build", "-o", e.pvguard, "github.com/pvguard/pvguard/cmd/pvguard").CombinedOutput()
		if err != nil {
			built <- fmt.Errorf("building pvguard: %w\n%s", err, out)
			return
		}
		built <- os.Symlink("pvguard", filepath.Join(e.binDir, "kubectl-pvguard"))
	}()
	e.cl, err = cluster.Start(cluster.Options{ChartValues: func(v map[string]any) {
		b := v["binder"].(map[string]any)
		b["noVolumeFitsAfter"], b["resync"] = noVolumeFitsAfter.String(), resync.String()
		v["policy"] = map[string]any{"rules": map[string]any{"volume-grab": map[string]any{
			"action": "deny", "exemptions": map[string]any{"groups": []any{"system:masters"}},
		}}}
	}})
	if err == nil {
		err = e.cl.Use(cluster.ModePVGuard)
		if err != nil {
			err = fmt.Errorf("%w (%s)", err, e.cl.Logs())
		}
	}
	if err = errors.Join(err, <-built); err != nil {
		if e.cl != nil {
			err = errors.Join(err, e.cl.Stop())
		}
		return nil, err
	}
	e.kubeconfig = e.cl.AdminKubeconfig()
	harness.FailureNote = e.cl.Logs
	return e, nil
}
