package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"debug/buildinfo"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/procfs"

	"github.com/pvguard/pvguard/binder"
	"github.com/pvguard/pvguard/certs"
)

// buildPVGuard builds ./cmd/pvguard of the module the harness runs in into dir, stamped with
// `git describe` as `make build` does.
func buildPVGuard(ctx context.Context, dir string) (string, error) {
	root, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		return "", fmt.Errorf("finding the module root: %w", err)
	}
	rootDir := strings.TrimSpace(string(root))
	version := "dev"
	if out, err := exec.CommandContext(ctx, "git", "-C", rootDir, "describe", "--tags", "--always", "--dirty").Output(); err == nil {
		version = strings.TrimSpace(string(out))
	}
	bin := filepath.Join(dir, "pvguard")
	cmd := exec.CommandContext(ctx, "go", "build", "-ldflags", "-X github.com/pvguard/pvguard/internal/cli.Version="+version, "-o", bin, "./cmd/pvguard")
	cmd.Dir, cmd.Stdout, cmd.Stderr = rootDir, os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building pvguard: %w", err)
	}
	return bin, nil
}

// binaryVersion is what `pvguard version` prints and the commit the binary was built from.
func binaryVersion(ctx context.Context, bin string) string {
	out, err := exec.CommandContext(ctx, bin, "version").Output()
	v := strings.TrimSpace(string(out))
	if err != nil {
		v = fmt.Sprintf("unknown (%v)", err)
	}
	if info, err := buildinfo.ReadFile(bin); err == nil {
		settings := map[string]string{}
		for _, s := range info.Settings {
			settings[s.Key] = s.Value
		}
		if rev := settings["vcs.revision"]; rev != "" {
			v += ", commit " + rev
			if settings["vcs.modified"] == "true" {
				v += " (modified)"
			}
		}
	}
	return v
}

// server is one `pvguard serve` child process.
type server struct {
	cmd *exec.Cmd
	pid int
	// startBusy and startAll are the machine's CPU time (machineCPU) when the server started,
	// startProcs its processes'.
	startBusy, startAll float64
	startProcs          processCPU
	base                string // https://127.0.0.1:port
	plain               string // http://127.0.0.1:port of the metrics address, when profiling
	certDir             string
	logPath             string
	started             time.Time
	exited              chan struct{}
	waitErr             error
	// perf records the child's CPU profile (serveConfig.cpuProfile) until stopProfile.
	perf     *exec.Cmd
	perfDone chan error
	// hc reaches the server's health and metrics endpoints; the probe needs no trust in the
	// certificate (reviews are sent with a client that trusts its CA, see reviewClient).
	hc *http.Client
}

// serveConfig is how to run a child.
type serveConfig struct {
	binary string
	mode   binder.Mode
	dir    string // kubeconfig, certificates and log live here
	kube   string // kubeconfig path
	env    []string
	args   []string // extra serve flags
	// heapProfile, when set, is where the steady state's heap profile is written: the child then
	// runs with --profiling on a plain metrics address.
	heapProfile string
	// explainProfile, when set, is where the child's CPU profile (Go's, through --profiling) while
	// callers ask for explanations is written: the admission reviews' measurement under them.
	explainProfile string
	// cpuProfile, when set, is where `perf record` writes the child's CPU samples from its start
	// until its first full audit is seen.
	cpuProfile string
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startServer starts `pvguard serve` with only the first full audit and change-driven
// incremental audits in the measured window (--audit-interval 10m), no leader election, a
// self-signed certificate in its own directory, and a fast shutdown.
func startServer(c serveConfig) (*server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	s := &server{
		base:    fmt.Sprintf("https://127.0.0.1:%d", port),
		certDir: filepath.Join(c.dir, "certs-"+string(c.mode)),
		logPath: filepath.Join(c.dir, "pvguard-"+string(c.mode)+".log"),
		exited:  make(chan struct{}),
		hc: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // a local probe of a self-signed child
		}},
	}
	args := append([]string{"serve",
		"--kubeconfig", c.kube,
		"--binder", string(c.mode),
		"--leader-elect=false",
		"--self-signed", "--cert-dir", s.certDir,
		"--listen", fmt.Sprintf("127.0.0.1:%d", port),
		"--audit-interval", "10m",
		"--shutdown-delay", "0s", "--shutdown-timeout", "5s",
	}, c.args...)
	if c.heapProfile != "" || c.explainProfile != "" {
		mport, err := freePort()
		if err != nil {
			return nil, err
		}
		s.plain = fmt.Sprintf("http://127.0.0.1:%d", mport)
		args = append(args, "--profiling", "--metrics-listen", fmt.Sprintf("127.0.0.1:%d", mport))
	}
	log, err := os.Create(s.logPath)
	if err != nil {
		return nil, fmt.Errorf("creating the server's log: %w", err)
	}
	s.cmd = exec.Command(c.binary, args...)
	s.cmd.Env = append(os.Environ(), c.env...)
	s.cmd.Stdout, s.cmd.Stderr = log, log
	s.startBusy, s.startAll = machineCPU()
	s.startProcs = readProcessCPU()
	s.started = time.Now()
	if err := s.cmd.Start(); err != nil {
		_ = log.Close()
		return nil, fmt.Errorf("starting %s serve: %w", c.binary, err)
	}
	s.pid = s.cmd.Process.Pid
	if c.cpuProfile != "" {
		if err := s.startProfile(c.cpuProfile); err != nil {
			_ = s.cmd.Process.Kill()
			return nil, err
		}
	}
	go func() {
		s.waitErr = s.cmd.Wait()
		_ = log.Close()
		close(s.exited)
	}()
	return s, nil
}

// alive is an error once the child has exited.
func (s *server) alive() error {
	select {
	case <-s.exited:
		return fmt.Errorf("pvguard serve exited (%v); see %s", s.waitErr, s.logPath)
	default:
		return nil
	}
}

// stop sends SIGTERM and waits; after 30 s it kills.
func (s *server) stop() error {
	_ = s.stopProfile() // a run that failed before its first full audit
	if s.alive() != nil {
		return nil
	}
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("stopping pvguard serve: %w", err)
	}
	select {
	case <-s.exited:
		return nil
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
		return fmt.Errorf("pvguard serve did not stop within 30 s of SIGTERM; killed (see %s)", s.logPath)
	}
}

// waitReady polls /readyz until it answers 200 and returns the time since the process started.
func (s *server) waitReady(ctx context.Context, timeout time.Duration) (time.Duration, error) {
	deadline := time.Now().Add(timeout)
	for {
		if err := s.alive(); err != nil {
			return 0, err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base+"/readyz", nil)
		if err != nil {
			return 0, fmt.Errorf("probing readiness: %w", err)
		}
		if resp, err := s.hc.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return time.Since(s.started), nil
			}
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("pvguard serve not ready after %s; see %s", timeout, s.logPath)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// caPool trusts the CA pvguard issued its self-signed certificate with.
func (s *server) caPool() (*x509.CertPool, error) {
	data, err := os.ReadFile(filepath.Join(s.certDir, certs.CAFile))
	if err != nil {
		return nil, fmt.Errorf("reading pvguard's CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, errors.New("pvguard's CA file holds no certificate")
	}
	return pool, nil
}

// metrics is one scrape of /metrics.
type metrics map[string]*dto.MetricFamily

func (s *server) metrics(ctx context.Context) (metrics, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base+"/metrics", nil)
	if err != nil {
		return nil, fmt.Errorf("reading pvguard's metrics: %w", err)
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reading pvguard's metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("reading pvguard's metrics: HTTP %d", resp.StatusCode)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("parsing pvguard's metrics: %w", err)
	}
	return metrics(families), nil
}

// matches reports whether m carries every label pair in want.
func matches(m *dto.Metric, want map[string]string) bool {
	found := 0
	for _, l := range m.GetLabel() {
		if v, ok := want[l.GetName()]; ok && v == l.GetValue() {
			found++
		}
	}
	return found == len(want)
}

// value sums a counter or gauge over the series matching the labels (0 when absent).
func (m metrics) value(name string, labels map[string]string) float64 {
	var sum float64
	for _, s := range m[name].GetMetric() {
		if matches(s, labels) {
			sum += s.GetCounter().GetValue() + s.GetGauge().GetValue() + s.GetUntyped().GetValue()
		}
	}
	return sum
}

// histogram is a histogram's sum and count over the matching series.
func (m metrics) histogram(name string, labels map[string]string) (sum float64, count uint64) {
	for _, s := range m[name].GetMetric() {
		if matches(s, labels) {
			sum += s.GetHistogram().GetSampleSum()
			count += s.GetHistogram().GetSampleCount()
		}
	}
	return sum, count
}

// bucket is one cumulative histogram bucket.
type bucket struct {
	UpperBound float64 `json:"le"`
	Count      uint64  `json:"count"`
}

// buckets are a histogram's cumulative buckets over the matching series (+Inf last).
func (m metrics) buckets(name string, labels map[string]string) []bucket {
	var out []bucket
	for _, s := range m[name].GetMetric() {
		if !matches(s, labels) {
			continue
		}
		h := s.GetHistogram()
		for i, b := range h.GetBucket() {
			if i >= len(out) {
				out = append(out, bucket{UpperBound: b.GetUpperBound()})
			}
			out[i].Count += b.GetCumulativeCount()
		}
		if n := len(h.GetBucket()); n >= len(out) {
			out = append(out, bucket{UpperBound: math.Inf(1)})
		}
		out[len(h.GetBucket())].Count += h.GetSampleCount()
	}
	return out
}

// saveHeapProfile writes the child's heap profile (after a collection) to path.
func (s *server) saveHeapProfile(ctx context.Context, path string) error {
	return s.saveProfile(ctx, "heap?gc=1", path)
}

// saveProfile writes the child's /debug/pprof/ profile of that query to path.
func (s *server) saveProfile(ctx context.Context, query, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.plain+"/debug/pprof/"+query, nil)
	if err != nil {
		return err
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return fmt.Errorf("reading the profile %s: %w", query, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("reading the profile %s: %s", query, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return f.Close()
}

// startProfile attaches `perf record` (call graphs from Go's frame pointers) to the child: the
// server's /debug/pprof is served only after its cache has synced, too late for its start.
func (s *server) startProfile(path string) error {
	perf, err := exec.LookPath("perf")
	if err != nil {
		return fmt.Errorf("-cpu-profiles needs perf: %w", err)
	}
	s.perf = exec.Command(perf, "record", "-q", "-F", "499", "-g", "-p", strconv.Itoa(s.pid), "-o", path)
	s.perf.Stdout, s.perf.Stderr = os.Stderr, os.Stderr
	if err := s.perf.Start(); err != nil {
		return fmt.Errorf("starting perf record: %w", err)
	}
	s.perfDone = make(chan error, 1)
	go func() { s.perfDone <- s.perf.Wait() }()
	return nil
}

// stopProfile ends `perf record` (SIGINT makes it write its file) and waits for it.
func (s *server) stopProfile() error {
	if s.perf == nil {
		return nil
	}
	perf := s.perf
	s.perf = nil
	if err := perf.Process.Signal(os.Interrupt); err != nil {
		return fmt.Errorf("stopping perf record: %w", err)
	}
	select {
	case err := <-s.perfDone:
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			return fmt.Errorf("perf record: %w", err)
		}
		return nil
	case <-time.After(time.Minute):
		_ = perf.Process.Kill()
		return errors.New("perf record did not end within a minute of SIGINT; killed")
	}
}

// cpuSeconds is the CPU time (user and system) the child has used so far; 0 when unreadable.
func (s *server) cpuSeconds() float64 {
	proc, err := procfs.NewProc(s.pid)
	if err != nil {
		return 0
	}
	st, err := proc.Stat()
	if err != nil {
		return 0
	}
	return st.CPUTime()
}
