package e2eha

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/certs"
	"github.com/pvguard/pvguard/test/harness"
	"github.com/pvguard/pvguard/test/testobj"
)

// storageUser is a normal user (not a cluster admin): a ClusterRole lets it read and write
// volumes and claims and nothing else, as a storage team's account would be set up. Its writes
// take the apiserver's full admission path, pvguard's webhooks included.
const storageUser = "ha-storage-user"

var storageRBAC sync.Once

// asStorageUser returns a client acting as storageUser, creating its RBAC on first use.
func asStorageUser(t *testing.T) client.Client {
	t.Helper()
	storageRBAC.Do(func() {
		ctx := context.Background()
		c := h.Client(t, "")
		role := &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: storageUser},
			Rules: []rbacv1.PolicyRule{{
				APIGroups: []string{""},
				Resources: []string{"persistentvolumes", "persistentvolumeclaims"},
				Verbs:     []string{"get", "list", "watch", "create", "update", "patch"},
			}},
		}
		binding := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: storageUser},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: storageUser},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: storageUser}},
		}
		for _, obj := range []client.Object{role, binding} {
			if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatalf("creating RBAC for %s: %v", storageUser, err)
			}
		}
	})
	cfg := rest.CopyConfig(h.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: storageUser, Groups: []string{"system:authenticated"}}
	cfg.QPS, cfg.Burst = 500, 1000
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// writeLoad sends real writes through the apiserver as storageUser until stopped. Each worker
// repeats five requests, each reviewed by pvguard: create a claim (admitted), update it
// (admitted), create a volume whose claimRef is not a claim (refused by PVG014), create a
// volume (admitted), update it (admitted). Any other outcome is a failed review.
type writeLoad struct {
	ns       string
	requests atomic.Int64
	// created counts the writes admitted and stored, to compare with what the apiserver holds.
	createdClaims, createdVolumes atomic.Int64

	mu        sync.Mutex
	failures  []string
	latencies []time.Duration
	started   time.Time
	elapsed   time.Duration

	stop chan struct{}
	wg   sync.WaitGroup
}

// loadLabel marks the volumes one load created, so they can be counted afterwards.
const loadLabel = "e2eha.pvguard.io/load"

func startWriteLoad(t *testing.T, c client.Client, ns string, workers int) *writeLoad {
	t.Helper()
	l := &writeLoad{ns: ns, stop: make(chan struct{}), started: time.Now()}
	runWorkers(&l.wg, l.stop, workers, func(w, i int) { l.iteration(c, w, i) })
	return l
}

// runWorkers calls iteration(w, i) in a loop on each of n goroutines (w the worker, i its
// iteration) until stop is closed; wg counts the goroutines.
func runWorkers(wg *sync.WaitGroup, stop <-chan struct{}, n int, iteration func(w, i int)) {
	for w := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				iteration(w, i)
			}
		}()
	}
}

// do sends one request, times it and checks its outcome.
func (l *writeLoad) do(what string, req func(ctx context.Context) error, ok func(error) bool) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	start := time.Now()
	err := req(ctx)
	took := time.Since(start)
	l.requests.Add(1)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.latencies = append(l.latencies, took)
	if !ok(err) {
		l.failures = append(l.failures, fmt.Sprintf("%s %s (after %v): %v", time.Now().Format("15:04:05.000"), what, took.Round(time.Millisecond), err))
		return false
	}
	return true
}

func admitted(err error) bool { return err == nil }

func refusedBy(rule string) func(error) bool {
	return func(err error) bool {
		return err != nil && strings.Contains(err.Error(), "denied the request") && strings.Contains(err.Error(), "["+rule+" ")
	}
}

func (l *writeLoad) iteration(c client.Client, w, i int) {
	name := fmt.Sprintf("%s-w%d-%d", l.ns, w, i)

	pvc := testobj.PVC(l.ns, name, testobj.ClaimMeta(testobj.Label(loadLabel, l.ns)))
	pvc.UID, pvc.Status = "", corev1.PersistentVolumeClaimStatus{}
	if l.do("create claim "+name, func(ctx context.Context) error { return c.Create(ctx, pvc) }, admitted) {
		l.createdClaims.Add(1)
		pvc.Labels["e2eha.pvguard.io/updated"] = "yes"
		l.do("update claim "+name, func(ctx context.Context) error { return c.Update(ctx, pvc) }, admitted)
	}

	bad := testobj.PV("bad-"+name, testobj.ClaimRef("default", "x", ""), testobj.PVMeta(testobj.Label(loadLabel, l.ns)))
	bad.Spec.ClaimRef.Kind = "Pod"
	bad.Status = corev1.PersistentVolumeStatus{}
	l.do("create refused volume bad-"+name, func(ctx context.Context) error { return c.Create(ctx, bad) }, refusedBy("PVG014"))

	pv := testobj.PV(name, testobj.PVMeta(testobj.Label(loadLabel, l.ns)))
	pv.Status = corev1.PersistentVolumeStatus{}
	if l.do("create volume "+name, func(ctx context.Context) error { return c.Create(ctx, pv) }, admitted) {
		l.createdVolumes.Add(1)
		pv.Labels["e2eha.pvguard.io/updated"] = "yes"
		l.do("update volume "+name, func(ctx context.Context) error { return c.Update(ctx, pv) }, admitted)
	}
}

// finish stops the load, logs its numbers and fails the test if any review failed, if too few
// were sent to mean anything, or if the apiserver holds other than what was admitted.
func (l *writeLoad) finish(t *testing.T) {
	t.Helper()
	close(l.stop)
	l.wg.Wait()
	l.elapsed = time.Since(l.started)
	n := l.requests.Load()
	l.mu.Lock()
	lat := slices.Clone(l.latencies)
	failures := slices.Clone(l.failures)
	l.mu.Unlock()
	slices.Sort(lat)
	pct := func(p float64) time.Duration {
		if len(lat) == 0 {
			return 0
		}
		return lat[min(len(lat)-1, int(p*float64(len(lat))))].Round(time.Millisecond)
	}
	t.Logf("writes: %d requests in %v (%.0f/s), %d failed; latency p50 %v, p99 %v, max %v",
		n, l.elapsed.Round(time.Millisecond), float64(n)/l.elapsed.Seconds(), len(failures), pct(0.5), pct(0.99), pct(1))
	if len(failures) > 0 {
		k := min(len(failures), 10)
		t.Errorf("%d of %d reviewed writes failed; first %d:\n%s", len(failures), n, k, strings.Join(failures[:k], "\n"))
	}
	if n < 100 {
		t.Errorf("only %d writes were sent: the test proves nothing", n)
	}

	// What was admitted is stored, and nothing refused is.
	ctx := context.Background()
	c := h.Client(t, "")
	var claims corev1.PersistentVolumeClaimList
	var volumes corev1.PersistentVolumeList
	if err := c.List(ctx, &claims, client.InNamespace(l.ns)); err != nil {
		t.Fatal(err)
	}
	if err := c.List(ctx, &volumes, client.MatchingLabels{loadLabel: l.ns}); err != nil {
		t.Fatal(err)
	}
	if got, want := int64(len(claims.Items)), l.createdClaims.Load(); got != want {
		t.Errorf("the namespace holds %d claims, but %d creates were admitted", got, want)
	}
	if got, want := int64(len(volumes.Items)), l.createdVolumes.Load(); got != want {
		t.Errorf("%d volumes carry the load's label, but %d creates were admitted", got, want)
	}
	for _, v := range volumes.Items {
		if strings.HasPrefix(v.Name, "bad-") {
			t.Errorf("volume %s was stored although pvguard refuses it", v.Name)
		}
	}
}

// replicaHTTP is an HTTP client trusting the CA of the self-managed Secret secret.
func replicaHTTP(t *testing.T, secret string) *http.Client {
	t.Helper()
	s := &corev1.Secret{}
	if err := h.Client(t, "").Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: secret}, s); err != nil {
		t.Fatalf("reading the certificate Secret: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(s.Data[certs.CAFile]) {
		t.Fatalf("Secret %s has no CA bundle", secret)
	}
	return readerClient(t, &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}})
}

// readerClient is hc presenting a cluster reader's token: the dashboard, the report and the
// explanations require one.
func readerClient(t *testing.T, hc *http.Client) *http.Client {
	t.Helper()
	token, err := harness.ClusterReaderToken(h.Config)
	if err != nil {
		t.Fatalf("getting a cluster reader's token: %v", err)
	}
	return harness.WithBearer(hc, token)
}

// reviewsServed sums pvguard_admission_reviews_total over its labels on one replica.
func reviewsServed(t *testing.T, hc *http.Client, inst *harness.Instance) float64 {
	t.Helper()
	n, err := harness.MetricSum(hc, inst.BaseURL, "pvguard_admission_reviews_total", nil)
	if err != nil {
		t.Error(err)
	}
	return n
}

// waitRouted waits until the balancer gives new connections to inst, as a Service does once a
// pod is ready.
func waitRouted(t *testing.T, lb *harness.Balancer, inst *harness.Instance) time.Duration {
	t.Helper()
	start := time.Now()
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return lb.Ready(backend(inst)), nil
	})
	if err != nil {
		t.Fatalf("replica %s never became ready behind the balancer", inst.BaseURL)
	}
	return time.Since(start)
}
