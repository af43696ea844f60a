package e2echaos

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/internal/cli"
	"github.com/pvguard/pvguard/test/harness"
)

// A fleet of binders on one Lease: in-process replicas whose BeforeWrite hook can kill them
// between two writes and inject conflicts, and real `pvguard serve` processes to SIGKILL.

type replica struct {
	name   string
	inst   *harness.Instance
	killAt int64 // the write attempt that kills it; 0 never
	writes atomic.Int64
	killed atomic.Bool
	fired  chan struct{}
	once   sync.Once
}

// kill stops every later write of the replica, as if the process died at this instant.
func (r *replica) kill() {
	r.killed.Store(true)
	r.once.Do(func() { close(r.fired) })
}

type fleet struct {
	t     *testing.T
	cfg   config
	lease string
	rng   *lockedRand

	mu          sync.Mutex
	ops         map[string]int
	lastWrite   time.Time
	lastWriter  string
	pastWriters map[string]bool
	overlaps    []string
	// claimRefWrites lists, by claim uid, the volume claimRef writes that passed the hook
	// ("replica:volume"), to show claims given two volumes.
	claimRefWrites map[string][]string
	leaders        int

	conflicts                           atomic.Int64
	writeKills, timerKills, leaderKills atomic.Int64
	sigkills                            []string
}

func newFleet(t *testing.T, cfg config, lease string) *fleet {
	return &fleet{t: t, cfg: cfg, lease: lease, rng: newRand(cfg.Seed, 3), ops: map[string]int{}, pastWriters: map[string]bool{}, claimRefWrites: map[string][]string{}}
}

// killedError is what a dead replica's writes return. It is a conflict so that the binder
// retries quietly, as it would after a real one.
func killedError(obj client.Object) error {
	return apierrors.NewConflict(resourceOf(obj), obj.GetName(), errKilled)
}

func resourceOf(obj client.Object) schema.GroupResource {
	if _, ok := obj.(*corev1.PersistentVolumeClaim); ok {
		return corev1.Resource("persistentvolumeclaims")
	}
	return corev1.Resource("persistentvolumes")
}

func (f *fleet) hook(r *replica) func(op string, obj client.Object) error {
	return func(op string, obj client.Object) error {
		if r.killed.Load() {
			return killedError(obj)
		}
		if n := r.writes.Add(1); r.killAt > 0 && n >= r.killAt {
			r.kill()
			return killedError(obj)
		}
		if f.cfg.ConflictRate > 0 && f.rng.Float64() < f.cfg.ConflictRate {
			f.conflicts.Add(1)
			return apierrors.NewConflict(resourceOf(obj), obj.GetName(), fmt.Errorf("injected by the chaos test"))
		}
		f.mu.Lock()
		f.ops[op]++
		f.lastWrite = time.Now()
		if pv, ok := obj.(*corev1.PersistentVolume); ok && op == "bind-1-volume-spec" && pv.Spec.ClaimRef != nil {
			k := string(pv.Spec.ClaimRef.UID)
			f.claimRefWrites[k] = append(f.claimRefWrites[k], r.name+":"+pv.Name)
		}
		// Only the leader writes, and a leader stops only by dying: once another replica has
		// written, an earlier writer must never write again.
		if f.lastWriter != r.name {
			if f.pastWriters[r.name] {
				f.overlaps = append(f.overlaps, fmt.Sprintf("%s wrote (%s %s) after %s had taken over", r.name, op, obj.GetName(), f.lastWriter))
			}
			f.pastWriters[f.lastWriter] = true
			f.lastWriter = r.name
			f.leaders++
		}
		f.mu.Unlock()
		return nil
	}
}

// start runs an in-process replica; armed ones die at a random write attempt. tune, if given,
// adjusts its options last.
func (f *fleet) start(name string, armed bool, tune ...func(*cli.ServeFlags)) *replica {
	f.t.Helper()
	r := &replica{name: name, fired: make(chan struct{})}
	if armed {
		r.killAt = int64(1 + f.rng.IntN(40))
	}
	inst, err := cluster(f.t).ServeWith(cli.BinderHooks{BeforeWrite: f.hook(r)}, func(o *cli.ServeFlags) {
		o.Binder.Mode = "active"
		o.Binder.Resync = time.Second
		o.Audit.Interval = 0
		o.LeaderElection.Elect, o.LeaderElection.ID = true, f.lease
		o.API.QPS, o.API.Burst = f.cfg.QPS, int(2*f.cfg.QPS)
		for _, t := range tune {
			t(o)
		}
	})
	if err != nil {
		f.t.Fatalf("starting replica %s: %v", name, err)
	}
	r.inst = inst
	return r
}

// chaos keeps two armed replicas running and kills one, kills times: at its random write, or at
// a random moment, whichever comes first; a replacement starts after a short pause.
func (f *fleet) chaos(kills int) {
	type firing struct {
		slot int
		r    *replica
		how  string
	}
	fire := make(chan firing, 2)
	watch := func(slot int, r *replica) {
		select {
		case <-r.fired:
			fire <- firing{slot, r, "write"}
		case <-time.After(f.rng.Between(500*time.Millisecond, 4*time.Second)):
			r.kill()
			fire <- firing{slot, r, "timer"}
		}
	}
	var slots [2]*replica
	var gens [2]int
	for i := range slots {
		gens[i] = 1
		slots[i] = f.start(fmt.Sprintf("%c1", 'a'+i), true)
		go watch(i, slots[i])
	}
	for range kills {
		fr := <-fire
		if fr.how == "write" {
			f.writeKills.Add(1)
		} else {
			f.timerKills.Add(1)
		}
		if fr.r.writes.Load() > 0 {
			f.leaderKills.Add(1)
		}
		_ = fr.r.inst.Stop()
		time.Sleep(f.rng.Between(0, 300*time.Millisecond))
		gens[fr.slot]++
		slots[fr.slot] = f.start(fmt.Sprintf("%c%d", 'a'+fr.slot, gens[fr.slot]), true)
		go watch(fr.slot, slots[fr.slot])
	}
	for _, r := range slots {
		r.kill()
		_ = r.inst.Stop()
	}
}

// calm runs two unarmed replicas (conflicts are still injected) until the test ends.
func (f *fleet) calm() {
	for _, name := range []string{"calm-a", "calm-b"} {
		r := f.start(name, false, func(o *cli.ServeFlags) {
			o.LeaderElection.LeaseDuration, o.LeaderElection.RenewDeadline, o.LeaderElection.RetryPeriod = chaosLeaseDuration, chaosRenewDeadline, chaosRetryPeriod
		})
		f.t.Cleanup(func() { _ = r.inst.Stop() })
	}
}

// Lease timings of the SIGKILLed processes and the calm replicas: short, so that each dead
// leader costs the test seconds, not kube-controller-manager's 15 s, and long enough that a
// leader on a busy two-core machine still renews in time.
const (
	chaosLeaseDuration = 6 * time.Second
	chaosRenewDeadline = 4 * time.Second
	chaosRetryPeriod   = 500 * time.Millisecond
)

// sigkill runs real `pvguard serve --binder=active` processes (the test binary re-executed) one
// after another and SIGKILLs each at a random moment once its binder has started: after its
// k-th binding or a random delay. Each holds the Lease when it dies, so the next one starts
// only once that Lease has expired, as a replacement pod would.
func (f *fleet) sigkill(n int) {
	for i := 1; i <= n; i++ {
		p := f.startProcess()
		k := 1 + f.rng.IntN(8)
		d := f.rng.Between(200*time.Millisecond, 3*time.Second)
		how := ""
		select {
		case <-p.started:
		case <-p.exited:
			f.t.Fatalf("pvguard process exited before its binder started:\n%s", p.tail())
		case <-time.After(time.Minute):
			f.t.Fatalf("pvguard process: binder did not start within a minute:\n%s", p.tail())
		}
		select {
		case <-p.boundN(k):
			how = fmt.Sprintf("after its binding #%d", k)
		case <-time.After(d):
			how = fmt.Sprintf("%v after its binder started (%d bindings)", d.Round(time.Millisecond), p.bound.Load())
		case <-p.exited:
			f.t.Fatalf("pvguard process exited by itself:\n%s", p.tail())
		}
		if err := p.cmd.Process.Kill(); err != nil {
			f.t.Fatalf("SIGKILL: %v", err)
		}
		<-p.exited
		f.sigkills = append(f.sigkills, fmt.Sprintf("process %d killed %s", i, how))
	}
}

type process struct {
	name    string
	cmd     *exec.Cmd
	started chan struct{}
	exited  chan struct{}
	bound   atomic.Int64
	log     *os.File // every line of its stderr, when CHAOS_LOG_DIR is set

	mu      sync.Mutex
	lines   []string
	waiters map[int64]chan struct{}
}

func (f *fleet) startProcess() *process {
	f.t.Helper()
	return startProcess(f.t, processOptions{
		lease: f.lease, leaseDuration: chaosLeaseDuration, renewDeadline: chaosRenewDeadline, retryPeriod: chaosRetryPeriod,
		qps: f.cfg.QPS,
	})
}

// processOptions configure one real `pvguard serve --binder=active --leader-elect` process.
type processOptions struct {
	name       string // names its log file
	kubeconfig string // default: the harness's, straight to the apiserver
	lease      string
	// The Lease timings.
	leaseDuration, renewDeadline, retryPeriod time.Duration
	qps                                       float32
	workers                                   int // --binder-workers; 0 leaves pvguard's default
}

// startProcess runs `pvguard serve --binder=active` as a child process (the test binary
// re-executed) and follows its log: started is closed when its binder starts (it won the
// Lease), bound counts its bindings. The test's cleanup SIGKILLs it.
func startProcess(t *testing.T, o processOptions) *process {
	t.Helper()
	h := cluster(t)
	kubeconfig := o.kubeconfig
	if kubeconfig == "" {
		kubeconfig = h.Kubeconfig
	}
	args := []string{"serve", "--kubeconfig=" + kubeconfig, "--listen=127.0.0.1:0", "--cert-dir=" + h.CertDir,
		"--config=" + h.PolicyFile, "--binder=active", "--binder-resync=1s", "--audit-interval=0",
		"--leader-elect=true", "--leader-election-id=" + o.lease,
		"--leader-elect-lease-duration=" + o.leaseDuration.String(),
		"--leader-elect-renew-deadline=" + o.renewDeadline.String(),
		"--leader-elect-retry-period=" + o.retryPeriod.String(),
		fmt.Sprintf("--kube-api-qps=%v", o.qps), fmt.Sprintf("--kube-api-burst=%d", int(2*o.qps)),
		"--shutdown-delay=0s", "-v"}
	if o.workers > 0 {
		args = append(args, fmt.Sprintf("--binder-workers=%d", o.workers))
	}
	cmd, err := harness.ChildCommand(args...)
	harness.Must(t, err, "preparing pvguard's process")
	stderr, err := cmd.StderrPipe()
	harness.Must(t, err, "stderr pipe")
	cmd.Stdout = io.Discard
	p := &process{name: o.name, cmd: cmd, started: make(chan struct{}), exited: make(chan struct{}), waiters: map[int64]chan struct{}{}}
	if dir := os.Getenv("CHAOS_LOG_DIR"); dir != "" && o.name != "" {
		p.log, err = os.Create(filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_")+"-"+o.name+".log"))
		harness.Must(t, err, "creating the process log")
	}
	harness.Must(t, cmd.Start(), "starting pvguard")
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-p.exited })
	go func() {
		var once sync.Once
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if p.log != nil {
				fmt.Fprintln(p.log, line)
			}
			p.mu.Lock()
			p.lines = append(p.lines, line)
			if len(p.lines) > 40 {
				p.lines = p.lines[1:]
			}
			p.mu.Unlock()
			switch {
			case strings.Contains(line, `"msg":"binder started"`):
				once.Do(func() { close(p.started) })
			case strings.Contains(line, `"msg":"bound"`):
				n := p.bound.Add(1)
				p.mu.Lock()
				for k, ch := range p.waiters {
					if n >= k {
						close(ch)
						delete(p.waiters, k)
					}
				}
				p.mu.Unlock()
			}
		}
		_ = cmd.Wait()
		if p.log != nil {
			_ = p.log.Close()
		}
		close(p.exited)
	}()
	return p
}

// boundN is closed once the process has logged k bindings.
func (p *process) boundN(k int) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	ch := make(chan struct{})
	if p.bound.Load() >= int64(k) {
		close(ch)
		return ch
	}
	p.waiters[int64(k)] = ch
	return ch
}

func (p *process) tail() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.lines, "\n")
}

// twoVolumes lists the claims whose claimRef the binder wrote into two different volumes.
func (f *fleet) twoVolumes() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for uid, ws := range f.claimRefWrites {
		vols := map[string]bool{}
		for _, w := range ws {
			vols[w[strings.Index(w, ":")+1:]] = true
		}
		if len(vols) > 1 {
			out = append(out, fmt.Sprintf("claim uid %s: %v", uid, ws))
		}
	}
	sort.Strings(out)
	return out
}

func (f *fleet) summary() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ops []string
	total := 0
	for op, n := range f.ops {
		ops = append(ops, fmt.Sprintf("%s=%d", op, n))
		total += n
	}
	sort.Strings(ops)
	return fmt.Sprintf("in-process kills: %d at a random write, %d at a random moment (%d of them replicas that had written, i.e. leaders); %d successive in-process leaders wrote; injected conflicts: %d; write attempts passed on to the apiserver: %d (%s); SIGKILLs: %s",
		f.writeKills.Load(), f.timerKills.Load(), f.leaderKills.Load(), f.leaders, f.conflicts.Load(), total, strings.Join(ops, " "), strings.Join(f.sigkills, "; "))
}
