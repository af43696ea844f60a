package cli

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// kubeconfig has two clusters and three contexts: the current one, a, in namespace team-a; b on
// the other cluster in team-b; c on cluster a with no namespace.
const kubeconfig = `apiVersion: v1
kind: Config
current-context: a
clusters:
- name: a
  cluster: {server: "https://a.example:6443"}
- name: b
  cluster: {server: "https://b.example:6443"}
users:
- name: alice
  user: {token: alice-token}
- name: bob
  user: {token: bob-token}
contexts:
- name: a
  context: {cluster: a, user: alice, namespace: team-a}
- name: b
  context: {cluster: b, user: bob, namespace: team-b}
- name: c
  context: {cluster: a, user: alice}
`

// TestExplainClaimFlags parses `explain pvc` arguments with the command's own flags and resolves
// them as the command does, without reading anything: the claim, and the cluster and identity a
// live read would use, or the bad-input error (exit 2) naming what is wrong.
func TestExplainClaimFlags(t *testing.T) {
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kc, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	// Without --kubeconfig the default loading rules read $KUBECONFIG, as kubectl does; HOME
	// points at an empty directory, so ~/.kube/config is never the developer's own.
	t.Setenv("KUBECONFIG", kc)
	t.Setenv("HOME", t.TempDir())

	for _, tc := range []struct {
		name    string
		args    []string
		env     string // $KUBECONFIG, when not kc
		ns      string // the claim's namespace, name "data"
		host    string // "" for offline
		token   string
		wantErr string // part of the bad-input error
	}{
		{name: "context namespace", args: []string{"data"}, ns: "team-a", host: "https://a.example:6443", token: "alice-token"},
		{name: "-n", args: []string{"-n", "team-x", "data"}, ns: "team-x", host: "https://a.example:6443", token: "alice-token"},
		{name: "--namespace=", args: []string{"--namespace=team-x", "data"}, ns: "team-x", host: "https://a.example:6443", token: "alice-token"},
		{name: "NS/NAME", args: []string{"team-c/data"}, ns: "team-c", host: "https://a.example:6443", token: "alice-token"},
		{name: "NS/NAME and the same -n", args: []string{"team-c/data", "-n", "team-c"}, ns: "team-c", host: "https://a.example:6443", token: "alice-token"},
		{name: "NS/NAME and another -n", args: []string{"team-c/data", "-n", "team-x"}, wantErr: `"team-c/data" names namespace team-c, but -n says team-x`},
		{name: "--context", args: []string{"--context", "b", "data"}, ns: "team-b", host: "https://b.example:6443", token: "bob-token"},
		{name: "--context and -n", args: []string{"--context=b", "-n", "team-a", "data"}, ns: "team-a", host: "https://b.example:6443", token: "bob-token"},
		{name: "context without namespace", args: []string{"--context", "c", "data"}, ns: "default", host: "https://a.example:6443", token: "alice-token"},
		{name: "--kubeconfig", args: []string{"--kubeconfig", kc, "--context", "b", "data"}, env: filepath.Join(dir, "none"), ns: "team-b", host: "https://b.example:6443", token: "bob-token"},
		{name: "--cluster", args: []string{"--cluster", "b", "data"}, ns: "team-a", host: "https://b.example:6443", token: "alice-token"},
		{name: "--user", args: []string{"--user", "bob", "data"}, ns: "team-a", host: "https://a.example:6443", token: "bob-token"},
		{name: "-s and --token", args: []string{"-s", "https://c.example:6443", "--token", "t", "data"}, ns: "team-a", host: "https://c.example:6443", token: "t"},
		{name: "unknown context", args: []string{"--context", "nope", "team-a/data"}, wantErr: `context "nope" does not exist`},
		{name: "unknown context, context namespace", args: []string{"--context", "nope", "data"}, wantErr: `nope`},
		{name: "missing --kubeconfig", args: []string{"--kubeconfig", filepath.Join(dir, "none"), "team-a/data"}, wantErr: filepath.Join(dir, "none")},
		{name: "offline NS/NAME", args: []string{"-f", "x.yaml", "team-a/data"}, ns: "team-a"},
		{name: "offline -n", args: []string{"-f", "x.yaml", "-n", "team-a", "data"}, ns: "team-a"},
		{name: "offline without namespace", args: []string{"-f", "x.yaml", "data"}, wantErr: `"data": give its namespace (NAMESPACE/NAME or -n NAMESPACE)`},
		{name: "offline and --context", args: []string{"-f", "x.yaml", "--context", "b", "team-a/data"}, wantErr: "give either manifests with -f or a cluster with --context, not both"},
		{name: "offline and --kubeconfig, -s", args: []string{"-f", "x.yaml", "--kubeconfig", kc, "-s", "https://c.example", "team-a/data"}, wantErr: "with --kubeconfig, --server, not both"},
		{name: "empty namespace", args: []string{"/data"}, wantErr: `"/data": want NAME or NAMESPACE/NAME`},
		{name: "empty name", args: []string{"team-a/"}, wantErr: `"team-a/": want NAME or NAMESPACE/NAME`},
		{name: "two slashes", args: []string{"team-a/data/x"}, wantErr: `"team-a/data/x": want NAME or NAMESPACE/NAME`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv("KUBECONFIG", tc.env)
			}
			var o ExplainFlags
			f := pflag.NewFlagSet("pvc", pflag.ContinueOnError)
			given := bindExplainFlags(f, &o)
			if err := f.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			o.ConnectionFlags = given()
			if f.NArg() != 1 {
				t.Fatalf("args %q", f.Args())
			}
			ns, name, rc, err := o.claimRequest(f.Arg(0))
			if tc.wantErr != "" {
				var exit *ExitError
				if !errors.As(err, &exit) || exit.Code != ExitBadInput || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want exit %d with %q", err, ExitBadInput, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ns != tc.ns || name != "data" {
				t.Errorf("claim %s/%s, want %s/data", ns, name, tc.ns)
			}
			switch {
			case tc.host == "" && rc != nil:
				t.Errorf("offline, but would read %s", rc.Host)
			case tc.host != "" && rc == nil:
				t.Errorf("would read manifests, want %s", tc.host)
			case rc != nil && (rc.Host != tc.host || rc.BearerToken != tc.token):
				t.Errorf("would read %s with token %q, want %s with %q", rc.Host, rc.BearerToken, tc.host, tc.token)
			}
		})
	}
}

// TestExplainVolumeFlags: `explain pv` takes the same connection flags; -n is ignored, as kubectl
// ignores it for volumes, but still allowed with -f.
func TestExplainVolumeFlags(t *testing.T) {
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		args    []string
		host    string
		wantErr string
	}{
		{name: "--context, -n ignored", args: []string{"--kubeconfig", kc, "--context", "b", "-n", "team-x"}, host: "https://b.example:6443"},
		{name: "-s, insecure", args: []string{"--kubeconfig", kc, "--insecure-skip-tls-verify", "-s", "https://c.example"}, host: "https://c.example"},
		{name: "offline -n", args: []string{"-f", "x.yaml", "-n", "team-x"}},
		{name: "offline and --user", args: []string{"-f", "x.yaml", "--user", "bob"}, wantErr: "give either manifests with -f or a cluster with --user, not both"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var o ExplainFlags
			f := pflag.NewFlagSet("pv", pflag.ContinueOnError)
			given := bindExplainFlags(f, &o)
			if err := f.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			o.ConnectionFlags = given()
			cc, err := o.cluster()
			if tc.wantErr != "" {
				var exit *ExitError
				if !errors.As(err, &exit) || exit.Code != ExitBadInput || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want exit %d with %q", err, ExitBadInput, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			rc, err := restConfig(cc)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case (rc != nil) != (tc.host != ""):
				t.Errorf("reads a cluster: %v, want %v", rc != nil, tc.host != "")
			case rc != nil && rc.Host != tc.host:
				t.Errorf("would read %s, want %s", rc.Host, tc.host)
			case rc != nil && rc.Insecure != slices.Contains(tc.args, "--insecure-skip-tls-verify"):
				t.Errorf("insecure %v with %q", rc.Insecure, tc.args)
			}
		})
	}
}

// TestIsPlugin: the binary is the kubectl plugin exactly when run by kubectl-pvguard's name.
func TestIsPlugin(t *testing.T) {
	for argv0, want := range map[string]bool{
		"kubectl-pvguard":                    true,
		"/usr/local/bin/kubectl-pvguard":     true,
		"./bin/kubectl-pvguard":              true,
		"kubectl-pvguard.exe":                true,
		"kubectl-pvguard.EXE":                true,
		"pvguard":                            false,
		"/usr/local/bin/pvguard":             false,
		"kubectl-pvguard-explain":            false,
		"kubectl-pvguard.sh":                 false,
		"/home/kubectl-pvguard/bin/pvguard":  false,
		"kubectl-pvguard.test":               false,
		"kubectl_pvguard":                    false,
		"/tmp/go-build1/b001/exe/kubectl-pv": false,
	} {
		if got := IsPlugin(argv0); got != want {
			t.Errorf("IsPlugin(%q) = %v, want %v", argv0, got, want)
		}
	}
}
