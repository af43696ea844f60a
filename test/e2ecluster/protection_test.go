package e2ecluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/test/cluster"
	"github.com/pvguard/pvguard/test/harness"
)

// TestProtectionAndPreBound is flow e (expansion is covered by flow b, TestDynamicProvisioning):
// the protection finalizers of the real pvc-protection and
// pv-protection controllers, which hold a claim a pod uses and a volume a claim is bound to and
// let them go once unused; and pre-bound claims and volumes in a WaitForFirstConsumer class,
// which the binder binds without waiting for a pod (upstream's FindMatchingVolume returns a
// volume pre-bound to the claim even for delayed binding) and which the scheduler then follows.
func TestProtectionAndPreBound(t *testing.T) {
	forEachMode(t, func(t *testing.T, m cluster.Mode) *endState {
		ctx := context.Background()
		before := readCounters(t)
		f := newFlow(t, "protect", m)
		ns := f.ns
		class := "local-protect-" + string(m)
		localClass(t, class)
		nodeA, nodeB, nodeC := cl.Nodes[0], cl.Nodes[1], cl.Nodes[2]
		name := func(s string) string { return fmt.Sprintf("protect-%s-%s", m, s) }
		free := map[string]*corev1.PersistentVolume{
			"a": localPV(name("a"), class, nodeA, "1Gi", corev1.PersistentVolumeReclaimRetain),
			"b": localPV(name("b"), class, nodeB, "1Gi", corev1.PersistentVolumeReclaimRetain),
			"c": localPV(name("c"), class, nodeC, "1Gi", corev1.PersistentVolumeReclaimRetain),
		}
		// Volumes an administrator pre-bound by name to a claim (no uid).
		byVolume := localPV(name("a-prebound"), class, nodeA, "1Gi", corev1.PersistentVolumeReclaimRetain)
		reserved := localPV(name("b-reserved"), class, nodeB, "1Gi", corev1.PersistentVolumeReclaimRetain)
		for pv, claimName := range map[*corev1.PersistentVolume]string{byVolume: "byvolume", reserved: "later"} {
			pv.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: ns, Name: claimName}
		}
		f.createPVs(free["a"], free["b"], free["c"], byVolume, reserved)
		for _, pv := range []*corev1.PersistentVolume{byVolume, reserved} {
			harness.WaitFor(t, time.Minute, "pre-bound volume "+pv.Name+" Available", func(ctx context.Context) (bool, error) {
				got := &corev1.PersistentVolume{}
				err := cl.Client.Get(ctx, client.ObjectKeyFromObject(pv), got)
				return err == nil && got.Status.Phase == corev1.VolumeAvailable, err
			})
		}
		s := newEndState()
		waitBound := func(claimName string) *corev1.PersistentVolume {
			t.Helper()
			harness.WaitFor(t, time.Minute, "claim "+claimName+" Bound", func(ctx context.Context) (bool, error) {
				pvc := &corev1.PersistentVolumeClaim{}
				err := cl.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: claimName}, pvc)
				return err == nil && pvc.Status.Phase == corev1.ClaimBound, err
			})
			pvc := harness.GetPVC(t, cl.Client, ns, claimName)
			pv := expectBoundPair(t, pvc)
			shape(s, pvc, pv)
			return pv
		}
		waitScheduled := func(podName, node string) {
			t.Helper()
			harness.WaitFor(t, time.Minute, "pod "+podName+" scheduled on "+node, func(ctx context.Context) (bool, error) {
				p := &corev1.Pod{}
				err := cl.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: podName}, p)
				if err == nil && p.Spec.NodeName != "" && p.Spec.NodeName != node {
					t.Fatalf("pod %s scheduled on %s, but its volume is on %s", podName, p.Spec.NodeName, node)
				}
				return err == nil && p.Spec.NodeName == node, err
			})
		}
		pinned := func(p *corev1.Pod, node string) *corev1.Pod {
			p.Spec.NodeSelector = map[string]string{corev1.LabelHostname: node}
			return p
		}

		// A. A volume pre-bound to a claim: bound when the claim appears, before any pod; the
		// scheduler then places the pod on the volume's node.
		create(t, claim(ns, "byvolume", class, "1Gi"))
		if pv := waitBound("byvolume"); pv != nil && pv.Name != byVolume.Name {
			t.Errorf("claim byvolume bound to %s, want the volume pre-bound to it, %s", pv.Name, byVolume.Name)
		}
		s.add("pre-bound volume: bound without a pod", 1)
		create(t, pod(ns, "byvolume", "byvolume"))
		waitScheduled("byvolume", nodeA)

		// B. A claim pre-bound to a volume (spec.volumeName), likewise.
		pre := claim(ns, "byclaim", class, "1Gi")
		pre.Spec.VolumeName = free["c"].Name
		create(t, pre)
		if pv := waitBound("byclaim"); pv != nil && pv.Name != free["c"].Name {
			t.Errorf("claim byclaim bound to %s, want %s", pv.Name, free["c"].Name)
		}
		s.add("pre-bound claim: bound without a pod", 1)
		create(t, pod(ns, "byclaim", "byclaim"))
		waitScheduled("byclaim", nodeC)

		// C. A claim in use is held by pvc-protection until its pod is gone; its volume stays
		// Bound meanwhile, then is Released.
		inuse := pinned(pod(ns, "inuse", "inuse"), nodeA)
		create(t, claim(ns, "inuse", class, "1Gi"), inuse)
		if pv := waitBound("inuse"); pv != nil && pv.Name != free["a"].Name {
			t.Errorf("claim inuse bound to %s, want %s, the free volume of %s (the other is pre-bound to another claim)", pv.Name, free["a"].Name, nodeA)
		}
		waitScheduled("inuse", nodeA)
		if err := cl.Client.Delete(ctx, claim(ns, "inuse", class, "1Gi")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second) // several syncs of the protection controller and the binder
		if pvc := harness.GetPVC(t, cl.Client, ns, "inuse"); pvc.DeletionTimestamp == nil || pvc.Status.Phase != corev1.ClaimBound {
			t.Errorf("claim inuse, deleted while its pod exists: deletionTimestamp %v phase %s, want Terminating and still Bound", pvc.DeletionTimestamp, pvc.Status.Phase)
		} else {
			s.add("claim deleted while in use: Terminating, still Bound", 1)
		}
		if pv := harness.GetPV(t, cl.Client, free["a"].Name); pv.Status.Phase != corev1.VolumeBound {
			t.Errorf("volume %s of a Terminating claim in use: %s, want Bound", pv.Name, pv.Status.Phase)
		}
		deletePods(t, inuse)
		waitGone(t, &corev1.PersistentVolumeClaim{}, client.ObjectKey{Namespace: ns, Name: "inuse"})
		waitPhase(t, free["a"].Name, corev1.VolumeReleased)
		s.add("claim in use: deleted once its pod is gone, its volume Released", 1)

		// D. A bound volume is held by pv-protection until its claim is gone.
		held := pinned(pod(ns, "held", "held"), nodeB)
		create(t, claim(ns, "held", class, "1Gi"), held)
		if pv := waitBound("held"); pv != nil && pv.Name != free["b"].Name {
			t.Errorf("claim held bound to %s, want %s, the free volume of %s (the other is pre-bound to another claim)", pv.Name, free["b"].Name, nodeB)
		}
		waitScheduled("held", nodeB)
		if err := cl.Client.Delete(ctx, free["b"].DeepCopy()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		if pv := harness.GetPV(t, cl.Client, free["b"].Name); pv.DeletionTimestamp == nil || pv.Status.Phase != corev1.VolumeBound {
			t.Errorf("volume %s, deleted while bound: deletionTimestamp %v phase %s, want Terminating and still Bound", pv.Name, pv.DeletionTimestamp, pv.Status.Phase)
		} else {
			s.add("volume deleted while bound: Terminating, still Bound", 1)
		}
		if pvc := harness.GetPVC(t, cl.Client, ns, "held"); pvc.Status.Phase != corev1.ClaimBound {
			t.Errorf("claim held of a Terminating volume: %s, want Bound", pvc.Status.Phase)
		}
		deletePods(t, held)
		if err := cl.Client.Delete(ctx, claim(ns, "held", class, "1Gi")); err != nil {
			t.Fatal(err)
		}
		waitGone(t, &corev1.PersistentVolume{}, client.ObjectKey{Name: free["b"].Name})
		s.add("bound volume: deleted once its claim is gone", 1)

		// E. A volume pre-bound to a claim that does not exist yet is not given to another
		// claim, even when it is the only one on the pod's node; it goes to its claim when that
		// appears.
		other := pinned(pod(ns, "other", "other"), nodeB)
		create(t, claim(ns, "other", class, "1Gi"), other)
		harness.WaitFor(t, time.Minute, "pod other unschedulable", func(ctx context.Context) (bool, error) {
			p := &corev1.Pod{}
			err := cl.Client.Get(ctx, client.ObjectKeyFromObject(other), p)
			return err == nil && unschedulableNow(p), err
		})
		time.Sleep(2 * time.Second)
		if pv := harness.GetPV(t, cl.Client, reserved.Name); pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.Name != "later" || pv.Spec.ClaimRef.UID != "" {
			t.Errorf("volume %s pre-bound to claim later: claimRef now %+v", pv.Name, pv.Spec.ClaimRef)
		}
		if pvc := harness.GetPVC(t, cl.Client, ns, "other"); pvc.Spec.VolumeName != "" {
			t.Errorf("claim other was given %s", pvc.Spec.VolumeName)
		} else {
			s.add("volume pre-bound to a missing claim: not given to another", 1)
		}
		create(t, claim(ns, "later", class, "1Gi"))
		if pv := waitBound("later"); pv != nil && pv.Name != reserved.Name {
			t.Errorf("claim later bound to %s, want %s", pv.Name, reserved.Name)
		}
		if p := getPod(t, ns, "other"); p.Spec.NodeName != "" {
			t.Errorf("pod other was scheduled on %s with no volume left for it", p.Spec.NodeName)
		}

		settleUnused(t, s, ns)
		deletePods(t, podsIn(t, ns)...)
		s.reasons = kindReasons(t, ns, f.volumes)
		checkAdmission(t, before, readCounters(t))
		return s
	})
}

func waitGone(t *testing.T, obj client.Object, key client.ObjectKey) {
	t.Helper()
	harness.WaitFor(t, time.Minute, fmt.Sprintf("%T %s deleted", obj, key), func(ctx context.Context) (bool, error) {
		err := cl.Client.Get(ctx, key, obj)
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
}

func waitPhase(t *testing.T, volume string, phase corev1.PersistentVolumePhase) {
	t.Helper()
	harness.WaitFor(t, time.Minute, "volume "+volume+" "+string(phase), func(ctx context.Context) (bool, error) {
		pv := &corev1.PersistentVolume{}
		err := cl.Client.Get(ctx, client.ObjectKey{Name: volume}, pv)
		return err == nil && pv.Status.Phase == phase, err
	})
}
