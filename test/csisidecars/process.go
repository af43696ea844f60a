package csisidecars

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Process is a component running as a child process, its output going to a log file.
type Process struct {
	Name string
	// LogPath holds the process's stdout and stderr.
	LogPath string

	cmd     *exec.Cmd
	log     *os.File
	done    chan struct{}
	waitErr error

	stopOnce sync.Once
	stopErr  error
}

// scrubbedEnv are variables that would make a component ignore its flags: the external-provisioner
// prefers $KUBECONFIG to --kubeconfig, and NAMESPACE, POD_NAME and NODE_NAME switch on in-cluster
// behaviour.
var scrubbedEnv = []string{"KUBECONFIG", "NAMESPACE", "POD_NAME", "POD_NAMESPACE", "NODE_NAME"}

// StartProcess starts binary with args, its output appended to logPath. It returns at once; use
// Exited to see whether it died, Stop to end it.
func StartProcess(name, binary string, args []string, logPath string) (*Process, error) {
	if _, err := os.Stat(binary); err != nil {
		return nil, fmt.Errorf("starting %s: %w (run `make tools`, which builds it into bin/)", name, err)
	}
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("starting %s: log file: %w", name, err)
	}
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = log, log
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !contains(scrubbedEnv, k) {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	setParentDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return nil, fmt.Errorf("starting %s (%s): %w", name, binary, err)
	}
	p := &Process{Name: name, LogPath: logPath, cmd: cmd, log: log, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Exited reports whether the process has ended, and how.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.waitErr
	default:
		return false, nil
	}
}

// Stop sends SIGTERM, waits up to ten seconds, then kills the process. Ending on SIGTERM (the
// sidecars install no handler for it) is a clean stop; an exit before Stop was called is
// reported as an error. Later calls return the first one's result.
func (p *Process) Stop() error {
	p.stopOnce.Do(func() {
		if exited, err := p.Exited(); exited {
			p.stopErr = fmt.Errorf("%s had already exited (%v) before it was stopped; see %s", p.Name, err, p.LogPath)
			_ = p.log.Close()
			return
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
			p.stopErr = fmt.Errorf("%s did not stop within 10s of SIGTERM and was killed", p.Name)
		}
		var ee *exec.ExitError
		if sigtermed := errors.As(p.waitErr, &ee) && terminatedBy(ee, syscall.SIGTERM); p.waitErr != nil && p.stopErr == nil && !sigtermed {
			p.stopErr = fmt.Errorf("%s ended with %v on SIGTERM; see %s", p.Name, p.waitErr, p.LogPath)
		}
		_ = p.log.Close()
	})
	return p.stopErr
}

// Logs returns the process's output so far.
func (p *Process) Logs() string {
	data, err := os.ReadFile(p.LogPath)
	if err != nil {
		return fmt.Sprintf("(reading %s: %v)", p.LogPath, err)
	}
	return string(data)
}

// Tail returns the last n lines of the process's output, for failure messages.
func (p *Process) Tail(n int) string {
	lines := strings.Split(strings.TrimRight(p.Logs(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func terminatedBy(ee *exec.ExitError, sig syscall.Signal) bool {
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// APIFindings returns the lines of a client-go component's log that record an apiserver warning
// (client-go's default warning handler logs each one from rest/warnings.go as "Warning: ...")
// or a write an admission webhook denied. A component's own warnings (a feature gate it was
// given, say) come from other files and are not returned.
func APIFindings(log string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if (strings.Contains(line, "warnings.go:") && strings.Contains(line, "Warning: ")) ||
			strings.Contains(line, "denied the request") {
			out = append(out, line)
		}
	}
	return out
}
