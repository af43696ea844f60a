package e2eplugin

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/pvguard/pvguard/certs"
	"github.com/pvguard/pvguard/explain"
	"github.com/pvguard/pvguard/test/harness"
)

// startServe runs the plugin's own binary as `pvguard serve` against the control plane (binder
// off, self-signed), and returns its address and the file of its CA once it is ready.
func startServe(t *testing.T) (base, caFile string) {
	t.Helper()
	dir := t.TempDir()
	kc := filepath.Join(dir, "admin.kubeconfig")
	if err := os.WriteFile(kc, suite.kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	certDir := filepath.Join(dir, "certs")
	logPath := filepath.Join(dir, "serve.log")
	log, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(suite.pluginDir, "pvguard"), "serve", "--kubeconfig", kc, "--leader-elect=false",
		"--self-signed", "--cert-dir", certDir, "--listen", fmt.Sprintf("127.0.0.1:%d", port),
		"--shutdown-delay", "0s", "--shutdown-timeout", "5s")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); _ = log.Close(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
		}
		if t.Failed() {
			if b, err := os.ReadFile(logPath); err == nil {
				t.Logf("pvguard serve's log:\n%s", b)
			}
		}
	})
	base = fmt.Sprintf("https://127.0.0.1:%d", port)
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // readiness probe of a local self-signed child
	deadline := time.Now().Add(2 * time.Minute)
	for {
		select {
		case <-exited:
			t.Fatalf("pvguard serve exited before it was ready")
		default:
		}
		if resp, err := hc.Get(base + "/readyz"); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base, filepath.Join(certDir, certs.CAFile)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("pvguard serve not ready within 2 minutes")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// readerKubeconfig writes a kubeconfig whose user is a ServiceAccount (a bearer token, which
// the pvguard server accepts) that may read what an explanation reads, with two contexts:
// reader (current) on the control plane, in namespace team-a, and nowhere, on a server that
// refuses connections, with the same user.
func readerKubeconfig(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(suite.cfg)
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "plugin-reader"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"persistentvolumes", "persistentvolumeclaims", "nodes", "pods", "events"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{"storage.k8s.io"}, Resources: []string{"storageclasses"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "list"}},
	}}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "plugin-reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "plugin-reader", Name: "reader"}}}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	token, err := harness.ServiceAccountToken(ctx, cs, "plugin-reader", "reader")
	if err != nil {
		t.Fatal(err)
	}
	admin, err := clientcmd.Load(suite.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	kc := clientcmdapi.NewConfig()
	for name, c := range admin.Clusters {
		kc.Clusters[name] = c
		kc.Contexts["reader"] = &clientcmdapi.Context{Cluster: name, AuthInfo: "reader", Namespace: "team-a"}
	}
	kc.Clusters["nowhere"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1", InsecureSkipTLSVerify: true}
	kc.Contexts["nowhere"] = &clientcmdapi.Context{Cluster: "nowhere", AuthInfo: "reader", Namespace: "team-a"}
	kc.AuthInfos["reader"] = &clientcmdapi.AuthInfo{Token: token}
	kc.CurrentContext = "reader"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestKubectlPluginPrefersTheServer: with a pvguard server named, the plugin prints the server's
// explanation, asked as the kubeconfig's user, even where it could not read the cluster itself
// (--context nowhere); with the server gone it says so and explains from its own reads, to the
// same verdict.
func TestKubectlPluginPrefersTheServer(t *testing.T) {
	seedOnce(t)
	base, ca := startServe(t)
	kc := readerKubeconfig(t)
	env := []string{"KUBECONFIG=" + kc}
	kubectl := func(args ...string) result { t.Helper(); return runIn(t, env, suite.kubectl, args...) }
	decode := func(t *testing.T, r result) explain.Explanation {
		t.Helper()
		if r.code != 0 {
			t.Fatalf("%s", r)
		}
		var e explain.Explanation
		if err := json.Unmarshal([]byte(r.stdout), &e); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, r.stdout)
		}
		return e
	}

	var fromServer explain.Explanation
	// The server's cache fills as it starts: ask until it knows the claim.
	deadline := time.Now().Add(time.Minute)
	for {
		r := kubectl("pvguard", "explain", "pvc", "--context", "nowhere", "data", "-o", "json",
			"--pvguard-server", base, "--pvguard-certificate-authority", ca)
		if r.code == 0 || time.Now().After(deadline) {
			fromServer = decode(t, r)
			if strings.Contains(r.stderr, "explaining from your own reads") {
				t.Errorf("the plugin made the explanation itself: %s", r)
			}
			break
		}
		time.Sleep(time.Second)
	}
	if fromServer.Claim != "team-a/data" || fromServer.Verdict.Closest.String() != "pv-fs" {
		t.Fatalf("the server's explanation %+v, want team-a/data with pv-fs the closest", fromServer)
	}

	// The same question, with the server's address closed: the plugin reads the cluster itself.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "https://" + ln.Addr().String()
	_ = ln.Close()
	r := kubectl("pvguard", "explain", "pvc", "data", "-o", "json", "--pvguard-server", closed, "--pvguard-certificate-authority", ca)
	local := decode(t, r)
	if !strings.Contains(r.stderr, "explaining from your own reads") || !strings.Contains(r.stderr, ln.Addr().String()) {
		t.Errorf("the plugin did not say the server %s could not be reached: %s", closed, r)
	}
	if local.WaitingFor != fromServer.WaitingFor || local.State.String() != fromServer.State.String() ||
		local.Verdict.Text.String() != fromServer.Verdict.Text.String() || local.Verdict.Closest.String() != fromServer.Verdict.Closest.String() {
		t.Errorf("the local explanation differs from the server's:\nlocal  %+v\nserver %+v", local, fromServer)
	}
}
