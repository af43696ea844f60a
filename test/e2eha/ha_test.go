// Package e2eha tests pvguard as the chart runs it: two replicas behind one Service, with
// self-managed certificates, on a real kube-apiserver. Reviews flow the whole time; none may fail
// while a replica stops gracefully, while the replicas are replaced by rolling restarts, or while
// the certificates rotate. With both replicas down, failurePolicy Fail must refuse storage writes
// (and Ignore must let the audit catch up afterwards); the read endpoints must refuse writes.
package e2eha

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/certs"
	"github.com/pvguard/pvguard/internal/cli"
	"github.com/pvguard/pvguard/internal/devcluster"
	"github.com/pvguard/pvguard/test/harness"
)

const namespace = "pvguard-system"

var h *harness.Harness

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	var err error
	if h, err = harness.Start("{}\n"); err != nil {
		fmt.Fprintln(os.Stderr, "e2eha:", err)
		return 1
	}
	defer func() { _ = h.Stop() }()
	c, err := client.New(h.Config, client.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2eha:", err)
		return 1
	}
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		fmt.Fprintln(os.Stderr, "e2eha:", err)
		return 1
	}
	return m.Run()
}

// replicas starts n pvguard replicas with self-managed certificates in Secret secret, behind a
// balancer, and points the webhook configurations at the balancer with no caBundle: the
// elected replica must fill it in before any review can pass.
func replicas(t *testing.T, n int, secret string, mutate func(*cli.ServeFlags)) (*harness.Balancer, []*harness.Instance) {
	t.Helper()
	lb, err := harness.NewBalancer(100 * time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lb.Close)
	var insts []*harness.Instance
	for range n {
		insts = append(insts, startReplica(t, lb, secret, mutate))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := devcluster.InstallWebhooks(ctx, h.Config, devcluster.WebhookOptions{BaseURL: "https://" + lb.Addr()}); err != nil {
		t.Fatalf("the webhook never worked through the balancer with self-managed certificates: %v", err)
	}
	return lb, insts
}

// startReplica starts one replica as replicas does and puts it behind lb; a rolling update
// starts its new pods the same way. It is stopped when the test ends, if not before.
func startReplica(t *testing.T, lb *harness.Balancer, secret string, mutate func(*cli.ServeFlags)) *harness.Instance {
	t.Helper()
	inst, err := h.Serve(func(o *cli.ServeFlags) {
		o.Certs.Dir, o.Certs.Secret, o.Namespace = "", secret, namespace
		o.Certs.Hosts = []string{"127.0.0.1"}
		o.Certs.CheckInterval = time.Second
		o.LeaderElection.Elect, o.LeaderElection.ID = true, secret+"-leader"
		o.Audit.Interval = 0 // the certificates alone are elected work here
		o.ShutdownDelay = time.Second
		if mutate != nil {
			mutate(o)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = inst.Stop() })
	lb.Add(backend(inst))
	return inst
}

// backend is the balancer's name for an instance.
func backend(inst *harness.Instance) string { return strings.TrimPrefix(inst.BaseURL, "https://") }

// load sends reviews through the apiserver until stopped: dry-run creates of a volume pvguard
// must refuse (PVG014) and of a claim it must admit. Anything else is a failed review.
type load struct {
	reviews  atomic.Int64
	mu       sync.Mutex
	failures []string
	stop     chan struct{}
	wg       sync.WaitGroup
}

func startLoad(t *testing.T, workers int) *load {
	t.Helper()
	cfg := rest.CopyConfig(h.Config)
	cfg.QPS, cfg.Burst = 500, 1000
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l := &load{stop: make(chan struct{})}
	bad := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "ha-bad"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/ha"}},
			ClaimRef:               &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "default", Name: "x"},
		},
	}
	empty := ""
	good := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "ha-good"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: &empty,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	runWorkers(&l.wg, l.stop, workers, func(w, i int) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var err error
		var ok bool
		if (i+w)%2 == 0 {
			err = c.Create(ctx, bad.DeepCopy(), client.DryRunAll)
			ok = err != nil && strings.Contains(err.Error(), "[PVG014")
		} else {
			err = c.Create(ctx, good.DeepCopy(), client.DryRunAll)
			ok = err == nil
		}
		l.reviews.Add(1)
		if !ok {
			l.mu.Lock()
			l.failures = append(l.failures, fmt.Sprintf("%s: %v", time.Now().Format("15:04:05.000"), err))
			l.mu.Unlock()
		}
	})
	return l
}

// finish stops the load and fails the test if any review failed.
func (l *load) finish(t *testing.T) {
	t.Helper()
	close(l.stop)
	l.wg.Wait()
	t.Logf("%d reviews, %d failed", l.reviews.Load(), len(l.failures))
	if len(l.failures) > 0 {
		n := min(len(l.failures), 10)
		t.Fatalf("%d of %d reviews failed; first %d:\n%s", len(l.failures), l.reviews.Load(), n, strings.Join(l.failures[:n], "\n"))
	}
	if l.reviews.Load() < 50 {
		t.Fatalf("only %d reviews were sent: the test proves nothing", l.reviews.Load())
	}
}

// TestGracefulStopLosesNoReview stops one of two replicas while reviews flow: it turns
// not-ready, the balancer stops giving it connections, it drains what it has, and no review
// fails. Then the other one is stopped too, proving each had been serving.
func TestGracefulStopLosesNoReview(t *testing.T) {
	lb, insts := replicas(t, 2, "ha-stop-tls", nil)
	l := startLoad(t, 8)
	time.Sleep(3 * time.Second)
	if err := insts[0].Stop(); err != nil {
		t.Errorf("stopping replica 0: %v", err)
	}
	time.Sleep(3 * time.Second)
	l.finish(t)
	conns := lb.Connections()
	for _, inst := range insts {
		if conns[strings.TrimPrefix(inst.BaseURL, "https://")] == 0 {
			t.Errorf("replica %s never got a connection: %v", inst.BaseURL, conns)
		}
	}
}

// TestRotationWhileReviewsFlowLosesNone runs the certificates on short lifetimes so that, while
// reviews flow, the serving certificate is renewed and the CA is replaced (published, then
// switched to), and checks that no review fails.
func TestRotationWhileReviewsFlowLosesNone(t *testing.T) {
	const secret = "ha-rotate-tls"
	_, _ = replicas(t, 2, secret, func(o *cli.ServeFlags) {
		o.Certs.Validity, o.Certs.CAValidity, o.Certs.CAOverlap = 15*time.Second, 30*time.Second, 3*time.Second
	})
	c, err := client.New(h.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	signers, serving := map[string]bool{}, map[string]bool{}
	l := startLoad(t, 4)
	deadline := time.Now().Add(40 * time.Second)
	_ = wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, time.Until(deadline), true, func(ctx context.Context) (bool, error) {
		s := &corev1.Secret{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: secret}, s); err == nil {
			signers[string(s.Data[certs.SignerCertKey])] = true
			serving[string(s.Data[certs.CertFile])] = true
		}
		return false, nil
	})
	l.finish(t)
	if len(signers) < 2 || len(serving) < 3 {
		t.Fatalf("in 40s saw %d CAs and %d serving certificates: the rotation under test did not happen", len(signers), len(serving))
	}
	t.Logf("rotation: %d CAs and %d serving certificates while reviews flowed", len(signers), len(serving))
}
