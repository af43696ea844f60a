package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pvguard/pvguard/internal/cli"
	"github.com/pvguard/pvguard/internal/policytest"
)

const policyTest = `apiVersion: pvguard.io/v1alpha1
kind: PolicyTest
fixtures:
  objects:
  - apiVersion: v1
    kind: PersistentVolume
    metadata: {name: pv-1}
    spec: {accessModes: [ReadWriteOnce], capacity: {storage: 1Gi}, hostPath: {path: /pv-1}, volumeMode: Block}
  - apiVersion: v1
    kind: PersistentVolumeClaim
    metadata: {namespace: team-a, name: data, uid: uid-data}
    spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
cases:
- name: mode mismatch
  write:
    operation: UPDATE
    user: alice
    oldFixture: PersistentVolume/pv-1
    patch: {spec: {claimRef: {namespace: team-a, name: data}}}
  expect: {EXPECT}
`

func TestPolicyTestExitCodes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		suite  string
		opts   cli.TestFlags
		code   int // 0: no error
		stdout string
		stderr string
	}{
		{name: "pass", suite: strings.Replace(policyTest, "EXPECT", "denied: [PVG001]", 1),
			stdout: "ok  \t1 suite, 1 case passed"},
		{name: "fail", suite: strings.Replace(policyTest, "EXPECT", "allowed: true", 1), code: cli.ExitFindings,
			stdout: "--- FAIL: s.yaml: mode mismatch: expected allowed, got denied [PVG001]: [PVG001 volume-mode-match]"},
		{name: "unreadable", suite: strings.Replace(policyTest, "EXPECT", "alowed: true", 1), code: cli.ExitBadInput,
			stderr: `pvguard test: s.yaml: document 1: unknown field "cases[0].expect.alowed"`},
		{name: "bad -o", suite: strings.Replace(policyTest, "EXPECT", "allowed: true", 1), opts: cli.TestFlags{Output: "yaml"}, code: cli.ExitBadInput},
		{name: "bad --run", suite: strings.Replace(policyTest, "EXPECT", "allowed: true", 1), opts: cli.TestFlags{Run: "(("}, code: cli.ExitBadInput},
		{name: "--run selects none", suite: strings.Replace(policyTest, "EXPECT", "allowed: true", 1), opts: cli.TestFlags{Run: "nothing"},
			stdout: "ok  \t0 suites, 0 cases passed", stderr: "no case matches --run nothing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "s.yaml"), []byte(tc.suite), 0o600); err != nil {
				t.Fatal(err)
			}
			t.Chdir(dir)
			o := tc.opts
			if o.Output == "" {
				o.Output = "text"
			}
			o.Paths = []string{"s.yaml"}
			var out, errOut bytes.Buffer
			err := cli.RunTest(context.Background(), o, &out, &errOut)
			var exit *cli.ExitError
			switch {
			case tc.code == 0 && err != nil:
				t.Fatalf("error %v; stderr %s", err, errOut.String())
			case tc.code != 0 && (!errors.As(err, &exit) || exit.Code != tc.code):
				t.Fatalf("error %v, want exit code %d", err, tc.code)
			}
			if !strings.Contains(out.String(), tc.stdout) {
				t.Errorf("stdout %q, want %q in it", out.String(), tc.stdout)
			}
			if !strings.Contains(errOut.String(), tc.stderr) {
				t.Errorf("stderr %q, want %q in it", errOut.String(), tc.stderr)
			}
		})
	}
}

func TestPolicyTestJSON(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.yaml")
	if err := os.WriteFile(path, []byte(strings.Replace(policyTest, "EXPECT", "allowed: true", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	err := cli.RunTest(context.Background(), cli.TestFlags{Paths: []string{path}, Output: "json"}, &out, &errOut)
	var exit *cli.ExitError
	if !errors.As(err, &exit) || exit.Code != cli.ExitFindings {
		t.Fatalf("error %v, want exit code %d", err, cli.ExitFindings)
	}
	var rep policytest.JSONReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if rep.OK || rep.Summary.Cases != 1 || rep.Summary.Failed != 1 || len(rep.Suites) != 1 {
		t.Fatalf("report %+v", rep)
	}
	c := rep.Suites[0].Cases[0]
	if c.Passed || c.Kind != "write" || c.Expected != "allowed" || c.Got != "denied [PVG001]" || !strings.HasPrefix(c.Message, "[PVG001 ") {
		t.Errorf("case %+v", c)
	}
}

// TestPolicyTestJSONBadInput: -o json prints its report, with the errors, when there is no suite
// to run, the input cannot be read or --run is bad.
func TestPolicyTestJSONBadInput(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "fixture.yaml"), []byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		o    cli.TestFlags
		want string
	}{
		{name: "no suites", o: cli.TestFlags{Paths: []string{dir}}, want: "no PolicyTest suites in " + dir},
		{name: "no such file", o: cli.TestFlags{Paths: []string{filepath.Join(dir, "nope.yaml")}}, want: "no such file"},
		{name: "bad --run", o: cli.TestFlags{Paths: []string{dir}, Run: "(("}, want: "--run: error parsing regexp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.Output = "json"
			var out, errOut bytes.Buffer
			err := cli.RunTest(context.Background(), tc.o, &out, &errOut)
			var exit *cli.ExitError
			if !errors.As(err, &exit) || exit.Code != cli.ExitBadInput {
				t.Fatalf("error %v, want exit code %d", err, cli.ExitBadInput)
			}
			var rep policytest.JSONReport
			if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
				t.Fatalf("stdout is no JSON report: %v: %q", err, out.String())
			}
			if rep.OK || len(rep.Errors) != 1 || !strings.Contains(rep.Errors[0], tc.want) || rep.Suites == nil {
				t.Errorf("report %+v, want one error with %q", rep, tc.want)
			}
		})
	}
}

// TestPolicyTestCommand runs `pvguard test` through the command tree, the starter suites with -v.
func TestPolicyTestCommand(t *testing.T) {
	root := cli.NewRootCommand()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs([]string{"test", "-v", "--run", "^PVG001", filepath.Join("..", "..", "docs", "examples", "policy-tests")})
	if err := root.Execute(); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "--- PASS: ") || !strings.Contains(out.String(), "ok  \t1 suite, 2 cases passed") {
		t.Errorf("output:\n%s", out.String())
	}
}
