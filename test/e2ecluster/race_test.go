package e2ecluster

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/test/cluster"
	"github.com/pvguard/pvguard/test/harness"
)

// TestRaceForFewerVolumes is flow d without its provisioner fallback (that is
// TestRaceWithProvisionerFallback): many pods at once, each with its own claim, for fewer
// static local volumes than claims across the nodes. The scheduler chooses and binds a volume
// for as many pods as there are volumes; the others stay unschedulable with their claims
// Pending. No volume is claimed twice, each is bound to at most one claim, on its pod's node,
// its claimRef written by the scheduler alone; pvguard's binder loses no write to a conflict
// (409) and binds no volume the scheduler did not choose.
func TestRaceForFewerVolumes(t *testing.T) {
	// PVGUARD_CLUSTER_RACE=pods:volumesPerNode sizes the race (default 30:6).
	pods, perNode := 30, 6
	if v := os.Getenv("PVGUARD_CLUSTER_RACE"); v != "" {
		if _, err := fmt.Sscanf(v, "%d:%d", &pods, &perNode); err != nil || perNode*len(cl.Nodes) >= pods {
			t.Fatalf("PVGUARD_CLUSTER_RACE=%q: want pods:volumesPerNode with fewer volumes than pods (%v)", v, err)
		}
	}
	forEachMode(t, func(t *testing.T, m cluster.Mode) *endState {
		ctx := context.Background()
		before := readCounters(t)
		schedLog := logSize(t, cl.SchedulerLog())
		kcmLog := logSize(t, cl.ControllerManagerLog())
		f := newFlow(t, "race", m)
		ns := f.ns
		class := "local-race-" + string(m)
		localClass(t, class)
		var pvs []*corev1.PersistentVolume
		var names []string
		for _, n := range cl.Nodes {
			for i := range perNode {
				pv := localPV(fmt.Sprintf("race-%s-%s-%d", m, n, i), class, n, "1Gi", corev1.PersistentVolumeReclaimRetain)
				pvs = append(pvs, pv)
				names = append(names, pv.Name)
			}
		}
		f.createPVs(pvs...)
		var claims []*corev1.PersistentVolumeClaim
		for i := range pods {
			claims = append(claims, claim(ns, fmt.Sprintf("app-%03d", i), class, "1Gi"))
		}
		createClaims(t, claims...)
		// All pods at once, from parallel clients, as a StatefulSet scale-up or a batch job does.
		var wg sync.WaitGroup
		errs := make(chan error, pods)
		for i := range pods {
			wg.Go(func() {
				name := fmt.Sprintf("app-%03d", i)
				if err := cl.Client.Create(ctx, pod(ns, name, name)); err != nil {
					errs <- fmt.Errorf("creating pod %s: %w", name, err)
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		vols := len(pvs)
		harness.WaitFor(t, 3*time.Minute, fmt.Sprintf("%d claims Bound and %d pods unschedulable", vols, pods-vols), func(ctx context.Context) (bool, error) {
			var claims corev1.PersistentVolumeClaimList
			var pl corev1.PodList
			if err := cl.Client.List(ctx, &claims, client.InNamespace(ns)); err != nil {
				return false, err
			}
			if err := cl.Client.List(ctx, &pl, client.InNamespace(ns)); err != nil {
				return false, err
			}
			bound, scheduled, unschedulable := 0, 0, 0
			for _, c := range claims.Items {
				if c.Status.Phase == corev1.ClaimBound {
					bound++
				}
			}
			for _, p := range pl.Items {
				switch {
				case p.Spec.NodeName != "":
					scheduled++
				case unschedulableNow(&p):
					unschedulable++
				}
			}
			return bound == vols && scheduled == vols && unschedulable == pods-vols,
				fmt.Errorf("%d claims Bound, %d pods scheduled, %d unschedulable", bound, scheduled, unschedulable)
		})
		// A little longer: a binder that bound more than the scheduler chose would show now.
		time.Sleep(3 * time.Second)

		s := newEndState()
		owner := map[string]string{} // volume -> claim
		for i := range pods {
			name := fmt.Sprintf("app-%03d", i)
			p, pvc := getPod(t, ns, name), harness.GetPVC(t, cl.Client, ns, name)
			if p.Spec.NodeName == "" {
				if pvc.Spec.VolumeName != "" || pvc.Status.Phase != corev1.ClaimPending {
					t.Errorf("claim %s of unschedulable pod %s: volume %q phase %s, want none and Pending", pvc.Name, p.Name, pvc.Spec.VolumeName, pvc.Status.Phase)
				}
				s.add("unschedulable pod, claim Pending without a volume", 1)
				continue
			}
			pv := expectBoundPair(t, pvc)
			if pv == nil {
				continue
			}
			if prev, dup := owner[pv.Name]; dup {
				t.Errorf("volume %s given to claims %s and %s", pv.Name, prev, pvc.Name)
			}
			owner[pv.Name] = pvc.Name
			if n := volumeNode(pv); n != p.Spec.NodeName {
				t.Errorf("claim %s is bound to %s on %s, but its pod runs on %s", pvc.Name, pv.Name, n, p.Spec.NodeName)
			} else {
				s.add("scheduled pod, claim Bound on a volume of its node", 1)
			}
			shape(s, pvc, pv)
		}
		for _, pv := range pvs {
			live := harness.GetPV(t, cl.Client, pv.Name)
			if w := claimRefWriters(live); !slices.Equal(w, []string{"kube-scheduler"}) {
				t.Errorf("volume %s: spec.claimRef written by %v, want kube-scheduler alone: a binder bound a volume the scheduler did not choose", pv.Name, w)
			}
			if ref := live.Spec.ClaimRef; ref == nil || owner[pv.Name] != ref.Name {
				t.Errorf("volume %s: claimRef %+v, but the claim bound to it is %q", pv.Name, ref, owner[pv.Name])
			}
		}
		settleUnused(t, s, ns)
		s.reasons = kindReasons(t, ns, names)

		after := readCounters(t)
		checkAdmission(t, before, after)
		conflicts, deltas := after.since(before)
		if m == cluster.ModePVGuard && conflicts > 0 {
			t.Errorf("pvguard's binder lost %d writes to conflicts (409): it raced the scheduler or itself; see %s", conflicts, cl.PVGuard().Log)
		}
		t.Logf("%s: binder errors %v; kube-scheduler 409s in its log: %d; kube-controller-manager 409s in its log: %d", m,
			deltas[`pvguard_binder_errors_total{operation="claim"}`]+deltas[`pvguard_binder_errors_total{operation="volume"}`]+deltas[`pvguard_binder_errors_total{operation="plan"}`],
			countSince(t, cl.SchedulerLog(), schedLog, conflictText), countSince(t, cl.ControllerManagerLog(), kcmLog, conflictText))

		deletePods(t, podsIn(t, ns)...)
		return s
	})
}

// conflictText is how the apiserver words a 409 on an update from a stale copy.
const conflictText = "the object has been modified"

// unschedulableNow reports whether the scheduler has marked the pod unschedulable.
func unschedulableNow(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}

func podsIn(t *testing.T, ns string) []*corev1.Pod {
	t.Helper()
	var pl corev1.PodList
	if err := cl.Client.List(context.Background(), &pl, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	out := make([]*corev1.Pod, len(pl.Items))
	for i := range pl.Items {
		out[i] = &pl.Items[i]
	}
	return out
}

// logSize is a log file's current size, to read only what a flow adds to it.
func logSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// countSince counts the lines added to a log after offset that contain text.
func countSince(t *testing.T, path string, offset int64, text string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if offset > int64(len(data)) {
		offset = 0 // the file was rewritten
	}
	return strings.Count(string(data[offset:]), text)
}
