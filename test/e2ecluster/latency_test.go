package e2ecluster

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/pvguard/pvguard/test/cluster"
	"github.com/pvguard/pvguard/test/harness"
)

// TestBindLatency measures, for docs/benchmarks.md, how long a pod's claim takes to be Bound on
// a static local volume in each mode, in the same run: pods (PVGUARD_CLUSTER_LATENCY_PODS,
// default 30) are created one at a time at a steady pace (or all at once), each with its own claim, with a free
// volume for each; it logs the median and p95 of pod created -> claim Bound, of pod created ->
// the scheduler's claimRef seen on the volume, and of that claimRef -> claim Bound (the binder's
// share). It asserts only that every claim is bound: the timings are reported, never judged.
func TestBindLatency(t *testing.T) {
	pods := 30
	if v := os.Getenv("PVGUARD_CLUSTER_LATENCY_PODS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("PVGUARD_CLUSTER_LATENCY_PODS=%q: want a positive number", v)
		}
		pods = n
	}
	// PVGUARD_CLUSTER_LATENCY_BURST=1 creates the pods all at once instead, from parallel
	// clients: the latency then includes the queue of the scheduler, which places pods one at a
	// time.
	pace := 200 * time.Millisecond
	burst := os.Getenv("PVGUARD_CLUSTER_LATENCY_BURST") != ""
	how := fmt.Sprintf("one pod every %v", pace)
	if burst {
		how = "all pods at once"
	}
	// PVGUARD_CLUSTER_LATENCY_PROVISIONED=1 gives the claims a WaitForFirstConsumer class of the
	// CSI plugin and no static volumes: the scheduler sets selected-node, the real
	// external-provisioner creates each volume (its save is then the "claimRef" time) and the
	// binder completes the binding.
	provisioned := os.Getenv("PVGUARD_CLUSTER_LATENCY_PROVISIONED") != ""
	what := "static WaitForFirstConsumer volumes"
	if provisioned {
		what = "provisioned WaitForFirstConsumer volumes (the claimRef time is the provisioner's save)"
	}
	results := map[cluster.Mode]string{}
	forEachMode(t, func(t *testing.T, m cluster.Mode) *endState {
		var f *flow
		var cf *csiFlow
		class := "local-latency-" + string(m)
		if provisioned {
			cf = newCSIFlow(t, "latency", m)
			f = cf.flow
			class = "csi-latency-" + string(m)
			csiClass(t, class, storagev1.VolumeBindingWaitForFirstConsumer)
		} else {
			f = newFlow(t, "latency", m)
			localClass(t, class)
			var pvs []*corev1.PersistentVolume
			for i := range pods {
				n := cl.Nodes[i%len(cl.Nodes)]
				pvs = append(pvs, localPV(fmt.Sprintf("latency-%s-%03d", m, i), class, n, "1Gi", corev1.PersistentVolumeReclaimRetain))
			}
			f.createPVs(pvs...)
		}
		ns := f.ns
		bw := watchBound(t, ns)
		refs := watchClaimRefs(t, ns)
		var claims []*corev1.PersistentVolumeClaim
		for i := range pods {
			claims = append(claims, claim(ns, fmt.Sprintf("app-%03d", i), class, "1Gi"))
		}
		createClaims(t, claims...)
		created := map[string]time.Time{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := range pods {
			name := fmt.Sprintf("app-%03d", i)
			start := func() {
				mu.Lock()
				created[name] = time.Now()
				mu.Unlock()
				if err := cl.Client.Create(context.Background(), pod(ns, name, name)); err != nil {
					t.Errorf("creating pod %s: %v", name, err)
				}
			}
			if burst {
				wg.Go(start)
				continue
			}
			start()
			time.Sleep(pace)
		}
		wg.Wait()
		harness.WaitFor(t, 2*time.Minute, "every claim Bound", func(context.Context) (bool, error) {
			for name := range created {
				if _, ok := bw.at(name); !ok {
					return false, fmt.Errorf("claim %s not Bound yet", name)
				}
			}
			return true, nil
		})
		var total, sched, binder []time.Duration
		for name, c := range created {
			b, _ := bw.at(name)
			total = append(total, b.Sub(c))
			if r, ok := refs.at(name); ok {
				sched = append(sched, r.Sub(c))
				binder = append(binder, b.Sub(r))
			}
		}
		q := func(ds []time.Duration) string {
			return fmt.Sprintf("median %v p95 %v", quantile(ds, 0.5).Round(time.Millisecond), quantile(ds, 0.95).Round(time.Millisecond))
		}
		results[m] = fmt.Sprintf("%-8s n=%d  pod created -> claim Bound: %s;  -> claimRef by the scheduler: %s;  claimRef -> claim Bound (binder): %s",
			m, len(total), q(total), q(sched), q(binder))
		t.Log(results[m])
		if cf != nil {
			var made []string
			for name := range created {
				made = append(made, harness.GetPVC(t, cl.Client, ns, name).Spec.VolumeName)
			}
			cf.deleteAll(made)
			return nil
		}
		deletePods(t, podsIn(t, ns)...)
		return nil // no end state to compare: the flows above do that
	})
	for _, m := range cluster.Modes {
		if r, ok := results[m]; ok {
			t.Logf("%s, %s: %s", what, how, r)
		}
	}
}

// claimRefWatch records when each claim of a namespace is first named by a volume's claimRef
// (the scheduler's write, for these volumes).
type claimRefWatch struct {
	mu   sync.Mutex
	seen map[string]time.Time
}

func watchClaimRefs(t *testing.T, ns string) *claimRefWatch {
	t.Helper()
	w, err := cl.Clientset.CoreV1().PersistentVolumes().Watch(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("watching volumes: %v", err)
	}
	cw := &claimRefWatch{seen: map[string]time.Time{}}
	go func() {
		for ev := range w.ResultChan() {
			pv, ok := ev.Object.(*corev1.PersistentVolume)
			if !ok || (ev.Type != watch.Added && ev.Type != watch.Modified) || pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.Namespace != ns {
				continue
			}
			cw.mu.Lock()
			if _, ok := cw.seen[pv.Spec.ClaimRef.Name]; !ok {
				cw.seen[pv.Spec.ClaimRef.Name] = time.Now()
			}
			cw.mu.Unlock()
		}
	}()
	t.Cleanup(w.Stop)
	return cw
}

func (cw *claimRefWatch) at(name string) (time.Time, bool) {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	at, ok := cw.seen[name]
	return at, ok
}
