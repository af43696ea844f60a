package e2eplugin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/explain"
	"github.com/pvguard/pvguard/internal/devcluster"
	"github.com/pvguard/pvguard/test/testobj"
)

// suite is what TestMain sets up once: the control plane, the real kubectl, and a directory
// holding the freshly built plugin (the only directory on the commands' PATH).
var suite struct {
	cfg        *rest.Config
	kubeconfig []byte // the control plane's admin kubeconfig
	kubectl    string
	pluginDir  string
}

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "e2eplugin:", err)
		return 1
	}
	assets, err := devcluster.AssetsDir()
	if err != nil {
		return fail(err)
	}
	suite.kubectl = filepath.Join(assets, "kubectl")
	if _, err := os.Stat(suite.kubectl); err != nil {
		return fail(fmt.Errorf("no kubectl in %s: run `make tools` (hack/build-tools.sh builds it from the pinned Kubernetes release): %w", assets, err))
	}
	dir, err := os.MkdirTemp("", "e2eplugin-")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(dir)
	// The plugin is the pvguard binary under the plugin's name, built as `make build` builds it.
	suite.pluginDir = filepath.Join(dir, "bin")
	build := exec.Command("go", "build", "-o", filepath.Join(suite.pluginDir, "kubectl-pvguard"), "github.com/pvguard/pvguard/cmd/pvguard")
	if out, err := build.CombinedOutput(); err != nil {
		return fail(fmt.Errorf("building kubectl-pvguard: %w\n%s", err, out))
	}
	if err := os.Symlink("kubectl-pvguard", filepath.Join(suite.pluginDir, "pvguard")); err != nil {
		return fail(err)
	}
	cp, err := devcluster.Start(assets)
	if err != nil {
		return fail(err)
	}
	defer func() {
		if err := cp.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "e2eplugin: stopping the control plane:", err)
		}
	}()
	suite.cfg, suite.kubeconfig = cp.Config, cp.KubeConfig
	return m.Run()
}

// writeKubeconfig writes the control plane's kubeconfig with three contexts, as a user's
// kubeconfig has them: team-b (the current one) and team-a, each with its namespace, on the
// test cluster; and nowhere, on a server that refuses connections.
func writeKubeconfig(t *testing.T) string {
	t.Helper()
	kc, err := clientcmd.Load(suite.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	admin, ok := kc.Contexts[kc.CurrentContext]
	if !ok {
		t.Fatalf("the control plane's kubeconfig has no context %q", kc.CurrentContext)
	}
	kc.Clusters["nowhere"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1", InsecureSkipTLSVerify: true}
	kc.Contexts = map[string]*clientcmdapi.Context{
		"team-a":  {Cluster: admin.Cluster, AuthInfo: admin.AuthInfo, Namespace: "team-a"},
		"team-b":  {Cluster: admin.Cluster, AuthInfo: admin.AuthInfo, Namespace: "team-b"},
		"nowhere": {Cluster: "nowhere", AuthInfo: admin.AuthInfo, Namespace: "team-a"},
	}
	kc.CurrentContext = "team-b"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// seed creates a class without a provisioner, two Available Filesystem volumes of it, pv-fs
// (10Gi) and pv-small (1Gi), and a Pending claim of that class in team-a and in team-b:
// team-b's asks for 1Gi and fits both (the binder's plan gives it pv-small, the smaller);
// team-a's asks for 5Gi of Block, so pv-fs fails exactly its volumeMode check.
func seed(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	c, err := client.New(suite.cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	create := func(obj client.Object) {
		t.Helper()
		if err := c.Create(ctx, obj); err != nil {
			t.Fatalf("creating %s: %v", obj.GetName(), err)
		}
	}
	for _, ns := range []string{"team-a", "team-b"} {
		create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	create(testobj.StorageClass("manual", "kubernetes.io/no-provisioner"))
	// No controller runs here: the phases the PersistentVolume controller would set are set
	// by hand, as it sets them.
	for name, size := range map[string]string{"pv-fs": "10Gi", "pv-small": "1Gi"} {
		pv := testobj.PV(name, testobj.Class("manual"), testobj.Capacity(size), testobj.VolumeMode(corev1.PersistentVolumeFilesystem))
		create(pv)
		pv.Status.Phase = corev1.VolumeAvailable
		if err := c.Status().Update(ctx, pv); err != nil {
			t.Fatal(err)
		}
	}
	for _, pvc := range []*corev1.PersistentVolumeClaim{
		testobj.PVC("team-a", "data", testobj.ClaimClass("manual"), testobj.Request("5Gi"), testobj.ClaimVolumeMode(corev1.PersistentVolumeBlock)),
		testobj.PVC("team-b", "data", testobj.ClaimClass("manual"), testobj.Request("1Gi"), testobj.ClaimVolumeMode(corev1.PersistentVolumeFilesystem)),
	} {
		pvc.UID = ""
		create(pvc)
		pvc.Status.Phase = corev1.ClaimPending
		if err := c.Status().Update(ctx, pvc); err != nil {
			t.Fatal(err)
		}
	}
}

// result is what a command printed and its exit code.
type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// runIn runs a program with only env as its environment: PATH is the plugin's directory, so
// kubectl finds exactly the plugin under test, and HOME an empty directory, so neither a
// ~/.kube/config nor a kuberc of the machine's user takes part.
func runIn(t *testing.T, env []string, program string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, program, args...)
	cmd.Env = append([]string{"PATH=" + suite.pluginDir, "HOME=" + t.TempDir()}, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	case err != nil:
		t.Fatalf("%s %q: %v", program, args, err)
	}
	t.Logf("%s %s: %s", filepath.Base(program), strings.Join(args, " "), r)
	return r
}

// row is the line of the candidate table for volume, "" if there is none.
func row(out, volume string) string {
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == volume {
			return l
		}
	}
	return ""
}

// seeded says seed ran: the tests share its objects.
var seeded bool

func seedOnce(t *testing.T) {
	t.Helper()
	if !seeded {
		seed(t)
		seeded = true
	}
}

func TestKubectlPlugin(t *testing.T) {
	seedOnce(t)
	kc := writeKubeconfig(t)
	env := []string{"KUBECONFIG=" + kc}
	kubectl := func(args ...string) result { t.Helper(); return runIn(t, env, suite.kubectl, args...) }

	// wantTeamA checks the explanation of team-a/data: Pending, and pv-fs failing exactly its
	// volumeMode check.
	wantTeamA := func(t *testing.T, r result) {
		t.Helper()
		if r.code != 0 {
			t.Fatalf("%s", r)
		}
		if !strings.HasPrefix(r.stdout, "PersistentVolumeClaim team-a/data: Pending\n") {
			t.Errorf("not team-a/data's explanation:\n%s", r.stdout)
		}
		if l := row(r.stdout, "pv-fs"); !strings.Contains(l, "Filesystem != Block") {
			t.Errorf("pv-fs's row %q, want it to fail on Filesystem != Block:\n%s", l, r.stdout)
		}
		if !strings.Contains(r.stdout, "Verdict: no volume fits; pv-fs fits if") {
			t.Errorf("the verdict does not name pv-fs:\n%s", r.stdout)
		}
	}

	t.Run("plugin list", func(t *testing.T) {
		r := kubectl("plugin", "list")
		if want := filepath.Join(suite.pluginDir, "kubectl-pvguard"); r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Fatalf("kubectl plugin list does not list %s: %s", want, r)
		}
	})
	// The current context's namespace is team-b: -n must win over it.
	t.Run("-n NAMESPACE NAME", func(t *testing.T) { wantTeamA(t, kubectl("pvguard", "explain", "pvc", "-n", "team-a", "data")) })
	t.Run("NAMESPACE/NAME", func(t *testing.T) { wantTeamA(t, kubectl("pvguard", "explain", "pvc", "team-a/data")) })
	t.Run("--namespace= after NAME", func(t *testing.T) { wantTeamA(t, kubectl("pvguard", "explain", "pvc", "data", "--namespace=team-a")) })
	t.Run("--context", func(t *testing.T) { wantTeamA(t, kubectl("pvguard", "explain", "pvc", "--context", "team-a", "data")) })
	t.Run("--kubeconfig", func(t *testing.T) {
		wantTeamA(t, runIn(t, nil, suite.kubectl, "pvguard", "explain", "pvc", "--kubeconfig", kc, "team-a/data"))
	})
	// pvguard itself takes the same flags, and documented `--kubeconfig` keeps working.
	t.Run("pvguard --kubeconfig", func(t *testing.T) {
		wantTeamA(t, runIn(t, nil, filepath.Join(suite.pluginDir, "pvguard"), "explain", "pvc", "team-a/data", "--kubeconfig", kc))
	})

	// Run by its own name, the binary is pvguard, not the plugin; run by kubectl, it says
	// `kubectl pvguard` (below).
	t.Run("pvguard error", func(t *testing.T) {
		r := runIn(t, nil, filepath.Join(suite.pluginDir, "pvguard"), "explain", "pvc", "team-a/nope", "--kubeconfig", kc)
		if r.code != 2 || !strings.HasPrefix(r.stderr, "pvguard: no such PersistentVolumeClaim team-a/nope") {
			t.Fatalf("want exit 2 and the error as pvguard's: %s", r)
		}
	})

	t.Run("context namespace", func(t *testing.T) {
		r := kubectl("pvguard", "explain", "pvc", "data")
		if r.code != 0 || !strings.HasPrefix(r.stdout, "PersistentVolumeClaim team-b/data: Pending\n") {
			t.Fatalf("want team-b/data, the current context's namespace: %s", r)
		}
		if !strings.Contains(r.stdout, "Verdict: the binder takes pv-small") {
			t.Errorf("the verdict does not give team-b/data pv-small:\n%s", r.stdout)
		}
	})

	// --context switches the cluster too: nowhere's server refuses connections.
	t.Run("--context elsewhere", func(t *testing.T) {
		r := kubectl("pvguard", "explain", "pvc", "--context", "nowhere", "data")
		if r.code == 0 || !strings.Contains(r.stderr, "127.0.0.1:1") {
			t.Fatalf("want a failure to reach 127.0.0.1:1: %s", r)
		}
	})

	t.Run("-o json", func(t *testing.T) {
		r := kubectl("pvguard", "explain", "pvc", "-n", "team-a", "data", "-o", "json")
		if r.code != 0 {
			t.Fatalf("%s", r)
		}
		var e explain.Explanation
		if err := json.Unmarshal([]byte(r.stdout), &e); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, r.stdout)
		}
		if e.Claim != "team-a/data" || e.Phase != "Pending" || e.Class != "manual" || e.Verdict.Volume.String() != "" || e.Verdict.Closest.String() != "pv-fs" {
			t.Errorf("explanation %+v", e)
		}
		if len(e.Candidates) != 2 || e.Candidates[0].Volume != "pv-fs" || e.Candidates[1].TakenBy.String() != "team-b/data" {
			t.Fatalf("candidates %+v, want pv-fs, then pv-small taken by team-b/data", e.Candidates)
		}
		failed := e.Candidates[0].Failed()
		if len(failed) != 1 || failed[0].Check != explain.CheckVolumeMode || failed[0].Value.String() != "Filesystem != Block" {
			t.Errorf("pv-fs failed %+v, want volumeMode alone with Filesystem != Block", failed)
		}
	})

	t.Run("pv", func(t *testing.T) {
		r := kubectl("pvguard", "explain", "pv", "pv-fs")
		if r.code != 0 || !strings.HasPrefix(r.stdout, "PersistentVolume pv-fs: Available") {
			t.Fatalf("%s", r)
		}
	})

	// kubectl passes on the plugin's exit code: 2 for bad input, with the error naming it.
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"unknown claim":          {[]string{"pvguard", "explain", "pvc", "nope"}, "kubectl pvguard: no such PersistentVolumeClaim team-b/nope"},
		"unknown claim, -n":      {[]string{"pvguard", "explain", "pvc", "-n", "team-a", "nope"}, "no such PersistentVolumeClaim team-a/nope"},
		"unknown volume":         {[]string{"pvguard", "explain", "pv", "pv-nope"}, "no such PersistentVolume pv-nope"},
		"-n contradicts":         {[]string{"pvguard", "explain", "pvc", "-n", "team-b", "team-a/data"}, `"team-a/data" names namespace team-a, but -n says team-b`},
		"unknown context":        {[]string{"pvguard", "explain", "pvc", "--context", "team-c", "data"}, "context was not found for specified context: team-c"},
		"-f and --context":       {[]string{"pvguard", "explain", "pvc", "-f", kc, "--context", "team-a", "data"}, "give either manifests with -f or a cluster with --context, not both"},
		"claim with two slashes": {[]string{"pvguard", "explain", "pvc", "team-a/data/x"}, `"team-a/data/x": want NAME or NAMESPACE/NAME`},
	} {
		t.Run(name, func(t *testing.T) {
			r := kubectl(tc.args...)
			if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
				t.Fatalf("want exit 2 and %q: %s", tc.want, r)
			}
		})
	}
}
