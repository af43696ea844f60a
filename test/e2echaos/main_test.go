package e2echaos

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/internal/cli"
	"github.com/pvguard/pvguard/internal/devcluster"
	"github.com/pvguard/pvguard/test/harness"
)

// seeder is exempt from every rule: it plants the pairs pvguard would refuse at admission, as
// clusters have from before pvguard was installed.
const seeder = "e2e-chaos-seeder"

// grantAnnotation is policy's default grant annotation for volume-grab (docs/rules.md).
const grantAnnotation = "pvguard.io/allowed-namespaces"

// The suite tightens volume-grab to deny, so that one more deny rule (one that Satisfies-style
// matching does not cover, only policy does) guards the planted pairs.
const policyConfig = `
exemptions:
  users: [e2e-chaos-seeder]
rules:
  volume-grab: {action: deny}
`

func TestMain(m *testing.M) {
	// The real `pvguard serve` processes the chaos tests SIGKILL are this binary re-executed.
	harness.RunChildIfAsked(cli.NewRootCommand)
	code := m.Run()
	stopCluster()
	os.Exit(code)
}

// The control plane starts on the first test that needs it, so the checker's unit tests run
// without one.
var (
	clusterOnce sync.Once
	clusterErr  error
	h           *harness.Harness
	webhooks    *harness.Instance
)

func cluster(t *testing.T) *harness.Harness {
	t.Helper()
	clusterOnce.Do(func() { clusterErr = startCluster() })
	if clusterErr != nil {
		t.Fatalf("starting the control plane: %v", clusterErr)
	}
	return h
}

func startCluster() error {
	var err error
	if h, err = harness.Start(policyConfig); err != nil {
		return err
	}
	// The webhooks run for the whole suite; binders come and go.
	if webhooks, err = h.Serve(func(o *cli.ServeFlags) { o.Audit.Interval, o.LeaderElection.Elect = 0, false }); err != nil {
		return err
	}
	if err := h.InstallWebhooks(webhooks); err != nil {
		return err
	}
	c, err := devcluster.NewClient(h.Config, nil, "")
	if err != nil {
		return err
	}
	return c.Create(context.Background(), &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: seeder},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: seeder}},
	})
}

func stopCluster() {
	if webhooks != nil {
		_ = webhooks.Stop()
	}
	if h != nil {
		_ = h.Stop()
	}
}

// config sizes a run; every field comes from the environment variable named in loadConfig.
type config struct {
	Seed            uint64
	Claims, Volumes int
	Kills, SIGKILLs int
	ConflictRate    float64
	PokeInterval    time.Duration
	Lag             time.Duration
	Settle          time.Duration
	QPS             float32
}

func loadConfig(t *testing.T) config {
	t.Helper()
	c := config{
		Seed:   uint64(time.Now().UnixNano()),
		Claims: 200, Volumes: 120, Kills: 20, SIGKILLs: 2,
		ConflictRate: 0.05, PokeInterval: 20 * time.Millisecond,
		Lag: 5 * time.Second, Settle: 2 * time.Minute, QPS: 100,
	}
	harness.ReadKnobs(t,
		harness.EnvKnob("CHAOS_SEED", &c.Seed),
		harness.EnvKnob("CHAOS_CLAIMS", &c.Claims),
		harness.EnvKnob("CHAOS_VOLUMES", &c.Volumes),
		harness.EnvKnob("CHAOS_KILLS", &c.Kills),
		harness.EnvKnob("CHAOS_SIGKILLS", &c.SIGKILLs),
		harness.EnvKnob("CHAOS_CONFLICT_RATE", &c.ConflictRate),
		harness.EnvKnob("CHAOS_POKE_INTERVAL", &c.PokeInterval),
		harness.EnvKnob("CHAOS_LAG", &c.Lag),
		harness.EnvKnob("CHAOS_SETTLE", &c.Settle),
		harness.EnvKnob("CHAOS_QPS", &c.QPS),
	)
	if c.Claims < 50 || c.Volumes < 30 {
		t.Fatalf("CHAOS_CLAIMS must be at least 50 and CHAOS_VOLUMES at least 30 (the planted pairs need room)")
	}
	t.Logf("seed %d; repeat with: CHAOS_SEED=%d CHAOS_CLAIMS=%d CHAOS_VOLUMES=%d CHAOS_KILLS=%d CHAOS_SIGKILLS=%d CHAOS_CONFLICT_RATE=%v CHAOS_LAG=%v go test ./test/e2echaos/ -count=1 -v -run '%s$'",
		c.Seed, c.Seed, c.Claims, c.Volumes, c.Kills, c.SIGKILLs, c.ConflictRate, c.Lag, t.Name())
	return c
}

// lockedRand is a seeded generator safe for the hooks that binder workers call in parallel.
type lockedRand struct {
	mu sync.Mutex
	r  *rand.Rand
}

func newRand(seed, stream uint64) *lockedRand {
	return &lockedRand{r: rand.New(rand.NewPCG(seed, stream))}
}

func (l *lockedRand) Float64() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.Float64()
}

func (l *lockedRand) IntN(n int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.IntN(n)
}

// Between returns a duration in [lo, hi).
func (l *lockedRand) Between(lo, hi time.Duration) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return lo + time.Duration(l.r.Int64N(int64(hi-lo)))
}

func (l *lockedRand) Perm(n int) []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.Perm(n)
}

func admin(t *testing.T) client.Client { return cluster(t).Client(t, "") }
func seed(t *testing.T) client.Client  { return cluster(t).Client(t, seeder) }

// protector acts as kube-controller-manager's pvc-protection controller.
func protector(t *testing.T) client.Client { return cluster(t).PVCProtector(t) }

// liveClaim reads a claim from the apiserver; nil when it does not exist.
func liveClaim(c client.Reader) func(ns, name string) (*corev1.PersistentVolumeClaim, error) {
	return func(ns, name string) (*corev1.PersistentVolumeClaim, error) {
		pvc := &corev1.PersistentVolumeClaim{}
		err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, pvc)
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return pvc, err
	}
}

// startMonitor feeds every volume and claim change the apiserver reports to a Monitor until the
// test ends.
func startMonitor(t *testing.T, inScope func(ns, name string) bool) *Monitor {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cluster(t).Config)
	harness.Must(t, err, "clientset")
	m := &Monitor{Lookup: liveClaim(admin(t)), InScope: inScope}
	f := informers.NewSharedInformerFactory(cs, 0)
	pvInf, pvcInf := f.Core().V1().PersistentVolumes().Informer(), f.Core().V1().PersistentVolumeClaims().Informer()
	_, err = pvInf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { m.VolumeChanged(nil, o.(*corev1.PersistentVolume)) },
		UpdateFunc: func(o, n any) { m.VolumeChanged(o.(*corev1.PersistentVolume), n.(*corev1.PersistentVolume)) },
		DeleteFunc: func(o any) {
			if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			if pv, ok := o.(*corev1.PersistentVolume); ok {
				m.VolumeDeleted(pv)
			}
		},
	})
	harness.Must(t, err, "volume handler")
	_, err = pvcInf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { m.ClaimChanged(nil, o.(*corev1.PersistentVolumeClaim)) },
		UpdateFunc: func(o, n any) { m.ClaimChanged(o.(*corev1.PersistentVolumeClaim), n.(*corev1.PersistentVolumeClaim)) },
	})
	harness.Must(t, err, "claim handler")
	stop := make(chan struct{})
	f.Start(stop)
	t.Cleanup(func() { close(stop); f.Shutdown() })
	for typ, ok := range f.WaitForCacheSync(stop) {
		if !ok {
			t.Fatalf("monitor informer for %v did not sync", typ)
		}
	}
	return m
}

// readState lists the volumes and claims in scope, and every node, live.
func readState(t *testing.T, namespaces []string, volumePrefix string) (State, error) {
	t.Helper()
	ctx := context.Background()
	c := admin(t)
	var s State
	var pvs corev1.PersistentVolumeList
	if err := c.List(ctx, &pvs); err != nil {
		return s, err
	}
	for _, pv := range pvs.Items {
		if strings.HasPrefix(pv.Name, volumePrefix) {
			s.PVs = append(s.PVs, pv)
		}
	}
	for _, ns := range namespaces {
		var pvcs corev1.PersistentVolumeClaimList
		if err := c.List(ctx, &pvcs, client.InNamespace(ns)); err != nil {
			return s, err
		}
		s.PVCs = append(s.PVCs, pvcs.Items...)
	}
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes); err != nil {
		return s, err
	}
	s.Nodes = nodes.Items
	return s, nil
}

// settle polls the checker until the state has no violation, and returns the last state and
// violations (empty on success).
func settle(t *testing.T, timeout time.Duration, namespaces []string, volumePrefix string, in func() Intent) (State, []Violation) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		s, err := readState(t, namespaces, volumePrefix)
		if err != nil {
			if time.Now().After(deadline) {
				t.Fatalf("reading state: %v", err)
			}
			time.Sleep(time.Second)
			continue
		}
		v := Check(s, in())
		if len(v) == 0 || time.Now().After(deadline) {
			return s, v
		}
		time.Sleep(2 * time.Second)
	}
}

func reportViolations(t *testing.T, what string, vs []Violation) {
	t.Helper()
	const maxShown = 60
	for i, v := range vs {
		if i == maxShown {
			t.Errorf("... and %d more %s violations", len(vs)-maxShown, what)
			break
		}
		t.Errorf("%s: %s", what, v)
	}
}

var errKilled = errors.New("binder killed by the chaos test")
