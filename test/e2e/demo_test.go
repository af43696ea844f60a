package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/pvguard/pvguard/test/harness"
)

// devSA is the chart's ServiceAccount for the release `pvguard-dev` renders.
const devSA = "system:serviceaccount:pvguard-system:pvguard"

// TestDemo runs `make demo` (the README's first command, pvguard-dev --exit-after-demo)
// and `make dev` (serving until interrupted), each as a process on a control plane of its own.
// The demo itself fails if a misbinding is admitted or a legitimate write refused. The story
// must read cleanly: nothing on stderr, no log line on stdout; pvguard's logs are in the file the
// story names. pvguard runs as the chart's ServiceAccount, which the chart's policy config
// counts as a binding controller: its own binds draw no PVG013.
func TestDemo(t *testing.T) {
	t.Run("make demo", func(t *testing.T) {
		// A --dir that does not exist yet is created.
		dir := filepath.Join(t.TempDir(), "new", "dir")
		p := startDev(t, dir, "--exit-after-demo")
		p.wait(t, 3*time.Minute)
		checkStory(t, p)
		checkLogFile(t, p, dir)
	})

	t.Run("make dev", func(t *testing.T) {
		dir := t.TempDir()
		p := startDev(t, dir)
		p.waitForOutput(t, "Press Ctrl-C to stop.", 3*time.Minute)
		checkStory(t, p)
		ctx := context.Background()

		// Every request pvguard makes uses this kubeconfig: a ServiceAccount token, no admin
		// certificate.
		m := regexp.MustCompile(`\(kubeconfig (\S+), token`).FindStringSubmatch(p.stdout.String())
		if m == nil {
			t.Fatalf("the story names no kubeconfig of pvguard's:\n%s", p.stdout.String())
		}
		if who := whoIs(t, m[1]); who != devSA {
			t.Errorf("pvguard's kubeconfig %s authenticates as %q, want the chart's ServiceAccount %s", m[1], who, devSA)
		}

		// The binder bound team-a/db (bind-completed is its write, by field manager "pvguard"),
		// and no admission review of the whole demo found a PVG013: a non-controller writing
		// binder annotations.
		admin := kubeClient(t, filepath.Join(dir, "kubeconfig"))
		pvc, err := admin.CoreV1().PersistentVolumeClaims("team-a").Get(ctx, "db", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !managedBy(pvc.ManagedFields, "pvguard", `"f:pv.kubernetes.io/bind-completed"`) {
			t.Errorf("team-a/db's bind-completed annotation was not written by pvguard: %+v", pvc.ManagedFields)
		}
		findings := admissionFindings(t, p)
		if findings[`rule="PVG001"`] == 0 {
			t.Errorf("pvguard_admission_findings_total has no PVG001 (the demo's step 2): %v", findings)
		}
		if n := findings[`rule="PVG013"`]; n != 0 {
			t.Errorf("the demo's writes drew %v PVG013 findings at admission, want none (pvguard's own binds are a controller's)", n)
		}

		if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
		p.wait(t, time.Minute)
		checkLogFile(t, p, dir)
	})
}

// devProcess is a `pvguard-dev` process with its stdout and stderr kept apart.
type devProcess struct {
	cmd            *exec.Cmd
	stdout, stderr syncBuffer
	done           chan struct{}
	err            error
}

func startDev(t *testing.T, dir string, args ...string) *devProcess {
	t.Helper()
	args = append([]string{"--listen=127.0.0.1:0", "--dir=" + dir}, args...)
	cmd, err := harness.ChildCommand(args...)
	harness.Must(t, err, "preparing pvguard-dev")
	p := &devProcess{cmd: cmd, done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting pvguard %v: %v", args, err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// wait waits for the process to exit, which it must do cleanly.
func (p *devProcess) wait(t *testing.T, timeout time.Duration) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		t.Fatalf("pvguard-dev still running after %s\nstdout:\n%s\nstderr:\n%s", timeout, p.stdout.String(), p.stderr.String())
	}
	if p.err != nil {
		t.Fatalf("pvguard-dev: %v\nstdout:\n%s\nstderr:\n%s", p.err, p.stdout.String(), p.stderr.String())
	}
}

// waitForOutput waits until stdout contains s.
func (p *devProcess) waitForOutput(t *testing.T, s string, timeout time.Duration) {
	t.Helper()
	deadline := time.After(timeout)
	for !strings.Contains(p.stdout.String(), s) {
		select {
		case <-p.done:
			t.Fatalf("pvguard-dev exited (%v) before printing %q\nstdout:\n%s\nstderr:\n%s", p.err, s, p.stdout.String(), p.stderr.String())
		case <-deadline:
			t.Fatalf("pvguard-dev did not print %q within %s\nstdout:\n%s\nstderr:\n%s", s, timeout, p.stdout.String(), p.stderr.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// checkStory checks the demo's steps and that nothing interleaves with them: stderr is empty
// and no line of stdout is a JSON log line.
func checkStory(t *testing.T, p *devProcess) {
	t.Helper()
	out := p.stdout.String()
	for _, want := range []string{
		"as the chart's ServiceAccount pvguard-system/pvguard",
		"[PVG001 volume-mode-match] PersistentVolumeClaim team-a/db requests volumeMode Block, but PersistentVolume pv-disk-fs is Filesystem",
		"[PVG010 volume-grab]",
		"PersistentVolume pv-disk-block is Bound to team-a/db; PersistentVolumeClaim team-a/db is Bound to pv-disk-block",
		"[PVG011 reclaim-downgrade]",
		"[PVG004 no-double-binding]",
		"[PVG024 failed-volume] audit PersistentVolume pv-scratch: PersistentVolume pv-scratch is Failed",
		"export KUBECONFIG=",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "{") {
			t.Errorf("a log line in the demo's story: %s", line)
		}
	}
	if errOut := p.stderr.String(); errOut != "" {
		t.Errorf("pvguard-dev wrote to stderr (the terminal interleaves it with the story):\n%s", errOut)
	}
}

// checkLogFile checks that the story names the log file once, in dir, and that the file holds
// pvguard's JSON log lines: the binder's identity is the chart's ServiceAccount, and no write of
// pvguard's drew a PVG013 warning (the apiserver relays warnings to the writer, which logs them).
func checkLogFile(t *testing.T, p *devProcess, dir string) {
	t.Helper()
	out := p.stdout.String()
	m := regexp.MustCompile(`pvguard's logs go to (\S+)`).FindAllStringSubmatch(out, -1)
	if len(m) != 1 {
		t.Fatalf("the story names the log file %d times, want once:\n%s", len(m), out)
	}
	path := m[0][1]
	if filepath.Dir(path) != dir {
		t.Errorf("the log file %s is not in --dir %s", path, dir)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var binderIdentity string
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var entry struct {
			Msg      string `json:"msg"`
			Logger   string `json:"logger"`
			Identity string `json:"identity"`
		}
		if err := json.Unmarshal(sc.Bytes(), &entry); err != nil {
			t.Errorf("not a JSON log line in %s: %s", path, sc.Text())
			continue
		}
		seen[entry.Msg] = true
		if entry.Msg == "binder enabled" {
			binderIdentity = entry.Identity
		}
		if strings.Contains(sc.Text(), "PVG013") {
			t.Errorf("pvguard's own write drew a PVG013 warning: %s", sc.Text())
		}
	}
	for _, msg := range []string{"binder enabled", "serving webhooks", "binder started", "informer cache synced; ready"} {
		if !seen[msg] {
			t.Errorf("%s lacks pvguard's %q log line:\n%s", path, msg, data)
		}
	}
	if binderIdentity != devSA {
		t.Errorf("the binder runs as %q, want the chart's ServiceAccount %s", binderIdentity, devSA)
	}
}

func kubeClient(t *testing.T, kubeconfig string) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// whoIs asks the apiserver who a kubeconfig authenticates as.
func whoIs(t *testing.T, kubeconfig string) string {
	t.Helper()
	r, err := kubeClient(t, kubeconfig).AuthenticationV1().SelfSubjectReviews().Create(context.Background(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("SelfSubjectReview with %s: %v", kubeconfig, err)
	}
	return r.Status.UserInfo.Username
}

// managedBy reports whether manager owns a field whose key contains field.
func managedBy(entries []metav1.ManagedFieldsEntry, manager, field string) bool {
	for _, e := range entries {
		if e.Manager == manager && e.FieldsV1 != nil && strings.Contains(string(e.FieldsV1.Raw), field) {
			return true
		}
	}
	return false
}

// admissionFindings reads pvguard_admission_findings_total from the metrics the story points at,
// summed by rule label ("rule=\"PVG001\"").
func admissionFindings(t *testing.T, p *devProcess) map[string]float64 {
	t.Helper()
	m := regexp.MustCompile(`curl -k (\S+/metrics)`).FindStringSubmatch(p.stdout.String())
	if m == nil {
		t.Fatalf("the story names no metrics URL:\n%s", p.stdout.String())
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // a local test server
	resp, err := hc.Get(m[1])
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	rule := regexp.MustCompile(`rule="[^"]*"`)
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, "pvguard_admission_findings_total{") {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(line[strings.LastIndex(line, " ")+1:], &v); err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[rule.FindString(line)] += v
	}
	return out
}

// syncBuffer is a bytes.Buffer the process writes to while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
