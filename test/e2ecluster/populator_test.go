package e2ecluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/test/cluster"
	"github.com/pvguard/pvguard/test/harness"
	"github.com/pvguard/pvguard/test/populators"
)

// TestVolumePopulatorHandOff runs a volume populator built on lib-volume-populator
// (test/populators.VolumePopulator, hello-populator's configuration, as its own ServiceAccount
// with its RBAC) beside pvguard, for a claim of an Immediate class and one of a
// WaitForFirstConsumer class used by a pod. For each target claim it makes the prime claim in its
// own namespace (the real external-provisioner provisions it; for WaitForFirstConsumer on the
// node the scheduler chose for the target's pod, copied in selected-node), runs its populator pod
// there (the kubelet stand-in writes the Hello's file on the volume and marks the pod
// Succeeded), hands the volume to the target (a strategic merge patch of spec.claimRef), and once
// the mode's binder has bound the target and marked the prime claim Lost, deletes the pod and
// the prime claim and removes its finalizer. Each target ends Bound to the populated volume (its
// file on it, on the pod's node for WaitForFirstConsumer); nothing is left behind, nothing leaks,
// and no component, the populator included, is warned or refused.
func TestVolumePopulatorHandOff(t *testing.T) {
	installHandOffCRDs(t)
	forEachMode(t, func(t *testing.T, m cluster.Mode) *endState {
		before := readCounters(t)
		f := newCSIFlow(t, "populator", m)
		ns := f.ns
		wffc, imm := "pop-wffc-"+string(m), "pop-imm-"+string(m)
		csiClass(t, wffc, storagev1.VolumeBindingWaitForFirstConsumer)
		csiClass(t, imm, storagev1.VolumeBindingImmediate)
		cfg := populators.HelloPopulator()
		const file, contents = "hello.txt", "Hello, world!"
		createCR(t, cfg.GVR, "Hello", ns, "hello", map[string]any{"fileName": file, "fileContents": contents})

		dropFinalizerOnFailure(t, ns, cfg.Prefix+"/populate-target-protection")
		clearOnFailure(t, cfg.Namespace)
		ctx := standInContext(t)
		vp, err := populators.StartVolumePopulator(ctx, cl.Admin, cfg, populators.HelloRBAC(), cl.LogDir)
		if err != nil {
			t.Fatal(err)
		}
		startKubelet(t, &populators.Kubelet{
			Namespaces: []string{cfg.Namespace},
			Run:        func(p *corev1.Pod) bool { return strings.HasPrefix(p.Name, "populate-") },
			// hello-populator's populate mode writes --file-contents to --file-name.
			Work: func(ctx context.Context, p *corev1.Pod) error {
				return writeData(ctx, p.Namespace, podClaim(p), file, contents)
			},
		})

		targets := []*corev1.PersistentVolumeClaim{claim(ns, "imm", imm, "10Mi"), claim(ns, "wffc", wffc, "10Mi")}
		for _, c := range targets {
			c.Spec.DataSourceRef = dataSourceRef(cfg.GK.Group, cfg.GK.Kind, "hello")
		}
		createClaims(t, targets...)
		create(t, pod(ns, "app", "wffc"))
		harness.WaitFor(t, 2*time.Minute, "every target Bound, the pod scheduled, the populator done", func(ctx context.Context) (bool, error) {
			binderRefused(t, ns)
			refusedStandIn(t, "the volume populator", vp.Conn)
			if ok, err := allBoundAndScheduled(ctx, ns); !ok {
				return false, err
			}
			var keys []client.ObjectKey
			for _, c := range targets {
				got := &corev1.PersistentVolumeClaim{}
				if err := cl.Client.Get(ctx, client.ObjectKeyFromObject(c), got); err != nil {
					return false, err
				}
				if slices.Contains(got.Finalizers, vp.FinalizerName()) {
					return false, fmt.Errorf("claim %s still has the populator's finalizer", c.Name)
				}
				keys = append(keys, client.ObjectKey{Namespace: cfg.Namespace, Name: "prime-" + string(got.UID)})
			}
			if ok, err := claimsGone(ctx, keys...); !ok {
				return false, err
			}
			if pods := podsIn(t, cfg.Namespace); len(pods) > 0 {
				return false, fmt.Errorf("populator pod %s still exists", pods[0].Name)
			}
			return true, nil
		})

		s := newEndState()
		var provisioned []string
		for _, c := range targets {
			pvc := harness.GetPVC(t, cl.Client, ns, c.Name)
			pv := expectBoundPair(t, pvc)
			if pv == nil {
				continue
			}
			provisioned = append(provisioned, pv.Name)
			if pv.Annotations[annProvisionedBy] != cl.CSI.Driver() || pv.Name == "pvc-"+string(pvc.UID) {
				t.Errorf("claim %s bound to %s (provisioned-by %q), want the volume provisioned for its prime claim", c.Name, pv.Name, pv.Annotations[annProvisionedBy])
			}
			if got := pv.Annotations[vp.PopulatedFromAnnotation()]; got != ns+"/hello" {
				t.Errorf("volume %s: %s = %q, want %s/hello", pv.Name, vp.PopulatedFromAnnotation(), got, ns)
			}
			if checkData(t, ns, c.Name, file, contents) {
				s.add("target Bound to the populated volume", 1)
			}
			shape(s, pvc, pv)
		}
		f.volumes = append(f.volumes, provisioned...)
		p, pvc := getPod(t, ns, "app"), harness.GetPVC(t, cl.Client, ns, "wffc")
		if pv := harness.GetPV(t, cl.Client, pvc.Spec.VolumeName); volumeNode(pv) != p.Spec.NodeName || pvc.Annotations[annSelectedNode] != p.Spec.NodeName {
			t.Errorf("WaitForFirstConsumer target: volume on %q, selected-node %q, pod on %q", volumeNode(pv), pvc.Annotations[annSelectedNode], p.Spec.NodeName)
		} else {
			s.add("WaitForFirstConsumer target populated on its pod's node", 1)
		}
		if got := f.newCalls("CreateVolume"); got != len(targets) {
			t.Errorf("CreateVolume called %d times for %d targets: one volume per prime claim, none for a target", got, len(targets))
		}
		settleUnused(t, s, ns)
		s.reasons = kindReasons(t, ns, f.volumes)
		f.deleteAll(provisioned)
		checkStandIn(t, "the volume populator", vp.Conn)
		checkAdmission(t, before, readCounters(t))
		return s
	})
}
