package e2echaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/test/harness"
	"github.com/pvguard/pvguard/test/testobj"
)

// A binder leader that stops without dying, for longer than its Lease: frozen (SIGSTOP), or cut
// off by a link that stalls. The other replica takes the Lease and binds; then the old leader
// comes back with the view it had. Whatever it writes after the takeover was decided on that
// stale view, so it may write only what was already on its way when it stopped: at most one
// write per binder worker.
//
// Two real `pvguard serve --binder=active --leader-elect` processes (6 s Lease, 4 s renew
// deadline, 1 s retry period), each reaching the apiserver through a recordingProxy of its own
// that timestamps the writes it forwards. No kube-controller-manager runs, so only pvguard binds.
// A pool of claims and fitting volumes arrives in batches, so binding goes on throughout.
//
// Measured: the old leader's writes the proxy forwarded at or after the new leader's
// acquireTime (Leases and Events aside); a LinkWatch over the whole run (claims held by two
// volumes, volumes claimed by two claims, claims Lost); the existing Monitor; and, once
// everything has arrived, the checker over the settled state (every claim a free volume fits is
// bound, within the settle time).

// freezeConfig sizes a run; each field comes from the environment variable named in
// loadFreezeConfig.
type freezeConfig struct {
	Seed          uint64
	Claims, Batch int
	Spare         int           // volumes beyond one per claim
	Every         time.Duration // between two batches
	Before        int           // bindings the leader makes before it is stopped
	For           time.Duration // the least time it stays stopped
	After         int           // bindings the new leader makes before the old one comes back
	Workers       int
	QPS           float32
	Settle        time.Duration
}

func loadFreezeConfig(t *testing.T) freezeConfig {
	t.Helper()
	c := freezeConfig{Seed: uint64(time.Now().UnixNano()), Claims: 300, Spare: 60, Batch: 20, Every: 1500 * time.Millisecond, Before: 40, For: 10 * time.Second,
		After: 60, Workers: 4, QPS: 100, Settle: time.Minute}
	harness.ReadKnobs(t,
		harness.EnvKnob("FREEZE_SEED", &c.Seed),
		harness.EnvKnob("FREEZE_CLAIMS", &c.Claims),
		harness.EnvKnob("FREEZE_SPARE", &c.Spare),
		harness.EnvKnob("FREEZE_BATCH", &c.Batch),
		harness.EnvKnob("FREEZE_EVERY", &c.Every),
		harness.EnvKnob("FREEZE_BEFORE", &c.Before),
		harness.EnvKnob("FREEZE_FOR", &c.For),
		harness.EnvKnob("FREEZE_AFTER", &c.After),
		harness.EnvKnob("FREEZE_WORKERS", &c.Workers),
		harness.EnvKnob("FREEZE_SETTLE", &c.Settle),
		harness.EnvKnob("FREEZE_QPS", &c.QPS),
	)
	if c.For <= freezeLeaseDuration {
		t.Fatalf("FREEZE_FOR=%v must exceed the Lease (%v)", c.For, freezeLeaseDuration)
	}
	if c.Workers < 1 || c.Batch < 1 || c.Claims < c.Batch {
		t.Fatalf("FREEZE_WORKERS and FREEZE_BATCH must be positive and FREEZE_CLAIMS at least FREEZE_BATCH")
	}
	t.Logf("repeat with: FREEZE_SEED=%d FREEZE_CLAIMS=%d FREEZE_SPARE=%d FREEZE_BATCH=%d FREEZE_EVERY=%v FREEZE_BEFORE=%d FREEZE_FOR=%v FREEZE_AFTER=%d FREEZE_WORKERS=%d FREEZE_QPS=%v go test ./test/e2echaos/ -count=1 -v -run '%s$'",
		c.Seed, c.Claims, c.Spare, c.Batch, c.Every, c.Before, c.For, c.After, c.Workers, c.QPS, t.Name())
	return c
}

// The replicas' Lease timings, passed as flags.
const (
	freezeLeaseDuration = 6 * time.Second
	freezeRenewDeadline = 4 * time.Second
	freezeRetryPeriod   = time.Second
)

// fault is how the leader is stopped and brought back.
type fault struct {
	name        string
	stop, start func(t *testing.T, r *freezeReplica)
}

var (
	faultSIGSTOP = fault{
		name:  "SIGSTOP",
		stop:  func(t *testing.T, r *freezeReplica) { signal(t, r, syscall.SIGSTOP) },
		start: func(t *testing.T, r *freezeReplica) { signal(t, r, syscall.SIGCONT) },
	}
	faultStall = fault{
		name:  "stalled link",
		stop:  func(_ *testing.T, r *freezeReplica) { r.proxy.stall() },
		start: func(_ *testing.T, r *freezeReplica) { r.proxy.release() },
	}
)

func signal(t *testing.T, r *freezeReplica, sig syscall.Signal) {
	t.Helper()
	if err := r.proc.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("%v to replica %s: %v", sig, r.name, err)
	}
}

// TestLeaderFrozenPastLease: the leader is stopped with SIGSTOP mid-binding for longer than its
// Lease, and continued with SIGCONT once the other replica holds the Lease and binds.
func TestLeaderFrozenPastLease(t *testing.T) { runLeaderFault(t, faultSIGSTOP) }

// TestLeaderLinkStalledPastLease: the leader's link to the apiserver stalls mid-binding for
// longer than its Lease (its proxy forwards nothing either way), and recovers once the other
// replica holds the Lease and binds; what it held is then delivered.
func TestLeaderLinkStalledPastLease(t *testing.T) { runLeaderFault(t, faultStall) }

type freezeReplica struct {
	name  string
	proxy *recordingProxy
	proc  *process
}

func runLeaderFault(t *testing.T, f fault) {
	start := time.Now()
	cfg := loadFreezeConfig(t)
	cluster(t)
	p := newPool(t, cfg.Seed, cfg.Claims, cfg.Spare)
	mon := startMonitor(t, p.inScope)
	lw := startLinkWatch(t, p.inScope)
	leaseName := p.ns + "-binder"
	lease := watchLease(t, leaseName)

	var replicas []*freezeReplica
	for _, name := range []string{"a", "b"} {
		px := newRecordingProxy(t, name)
		proc := startProcess(t, processOptions{name: name, kubeconfig: px.kubeconfig, lease: leaseName,
			leaseDuration: freezeLeaseDuration, renewDeadline: freezeRenewDeadline, retryPeriod: freezeRetryPeriod,
			qps: cfg.QPS, workers: cfg.Workers})
		replicas = append(replicas, &freezeReplica{name: name, proxy: px, proc: proc})
	}
	byIdentity := func(id string) *freezeReplica {
		for _, r := range replicas {
			if id != "" && r.proxy.Identity() == id {
				return r
			}
		}
		return nil
	}
	var leader *freezeReplica
	harness.WaitFor(t, time.Minute, "a replica holding the Lease", func(context.Context) (bool, error) {
		for _, r := range replicas {
			select {
			case <-r.proc.exited:
				return false, fmt.Errorf("replica %s exited:\n%s", r.name, r.proc.tail())
			default:
			}
		}
		leader = byIdentity(lease.Holder())
		return leader != nil, nil
	})
	other := replicas[0]
	if other == leader {
		other = replicas[1]
	}
	oldID := leader.proxy.Identity()
	select {
	case <-leader.proc.started:
	case <-time.After(time.Minute):
		t.Fatalf("replica %s holds the Lease but its binder did not start:\n%s", leader.name, leader.proc.tail())
	}
	t.Logf("replica %s leads (%s); %d claims and %d volumes arrive in %d batches every %v",
		leader.name, oldID, cfg.Claims, cfg.Claims+cfg.Spare, (cfg.Claims+cfg.Batch-1)/cfg.Batch, cfg.Every)

	ctx, cancel := context.WithCancel(context.Background())
	created, batches := make(chan struct{}), make(chan int, 100)
	go func() { defer close(created); p.createBatches(ctx, t, cfg.Batch, cfg.Every, batches) }()
	defer func() { cancel(); <-created }()

	select {
	case <-leader.proc.boundN(cfg.Before):
	case <-leader.proc.exited:
		t.Fatalf("replica %s exited:\n%s", leader.name, leader.proc.tail())
	case <-time.After(time.Minute):
		t.Fatalf("replica %s made %d bindings in a minute, not %d", leader.name, leader.proc.bound.Load(), cfg.Before)
	}
	// Mid-binding: a moment after the next batch of claims has arrived, while the leader binds it.
	var batch int
	for drained := false; !drained; {
		select {
		case <-batches:
		default:
			drained = true
		}
	}
	select {
	case batch = <-batches:
	case <-created:
		t.Fatalf("every batch arrived before replica %s made %d bindings: make FREEZE_BEFORE smaller", leader.name, cfg.Before)
	}
	time.Sleep(200 * time.Millisecond)
	stoppedAt := time.Now()
	f.stop(t, leader)
	t.Logf("%s: replica %s stopped after %d bindings, 200ms after batch %d arrived, at %s", f.name, leader.name, leader.proc.bound.Load(), batch, stoppedAt.Format("15:04:05.000"))

	var takeover leaseChange
	var boundAtTakeover int64 = -1
	harness.WaitFor(t, time.Minute, fmt.Sprintf("replica %s taking the Lease and making %d bindings", other.name, cfg.After), func(context.Context) (bool, error) {
		if boundAtTakeover < 0 {
			c, ok := lease.TakeoverFrom(oldID)
			if !ok {
				return false, nil
			}
			takeover, boundAtTakeover = c, other.proc.bound.Load()
		}
		return time.Since(stoppedAt) >= cfg.For && other.proc.bound.Load() >= boundAtTakeover+int64(cfg.After), nil
	})
	if byIdentity(takeover.Holder) != other {
		t.Fatalf("the Lease went to %q, not to replica %s (%q)", takeover.Holder, other.name, other.proxy.Identity())
	}
	resumedAt := time.Now()
	f.start(t, leader)
	t.Logf("%s: replica %s took the Lease (acquireTime %s, %v after the stop, seen %v later); replica %s back at %s, %v after the stop",
		f.name, other.name, takeover.Acquired.Format("15:04:05.000"), takeover.Acquired.Sub(stoppedAt).Round(time.Millisecond),
		takeover.Seen.Sub(takeover.Acquired).Round(time.Millisecond), leader.name, resumedAt.Format("15:04:05.000"),
		resumedAt.Sub(stoppedAt).Round(time.Millisecond))

	select {
	case <-leader.proc.exited:
		t.Logf("replica %s exited (it lost the Lease) before it came back", leader.name)
	default:
		select {
		case <-leader.proc.exited:
			t.Logf("replica %s exited (it lost the Lease) at most %v after it came back", leader.name, time.Since(resumedAt).Round(time.Millisecond))
		case <-time.After(freezeLeaseDuration + 10*time.Second):
			t.Logf("replica %s still runs %v after it came back", leader.name, time.Since(resumedAt).Round(time.Second))
		}
	}
	<-created
	allCreated := time.Now()
	s, violations := settle(t, cfg.Settle, []string{p.ns}, p.prefix, p.Intent)
	settled := time.Since(allCreated)

	// The old leader's writes after the takeover.
	var late []proxiedWrite
	sentDuring, heldDuring := 0, 0
	for _, w := range leader.proxy.Writes() {
		if w.Resource == "leases" || w.Resource == "events" {
			continue
		}
		if !w.Received.Before(stoppedAt) && w.Received.Before(resumedAt) {
			sentDuring++
		}
		if w.Held {
			heldDuring++
		}
		if !w.Forwarded.Before(takeover.Acquired) {
			late = append(late, w)
		}
	}
	t.Logf("%d writes of replica %s reached its proxy while it was stopped; the proxy held %d on the stalled link (request or answer)", sentDuring, leader.name, heldDuring)
	codes, kinds := map[int]int{}, map[string]int{}
	for _, w := range late {
		codes[w.Code]++
		kinds[w.Method+" "+strings.SplitN(w.Object, "/", 2)[0]+subresource(w.Object)]++
	}
	for i, w := range late {
		t.Logf("late write %d: +%v after the takeover: %s", i+1, w.Forwarded.Sub(takeover.Acquired).Round(time.Millisecond), w.String())
	}
	lateSummary := fmt.Sprintf("%d writes (answers %s; %s)", len(late), countsOf(codes), countsOf(kinds))
	if len(late) > 0 {
		lateSummary += fmt.Sprintf(", forwarded from +%v to +%v after the takeover",
			late[0].Forwarded.Sub(takeover.Acquired).Round(time.Millisecond), late[len(late)-1].Forwarded.Sub(takeover.Acquired).Round(time.Millisecond))
	}

	sightings, events := lw.Sightings()
	byInv := map[string]int{}
	for _, sg := range sightings {
		byInv[sg.Invariant]++
	}
	bound := 0
	for _, pvc := range s.PVCs {
		if pvc.Status.Phase == corev1.ClaimBound {
			bound++
		}
	}
	in := p.Intent()
	t.Logf("%s summary: old leader %s after the takeover: %s; the watch judged %d changes and saw %d double claims, %d Lost claims; monitor violations %d; final state violations %d (%d of %d claims bound, an ideal assignment binds %d; settled %v after the last object arrived); test time %v",
		f.name, leader.name, lateSummary, events, byInv[InvDoubleClaim], byInv[InvLost], len(mon.Violations()), len(violations),
		bound, len(s.PVCs), Bindable(s, in), settled.Round(100*time.Millisecond), time.Since(start).Round(time.Second))

	if len(late) > cfg.Workers {
		t.Errorf("%s: replica %s, stopped %v (Lease %v), sent %s; replica %s had acquired the Lease at %s; want at most %d (--binder-workers: the writes already on their way when it stopped)",
			f.name, leader.name, resumedAt.Sub(stoppedAt).Round(time.Millisecond), freezeLeaseDuration, lateSummary, other.name,
			takeover.Acquired.Format("15:04:05.000"), cfg.Workers)
	}
	for _, sg := range sightings {
		t.Errorf("during the run: %s", sg)
	}
	// Not failures: a volume holding a claim's uid while not Bound is the first bind write, or a
	// rollback; LinkViolations counts it only once Bound.
	for _, d := range mon.Doubles() {
		t.Logf("note: a claim's uid in two volumes' claimRef at once: %s", d)
	}
	reportViolations(t, "monitor", mon.Violations())
	reportViolations(t, fmt.Sprintf("final state (%v after the last object arrived)", cfg.Settle), violations)
}

func subresource(object string) string {
	if strings.HasSuffix(object, "/status") {
		return "/status"
	}
	return ""
}

func countsOf[K comparable](m map[K]int) string {
	var out []string
	for k, n := range m {
		out = append(out, fmt.Sprintf("%v: %d", k, n))
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// pool is claims and fitting volumes of one class in a namespace of its own: claims of 1, 2 or 4
// Gi at random, a volume of each claim's size in the same batch, created before the claims, and
// spare volumes of random sizes spread over the batches. A claim fits every volume at least its
// size, so which volume a binder gives it depends on what it sees pending and free: two binders
// with different views choose differently.
type pool struct {
	ns, class, prefix string
	pvs               []*corev1.PersistentVolume
	pvcs              []*corev1.PersistentVolumeClaim

	mu     sync.Mutex
	intent Intent
}

func newPool(t *testing.T, seed uint64, n, spare int) *pool {
	t.Helper()
	ns := harness.Namespace(t, admin(t), "")
	p := &pool{ns: ns, class: ns + "-pool", prefix: ns + "-pv-", intent: Intent{
		PreboundVolumes: map[string]ClaimKey{}, NamedVolumes: map[ClaimKey]string{},
		Volumes: map[string]bool{}, Claims: map[ClaimKey]bool{}, Finalizers: map[string][]string{},
		GrabDenied: true, GrantAnnotation: grantAnnotation,
	}}
	c := admin(t)
	harness.Must(t, c.Create(context.Background(), testobj.StorageClass(p.class, "kubernetes.io/no-provisioner")), "creating the class")
	t.Cleanup(func() { _ = c.Delete(context.Background(), testobj.StorageClass(p.class, "")) })
	r := rand.New(rand.NewPCG(seed, 6))
	sizes := make([]string, n+spare)
	for i := range sizes {
		sizes[i] = []string{"1Gi", "2Gi", "4Gi"}[r.IntN(3)]
	}
	for i := range n {
		p.pvcs = append(p.pvcs, harness.FreshPVC(testobj.PVC(ns, fmt.Sprintf("c-%03d", i), testobj.ClaimClass(p.class), testobj.Request(sizes[i]))))
	}
	// Volume names do not follow the claims': a volume's batch is the claim's (or a spare's),
	// its name a random number.
	names := r.Perm(n + spare)
	for i := range n + spare {
		pv := testobj.PV(fmt.Sprintf("%s%03d", p.prefix, names[i]), testobj.Class(p.class), testobj.Capacity(sizes[i]))
		pv.Status = corev1.PersistentVolumeStatus{}
		p.pvs = append(p.pvs, pv)
	}
	return p
}

func (p *pool) inScope(ns, name string) bool {
	if ns == "" {
		return strings.HasPrefix(name, p.prefix)
	}
	return ns == p.ns
}

// createBatches creates the pool batch by batch, each batch's volumes first, with four clients.
// Each batch's number is sent on done (if there is room) once its claims exist.
func (p *pool) createBatches(ctx context.Context, t *testing.T, batch int, every time.Duration, done chan<- int) {
	c := admin(t)
	tick := time.NewTicker(every)
	defer tick.Stop()
	n := len(p.pvcs)
	for lo := 0; lo < n; lo += batch {
		hi := min(lo+batch, n)
		vlo, vhi := lo*len(p.pvs)/n, hi*len(p.pvs)/n
		for _, objs := range [][]client.Object{toObjects(p.pvs[vlo:vhi]), toObjects(p.pvcs[lo:hi])} {
			var wg sync.WaitGroup
			work := make(chan client.Object)
			for range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for obj := range work {
						p.create(ctx, t, c, obj)
					}
				}()
			}
			for _, obj := range objs {
				work <- obj
			}
			close(work)
			wg.Wait()
		}
		select {
		case done <- lo/batch + 1:
		default:
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func toObjects[T client.Object](objs []T) []client.Object {
	out := make([]client.Object, len(objs))
	for i, o := range objs {
		out[i] = o
	}
	return out
}

func (p *pool) create(ctx context.Context, t *testing.T, c client.Client, obj client.Object) {
	obj = obj.DeepCopyObject().(client.Object)
	if err := c.Create(ctx, obj); err != nil {
		if ctx.Err() == nil {
			t.Errorf("creating %T %s: %v", obj, obj.GetName(), err)
		}
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch o := obj.(type) {
	case *corev1.PersistentVolume:
		p.intent.Volumes[o.Name] = true
		// The checker requires the protection finalizers where the apiserver's admission adds
		// them (StorageObjectInUseProtection, on by default).
		p.intent.ProtectionFinalizers = has(o.Finalizers, finalizerPV)
	case *corev1.PersistentVolumeClaim:
		p.intent.Claims[keyOf(o)] = true
	}
}

// Intent returns a copy of what the pool's creator did so far.
func (p *pool) Intent() Intent {
	p.mu.Lock()
	defer p.mu.Unlock()
	in := p.intent
	in.Volumes, in.Claims = cloneSet(in.Volumes), cloneSet(in.Claims)
	return in
}

func cloneSet[K comparable](m map[K]bool) map[K]bool {
	out := make(map[K]bool, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// startLinkWatch feeds every volume and claim change to a LinkWatch until the test ends.
func startLinkWatch(t *testing.T, inScope func(ns, name string) bool) *LinkWatch {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cluster(t).Config)
	harness.Must(t, err, "clientset")
	w := &LinkWatch{InScope: inScope}
	f := informers.NewSharedInformerFactory(cs, 0)
	deleted := func(o any) any {
		if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
			return d.Obj
		}
		return o
	}
	_, err = f.Core().V1().PersistentVolumes().Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { w.Volume(o.(*corev1.PersistentVolume), false) },
		UpdateFunc: func(_, n any) { w.Volume(n.(*corev1.PersistentVolume), false) },
		DeleteFunc: func(o any) {
			if pv, ok := deleted(o).(*corev1.PersistentVolume); ok {
				w.Volume(pv, true)
			}
		},
	})
	harness.Must(t, err, "volume handler")
	_, err = f.Core().V1().PersistentVolumeClaims().Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { w.Claim(o.(*corev1.PersistentVolumeClaim), false) },
		UpdateFunc: func(_, n any) { w.Claim(n.(*corev1.PersistentVolumeClaim), false) },
		DeleteFunc: func(o any) {
			if pvc, ok := deleted(o).(*corev1.PersistentVolumeClaim); ok {
				w.Claim(pvc, true)
			}
		},
	})
	harness.Must(t, err, "claim handler")
	stop := make(chan struct{})
	f.Start(stop)
	t.Cleanup(func() { close(stop); f.Shutdown() })
	for typ, ok := range f.WaitForCacheSync(stop) {
		if !ok {
			t.Fatalf("link watch informer for %v did not sync", typ)
		}
	}
	return w
}

// leaseChange is one holder of the Lease as the watch saw it.
type leaseChange struct {
	Holder   string
	Acquired time.Time // the Lease's acquireTime
	Seen     time.Time
}

// leaseWatch follows one Lease in kube-system.
type leaseWatch struct {
	mu      sync.Mutex
	changes []leaseChange
}

func watchLease(t *testing.T, name string) *leaseWatch {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cluster(t).Config)
	harness.Must(t, err, "clientset")
	l := &leaseWatch{}
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace("kube-system"),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		}))
	record := func(o any) {
		lease, ok := o.(*coordinationv1.Lease)
		if !ok || lease.Spec.HolderIdentity == nil {
			return
		}
		c := leaseChange{Holder: *lease.Spec.HolderIdentity, Seen: time.Now()}
		if lease.Spec.AcquireTime != nil {
			c.Acquired = lease.Spec.AcquireTime.Time
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		if n := len(l.changes); n == 0 || l.changes[n-1].Holder != c.Holder || !l.changes[n-1].Acquired.Equal(c.Acquired) {
			l.changes = append(l.changes, c)
		}
	}
	_, err = f.Coordination().V1().Leases().Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    record,
		UpdateFunc: func(_, n any) { record(n) },
	})
	harness.Must(t, err, "lease handler")
	stop := make(chan struct{})
	f.Start(stop)
	t.Cleanup(func() { close(stop); f.Shutdown() })
	f.WaitForCacheSync(stop)
	return l
}

// Holder is the Lease's holder now ("" when nobody holds it).
func (l *leaseWatch) Holder() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.changes) == 0 {
		return ""
	}
	return l.changes[len(l.changes)-1].Holder
}

// TakeoverFrom returns the first holder after id that is someone else.
func (l *leaseWatch) TakeoverFrom(id string) (leaseChange, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	held := false
	for _, c := range l.changes {
		switch {
		case c.Holder == id:
			held = true
		case held && c.Holder != "":
			return c, true
		}
	}
	return leaseChange{}, false
}
