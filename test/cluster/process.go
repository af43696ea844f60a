package cluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// Process is one component run from its binary, its output in a log file.
type Process struct {
	Name string
	// Log is the file its standard output and error go to; failure messages name it.
	Log  string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// StartProcess runs bin with args, its output appended to <logDir>/<name>.log. The process is
// killed if the test binary dies (Pdeathsig), so no component outlives a crashed suite.
func StartProcess(logDir, name, bin string, args ...string) (*Process, error) {
	log := filepath.Join(logDir, name+".log")
	f, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening the log of %s: %w", name, err)
	}
	fmt.Fprintf(f, "=== %s %s %q\n", time.Now().Format(time.RFC3339Nano), bin, args)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting %s (%s): %w", name, bin, err)
	}
	p := &Process{Name: name, Log: log, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// Exited reports whether the process has stopped, and how.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// Alive returns an error naming the log when the process has stopped on its own.
func (p *Process) Alive() error {
	if done, err := p.Exited(); done {
		return fmt.Errorf("%s exited (%v); see %s", p.Name, err, p.Log)
	}
	return nil
}

// Stop sends SIGTERM to this process (and only to it), waits up to 30 s, then kills it.
func (p *Process) Stop() error {
	if done, err := p.Exited(); done {
		return fmt.Errorf("%s had already exited (%v); see %s", p.Name, err, p.Log)
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		return errors.New(p.Name + " ignored SIGTERM for 30s and was killed")
	}
}
