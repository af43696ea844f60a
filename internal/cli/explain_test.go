package cli_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pvguard/pvguard/charts"
	"github.com/pvguard/pvguard/explain"
	"github.com/pvguard/pvguard/internal/cli"
)

const example = "../../docs/examples/explain.yaml"

func TestExplainClaimOffline(t *testing.T) {
	var out, errOut bytes.Buffer
	if err := cli.RunExplainClaim(cli.ExplainFlags{Files: []string{example}, Output: "table"}, "team-a/data", &out, &errOut); err != nil {
		t.Fatalf("%v (%s)", err, errOut.String())
	}
	for _, want := range []string{"external provisioner csi.example.com", "Filesystem != Block", "50Gi < 100Gi",
		"pre-bound to team-b/logs", "(slow: 2)", "pv-7 fits if the claim asks for at most 50Gi"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestExplainClaimJSON(t *testing.T) {
	var out bytes.Buffer
	if err := cli.RunExplainClaim(cli.ExplainFlags{Files: []string{example}, Output: "json"}, "team-a/data", &out, &out); err != nil {
		t.Fatal(err)
	}
	var e explain.Explanation
	if err := json.Unmarshal(out.Bytes(), &e); err != nil {
		t.Fatal(err)
	}
	if e.Claim != "team-a/data" || e.WaitingFor != explain.WaitingForProvisioner || e.Verdict.Closest.String() != "pv-7" || len(e.Candidates) != 5 {
		t.Fatalf("explanation %+v", e)
	}
}

func TestExplainClaimBadInput(t *testing.T) {
	for name, ref := range map[string]string{"unknown claim": "team-a/nope", "no namespace": "data"} {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			err := cli.RunExplainClaim(cli.ExplainFlags{Files: []string{example}, Output: "table"}, ref, &out, &out)
			if exitCode(err) != cli.ExitBadInput || !strings.Contains(err.Error(), ref) {
				t.Fatalf("error %v (exit %d), want exit %d naming %s", err, exitCode(err), cli.ExitBadInput, ref)
			}
		})
	}
}

// TestExplainDocsShowRealOutput keeps docs/explain.md's example the command's real output.
func TestExplainDocsShowRealOutput(t *testing.T) {
	var out bytes.Buffer
	if err := cli.RunExplainClaim(cli.ExplainFlags{Files: []string{example}, Output: "table"}, "team-a/data", &out, &out); err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile("../../docs/explain.md")
	if err != nil {
		t.Fatal(err)
	}
	if want := "$ pvguard explain pvc team-a/data -f docs/examples/explain.yaml\n" + out.String() + "```"; !strings.Contains(string(page), want) {
		t.Errorf("docs/explain.md does not show the output:\n%s", want)
	}
}

// TestExplainVolumeDocsShowRealOutput keeps docs/explain.md's volume example the command's real
// output (at a fixed time: the finding says how long the volume has been Released).
func TestExplainVolumeDocsShowRealOutput(t *testing.T) {
	var out bytes.Buffer
	now := time.Date(2026, 11, 24, 6, 0, 0, 0, time.UTC)
	if err := cli.RunExplainVolume(cli.ExplainFlags{Files: []string{example}, Output: "table"}, "pv-old", now, &out, &out); err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile("../../docs/explain.md")
	if err != nil {
		t.Fatal(err)
	}
	if want := "$ pvguard explain pv pv-old -f docs/examples/explain.yaml\n" + out.String() + "```"; !strings.Contains(string(page), want) {
		t.Errorf("docs/explain.md does not show the output:\n%s", want)
	}
	err = cli.RunExplainVolume(cli.ExplainFlags{Files: []string{example}, Output: "table"}, "pv-nope", now, &out, &out)
	if exitCode(err) != cli.ExitBadInput || !strings.Contains(err.Error(), "pv-nope") {
		t.Fatalf("error %v, want exit %d naming pv-nope", err, cli.ExitBadInput)
	}
}

// TestExplainCommandAsPlugin runs the command tree as the binary builds it under each name: the
// plugin's help says `kubectl pvguard`, and its flags and exit codes are pvguard's.
func TestExplainCommandAsPlugin(t *testing.T) {
	for argv0, display := range map[string]string{"/usr/local/bin/kubectl-pvguard": "kubectl pvguard", "bin/pvguard": "pvguard"} {
		t.Run(display, func(t *testing.T) {
			root := cli.NewRootCommandFor(argv0)
			var out bytes.Buffer
			root.SetOut(&out)
			root.SetArgs([]string{"explain", "pvc", "--help"})
			if err := root.Execute(); err != nil {
				t.Fatal(err)
			}
			if want := "\n  " + display + " explain pvc [NAMESPACE/]NAME [flags]\n"; !strings.Contains(out.String(), want) {
				t.Errorf("help lacks %q:\n%s", want, out.String())
			}
			for _, flag := range []string{"-n, --namespace", "--context", "--kubeconfig", "-s, --server", "--cluster", "--user", "--token"} {
				if !strings.Contains(out.String(), flag) {
					t.Errorf("help lacks %s", flag)
				}
			}

			root = cli.NewRootCommandFor(argv0)
			out.Reset()
			root.SetOut(&out)
			root.SetArgs([]string{"explain", "pvc", "-n", "team-a", "data", "-f", example, "-o", "json"})
			if err := root.Execute(); err != nil {
				t.Fatal(err)
			}
			var e explain.Explanation
			if err := json.Unmarshal(out.Bytes(), &e); err != nil || e.Claim != "team-a/data" {
				t.Fatalf("explanation %+v (%v)", e, err)
			}

			root = cli.NewRootCommandFor(argv0)
			root.SetArgs([]string{"explain", "pvc", "-n", "team-b", "team-a/data", "-f", example})
			if err := root.Execute(); exitCode(err) != cli.ExitBadInput || !strings.Contains(err.Error(), "-n says team-b") {
				t.Fatalf("error %v (exit %d), want exit %d", err, exitCode(err), cli.ExitBadInput)
			}
		})
	}
}

// TestExplainJudgesPairsByThePolicyConfig: the POLICY column judges a fitting pair under
// --config as the binder of --binder-identity would write it (default: pvguard's, as the chart
// installs it); a config that cannot be read is bad input.
func TestExplainJudgesPairsByThePolicyConfig(t *testing.T) {
	dir := t.TempDir()
	manifest := filepath.Join(dir, "pair.yaml")
	config := filepath.Join(dir, "policy.yaml")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(manifest, []byte(`apiVersion: v1
kind: PersistentVolumeClaim
metadata: {namespace: team-a, name: data}
spec: {storageClassName: manual, accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-1}
spec: {storageClassName: manual, accessModes: [ReadWriteOnce], capacity: {storage: 1Gi}, hostPath: {path: /data}}
status: {phase: Available}
`), 0o600))
	must(os.WriteFile(config, []byte("rules:\n  binder-annotations: {action: deny}\n"), 0o600))
	for name, tc := range map[string]struct {
		o      cli.ExplainFlags
		policy string // "" for a pass
	}{
		"default config":                    {o: cli.ExplainFlags{}},
		"--config, pvguard's binder":        {o: cli.ExplainFlags{ConfigFile: config}, policy: "PVG013: " + cli.DefaultBinderIdentity + " added annotation"},
		"--config, upstream's binder":       {o: cli.ExplainFlags{ConfigFile: config, BinderIdentity: "system:serviceaccount:kube-system:persistent-volume-binder"}},
		"--config, another service account": {o: cli.ExplainFlags{ConfigFile: config, BinderIdentity: "system:serviceaccount:ops:binder"}, policy: "PVG013: system:serviceaccount:ops:binder"},
	} {
		t.Run(name, func(t *testing.T) {
			o := tc.o
			o.Files, o.Output = []string{manifest}, "json"
			var out, errOut bytes.Buffer
			if err := cli.RunExplainClaim(o, "team-a/data", &out, &errOut); err != nil {
				t.Fatalf("%v (%s)", err, errOut.String())
			}
			var e explain.Explanation
			must(json.Unmarshal(out.Bytes(), &e))
			var got explain.Result
			for _, r := range e.Candidates[0].Checks {
				if r.Check == explain.CheckPolicy {
					got = r
				}
			}
			if got.Pass != (tc.policy == "") || !strings.HasPrefix(got.Value.String(), tc.policy) {
				t.Fatalf("POLICY %+v, want %q", got, tc.policy)
			}
			if wantTaken := tc.policy == ""; (e.Verdict.Volume.String() == "pv-1") != wantTaken {
				t.Errorf("verdict %+v: the binder takes pv-1 only when policy allows it", e.Verdict)
			}
		})
	}
	var out bytes.Buffer
	err := cli.RunExplainClaim(cli.ExplainFlags{Files: []string{manifest}, Output: "table", ConfigFile: filepath.Join(dir, "nope.yaml")}, "team-a/data", &out, &out)
	if exitCode(err) != cli.ExitBadInput || !strings.Contains(err.Error(), "nope.yaml") {
		t.Errorf("a missing --config: %v (exit %d), want exit %d naming it", err, exitCode(err), cli.ExitBadInput)
	}
	err = cli.RunExplainClaim(cli.ExplainFlags{Files: []string{manifest}, Output: "table", BinderIdentity: "system:serviceaccount:ops"}, "team-a/data", &out, &out)
	if exitCode(err) != cli.ExitBadInput || !strings.Contains(err.Error(), "--binder-identity") {
		t.Errorf("a malformed --binder-identity: %v (exit %d), want exit %d naming the flag", err, exitCode(err), cli.ExitBadInput)
	}
}

// TestDefaultBinderIdentityIsTheCharts: the default --binder-identity is the ServiceAccount the
// chart creates for the release the README installs (pvguard, in pvguard-system).
func TestDefaultBinderIdentityIsTheCharts(t *testing.T) {
	manifests, err := charts.Render("pvguard", "pvguard-system", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range manifests {
		if m.Object.GetKind() == "ServiceAccount" {
			if got := "system:serviceaccount:" + m.Object.GetNamespace() + ":" + m.Object.GetName(); got != cli.DefaultBinderIdentity {
				t.Fatalf("the chart's ServiceAccount is %s, DefaultBinderIdentity %s", got, cli.DefaultBinderIdentity)
			}
			return
		}
	}
	t.Fatal("the chart renders no ServiceAccount")
}
