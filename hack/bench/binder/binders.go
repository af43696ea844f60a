package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/go-logr/logr"

	pvbinder "github.com/pvguard/pvguard/binder"
	"github.com/pvguard/pvguard/internal/cli"
)

// A binder under test: started after the run's pairs exist, stopped once they are bound.
type binder interface {
	// start launches the binder; it returns once the process or goroutine is running.
	start(q rate) error
	// exited is closed if the binder stops on its own (an error at start-up).
	exited() <-chan struct{}
	// stop stops the binder and waits for it to be gone.
	stop() error
}

// rate is a client QPS and burst, as both binders' --kube-api-qps and --kube-api-burst.
type rate struct {
	qps   float32
	burst int
}

func (r rate) String() string { return fmt.Sprintf("%g/%d", r.qps, r.burst) }

// upstream is kube-controller-manager running only the persistentvolume-binder controller, as an
// exec'd process with its logs in a file.
type upstream struct {
	bin, kubeconfig, logFile string
	cmd                      *exec.Cmd
	done                     chan struct{}
	waitErr                  error
}

// upstreamArgs are the flags kube-controller-manager v1.37 needs to run only the PV binder
// against the test apiserver: no serving endpoint (--secure-port=0, so no delegated
// authentication or authorization either), no leader election, the kubeconfig's own identity
// for every controller, and the client rate limits under test. Everything else is left at its
// default, notably --pvclaimbinder-sync-period=15s.
func (u *upstream) args(q rate) []string {
	return []string{
		"--kubeconfig=" + u.kubeconfig,
		"--controllers=persistentvolume-binder-controller",
		"--leader-elect=false",
		"--use-service-account-credentials=false",
		"--secure-port=0",
		"--kube-api-qps=" + strconv.FormatFloat(float64(q.qps), 'f', -1, 32),
		"--kube-api-burst=" + strconv.Itoa(q.burst),
		"--v=2",
	}
}

func (u *upstream) start(q rate) error {
	logf, err := os.OpenFile(u.logFile, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	u.cmd = exec.Command(u.bin, u.args(q)...)
	u.cmd.Stdout, u.cmd.Stderr = logf, logf
	if err := u.cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("starting %s: %w", u.bin, err)
	}
	u.done = make(chan struct{})
	go func() {
		u.waitErr = u.cmd.Wait()
		logf.Close()
		close(u.done)
	}()
	return nil
}

func (u *upstream) exited() <-chan struct{} { return u.done }

func (u *upstream) stop() error {
	select {
	case <-u.done:
		return fmt.Errorf("kube-controller-manager exited early (%v); log: %s", u.waitErr, u.logFile)
	default:
	}
	_ = u.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-u.done:
		return nil
	case <-time.After(30 * time.Second):
		_ = u.cmd.Process.Kill()
		<-u.done
		return errors.New("kube-controller-manager ignored SIGTERM for 30s and was killed")
	}
}

// pvguard is `pvguard serve --binder=active` run in this process through cli.Serve, as the
// end-to-end tests run it. No webhook configuration is installed, so its webhooks are never
// called; it serves (on a loopback port with a self-signed certificate) only because Serve
// always does.
//
// With half, it gets half the QPS and burst (at least 1): controller-runtime gives each resource
// its own client, and so its own token bucket, so pvguard's volume writes and claim writes are
// limited separately, where kube-controller-manager's one clientset shares one bucket between
// them. With half the rate in each bucket, its volume and claim writes together get upstream's
// budget.
type pvguard struct {
	kubeconfig string
	certDir    string // where its self-signed certificate is issued
	half       bool
	cancel     context.CancelFunc
	done       chan struct{}
	err        error
}

func (p *pvguard) options(q rate) cli.ServeFlags {
	o := cli.DefaultServeFlags()
	o.API.Kubeconfig = p.kubeconfig
	o.Binder.Mode = pvbinder.ModeActive
	o.LeaderElection.Elect = false
	o.Audit.Interval = 0
	o.Certs.SelfSigned = true
	o.Certs.Dir = p.certDir
	o.Listen = "127.0.0.1:0"
	o.API.QPS, o.API.Burst = q.qps, q.burst
	if p.half {
		o.API.QPS, o.API.Burst = q.qps/2, max(q.burst/2, 1)
	}
	o.ShutdownDelay = 0
	return o
}

func (p *pvguard) start(q rate) error {
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel, p.done, p.err = cancel, make(chan struct{}), nil
	o := p.options(q)
	go func() {
		p.err = cli.Serve(ctx, o, logr.Discard())
		close(p.done)
	}()
	return nil
}

func (p *pvguard) exited() <-chan struct{} { return p.done }

func (p *pvguard) stop() error {
	select {
	case <-p.done:
		return fmt.Errorf("pvguard serve returned early: %v", p.err)
	default:
	}
	p.cancel()
	select {
	case <-p.done:
		return p.err
	case <-time.After(time.Minute):
		return errors.New("pvguard serve did not return within a minute of its context ending")
	}
}
