package e2ecluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/test/cluster"
	"github.com/pvguard/pvguard/test/harness"
)

// TestStaticLocalVolumes is flow a's core with volumes an administrator creates directly (the
// local static provisioner's cycle is TestLocalStaticProvisionerCycle). Local volumes, one node each, in a
// kubernetes.io/no-provisioner WaitForFirstConsumer class; pods with one claim each are
// scheduled by the real scheduler, which binds the volume it chose (claimRef); the binder of the
// mode completes the binding. Every claim ends Bound on a volume of its pod's node, the claimRef
// of every volume written by the scheduler alone. Pods and claims deleted: Retain volumes end
// Released, statically made Delete volumes Failed (no plugin can delete them), Delete volumes
// the local static provisioner made (provisioned-by) Released for its deleter, as upstream.
func TestStaticLocalVolumes(t *testing.T) {
	forEachMode(t, func(t *testing.T, m cluster.Mode) *endState {
		ctx := context.Background()
		before := readCounters(t)
		f := newFlow(t, "static", m)
		ns := f.ns
		class := "local-static-" + string(m)
		localClass(t, class)
		var pvs []*corev1.PersistentVolume
		var names []string
		for _, n := range cl.Nodes {
			for _, v := range []struct {
				size    string
				reclaim corev1.PersistentVolumeReclaimPolicy
				// provisionedBy is set as the local static provisioner sets it on the volumes it
				// discovers (its name per node): a Delete volume is then its deleter's to clean.
				provisionedBy string
			}{
				{"1Gi", corev1.PersistentVolumeReclaimRetain, ""},
				{"2Gi", corev1.PersistentVolumeReclaimDelete, ""},
				{"3Gi", corev1.PersistentVolumeReclaimDelete, "local-volume-provisioner-" + n},
			} {
				pv := localPV(fmt.Sprintf("static-%s-%s-%s", m, n, strings.ToLower(v.size)), class, n, v.size, v.reclaim)
				if v.provisionedBy != "" {
					pv.Annotations = map[string]string{"pv.kubernetes.io/provisioned-by": v.provisionedBy}
				}
				pvs = append(pvs, pv)
				names = append(names, pv.Name)
			}
		}
		f.createPVs(pvs...)

		bw := watchBound(t, ns)
		var pods []*corev1.Pod
		var claims []*corev1.PersistentVolumeClaim
		for i := range len(pvs) {
			claims = append(claims, claim(ns, fmt.Sprintf("app-%d", i), class, "1Gi"))
		}
		createClaims(t, claims...)
		created := map[string]time.Time{}
		for _, c := range claims {
			p := pod(ns, c.Name, c.Name)
			created[c.Name] = time.Now()
			create(t, p)
			pods = append(pods, p)
		}
		harness.WaitFor(t, 2*time.Minute, "every claim Bound and every pod scheduled", func(ctx context.Context) (bool, error) {
			for _, p := range pods {
				pvc, got := &corev1.PersistentVolumeClaim{}, &corev1.Pod{}
				if err := cl.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: p.Name}, pvc); err != nil {
					return false, err
				}
				if err := cl.Client.Get(ctx, client.ObjectKeyFromObject(p), got); err != nil {
					return false, err
				}
				if pvc.Status.Phase != corev1.ClaimBound || got.Spec.NodeName == "" {
					return false, fmt.Errorf("claim %s %s, pod on %q", pvc.Name, pvc.Status.Phase, got.Spec.NodeName)
				}
			}
			return true, nil
		})

		s := newEndState()
		var lat []time.Duration
		for _, p := range pods {
			p = getPod(t, ns, p.Name)
			pvc := harness.GetPVC(t, cl.Client, ns, p.Name)
			pv := expectBoundPair(t, pvc)
			if pv == nil {
				continue
			}
			if n := volumeNode(pv); n != p.Spec.NodeName {
				t.Errorf("claim %s is bound to %s on %s, but its pod runs on %s", pvc.Name, pv.Name, n, p.Spec.NodeName)
			} else {
				s.add("claim Bound on a volume of its pod's node", 1)
			}
			if w := claimRefWriters(pv); !slices.Equal(w, []string{"kube-scheduler"}) {
				t.Errorf("volume %s: spec.claimRef written by %v, want kube-scheduler alone: a binder bound a volume the scheduler did not choose", pv.Name, w)
			}
			shape(s, pvc, pv)
			if at, ok := bw.at(pvc.Name); ok {
				lat = append(lat, at.Sub(created[pvc.Name]))
			}
		}
		settleUnused(t, s, ns)
		t.Logf("%s: pod created -> claim Bound, %d static volumes: median %v, p95 %v", m, len(lat),
			quantile(lat, 0.5).Round(time.Millisecond), quantile(lat, 0.95).Round(time.Millisecond))

		// Release: the pods go first, then their claims (the pvc-protection controller lets each
		// go once no pod uses it).
		deletePods(t, pods...)
		for _, p := range pods {
			if err := cl.Client.Delete(ctx, claim(ns, p.Name, class, "1Gi")); err != nil {
				t.Fatalf("deleting claim %s: %v", p.Name, err)
			}
		}
		for _, p := range pods {
			harness.WaitFor(t, time.Minute, "claim "+p.Name+" deleted", func(ctx context.Context) (bool, error) {
				err := cl.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: p.Name}, &corev1.PersistentVolumeClaim{})
				return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
			})
		}
		// Retain: Released. Delete of a volume no provisioner made: Failed (no plugin can delete
		// it). Delete of the local static provisioner's volume: Released, left to its deleter.
		want := func(pv *corev1.PersistentVolume) corev1.PersistentVolumePhase {
			switch {
			case pv.Spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimRetain:
				return corev1.VolumeReleased
			case pv.Annotations["pv.kubernetes.io/provisioned-by"] != "":
				return corev1.VolumeReleased
			default:
				return corev1.VolumeFailed
			}
		}
		for _, pv := range pvs {
			harness.WaitFor(t, time.Minute, fmt.Sprintf("volume %s (%s) %s", pv.Name, pv.Spec.PersistentVolumeReclaimPolicy, want(pv)), func(ctx context.Context) (bool, error) {
				got := &corev1.PersistentVolume{}
				err := cl.Client.Get(ctx, client.ObjectKeyFromObject(pv), got)
				return err == nil && got.Status.Phase == want(pv), err
			})
		}
		time.Sleep(2 * time.Second) // a Released volume must stay so: nothing else may be done to it
		for _, pv := range pvs {
			got := harness.GetPV(t, cl.Client, pv.Name)
			if got.Status.Phase != want(pv) {
				t.Errorf("volume %s went on to %s, want it left %s", pv.Name, got.Status.Phase, want(pv))
			}
			_, byProvisioner := got.Annotations["pv.kubernetes.io/provisioned-by"]
			s.add(fmt.Sprintf("%s volume (provisioned-by set %v) after its claim's deletion: %s, claimRef kept %v, finalizers %v",
				got.Spec.PersistentVolumeReclaimPolicy, byProvisioner, got.Status.Phase, got.Spec.ClaimRef != nil, got.Finalizers), 1)
		}
		s.reasons = kindReasons(t, ns, names)
		checkAdmission(t, before, readCounters(t))
		return s
	})
}
