package e2ecluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/internal/devcluster"
	"github.com/pvguard/pvguard/test/cluster"
	"github.com/pvguard/pvguard/test/harness"
)

// What the external-provisioner and the scheduler write.
const (
	provisionerFinalizer = "external-provisioner.volume.kubernetes.io/finalizer"
	annProvisionedBy     = "pv.kubernetes.io/provisioned-by"
	annSelectedNode      = "volume.kubernetes.io/selected-node"
	// paramClaimName is the CreateVolume parameter --extra-create-metadata adds.
	paramClaimName = "csi.storage.k8s.io/pvc/name"
)

// csiClass creates a class of the CSI plugin: reclaim Delete, expandable.
func csiClass(t *testing.T, name string, mode storagev1.VolumeBindingMode) {
	t.Helper()
	del, expand := corev1.PersistentVolumeReclaimDelete, true
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: cl.CSI.Driver(),
		ReclaimPolicy: &del, VolumeBindingMode: &mode, AllowVolumeExpansion: &expand}
	create(t, sc)
	t.Cleanup(func() { _ = cl.Client.Delete(context.Background(), sc) })
}

// csiPV is a statically made volume of the CSI driver on one node, as an administrator creates
// one for a volume that exists in the backend.
func csiPV(name, class, node, size string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              class,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: cl.CSI.Driver(), VolumeHandle: "static-" + name}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: cl.CSI.TopologyKey(), Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
			}}}},
		},
	}
}

// csiFlow is what the CSI flows check at their end besides the flow's own end state: the
// plugin's calls, and that no disk leaked (every volume in the backend has its PersistentVolume)
// and none outlived its claim (the backend is empty once the claims are gone).
type csiFlow struct {
	*flow
	calls map[string]int
}

func newCSIFlow(t *testing.T, name string, m cluster.Mode) *csiFlow {
	t.Helper()
	if cl.CSI == nil {
		t.Skip("the cluster runs without the CSI sidecars")
	}
	return &csiFlow{flow: newFlow(t, name, m), calls: cl.CSI.Plugin.AllCalls()}
}

func (f *csiFlow) newCalls(method string) int { return cl.CSI.Plugin.Calls(method) - f.calls[method] }

// noLeak checks that every volume in the backend is some PersistentVolume's.
func (f *csiFlow) noLeak() {
	t := f.t
	t.Helper()
	vols, err := cl.CSI.Plugin.Volumes()
	if err != nil {
		t.Fatal(err)
	}
	var pvs corev1.PersistentVolumeList
	if err := cl.Client.List(context.Background(), &pvs); err != nil {
		t.Fatal(err)
	}
	handles := map[string]bool{}
	for _, pv := range pvs.Items {
		if pv.Spec.CSI != nil {
			handles[pv.Spec.CSI.VolumeHandle] = true
		}
	}
	for _, v := range vols {
		if !handles[v.ID] {
			t.Errorf("the backend holds volume %s, which no PersistentVolume names: a leaked disk", v.ID)
		}
	}
}

// deleteAll deletes the flow's pods and claims and waits until the provisioner has deleted
// every volume it made for them (released by the binder, DeleteVolume, its finalizer removed,
// then pv-protection's) and the backend holds none of them.
func (f *csiFlow) deleteAll(provisioned []string) {
	t := f.t
	t.Helper()
	ctx := context.Background()
	deletePods(t, podsIn(t, f.ns)...)
	var claims corev1.PersistentVolumeClaimList
	if err := cl.Client.List(ctx, &claims, client.InNamespace(f.ns)); err != nil {
		t.Fatal(err)
	}
	for i := range claims.Items {
		if err := cl.Client.Delete(ctx, &claims.Items[i]); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	for _, name := range provisioned {
		harness.WaitFor(t, 2*time.Minute, "provisioned volume "+name+" deleted by the provisioner", func(ctx context.Context) (bool, error) {
			err := cl.Client.Get(ctx, client.ObjectKey{Name: name}, &corev1.PersistentVolume{})
			return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
		})
	}
	f.noLeak()
}

// provisionedPair checks a claim bound to a volume the provisioner made for it on its pod's node,
// as the scheduler asked (selected-node), and returns the volume.
func provisionedPair(t *testing.T, s *endState, ns, name string) *corev1.PersistentVolume {
	t.Helper()
	p, pvc := getPod(t, ns, name), harness.GetPVC(t, cl.Client, ns, name)
	pv := expectBoundPair(t, pvc)
	if pv == nil {
		return nil
	}
	if pv.Annotations[annProvisionedBy] != cl.CSI.Driver() || pv.Name != "pvc-"+string(pvc.UID) {
		t.Errorf("claim %s bound to %s (provisioned-by %q), want the volume the provisioner made for it", name, pv.Name, pv.Annotations[annProvisionedBy])
	}
	node := volumeNode(pv)
	switch {
	case node != p.Spec.NodeName:
		t.Errorf("claim %s: volume %s on %s, pod on %s", name, pv.Name, node, p.Spec.NodeName)
	case pvc.Annotations[annSelectedNode] != node:
		t.Errorf("claim %s: selected-node %q, volume on %s", name, pvc.Annotations[annSelectedNode], node)
	default:
		s.add("claim provisioned for on its pod's node (selected-node) and Bound", 1)
	}
	shape(s, pvc, pv)
	return pv
}

// TestDynamicProvisioning is flow b, with expansion (flow e's): claims of an Immediate and of a
// WaitForFirstConsumer class of the CSI plugin are provisioned by the real external-provisioner
// (the Immediate one for any node, each WaitForFirstConsumer one on the node the scheduler
// chose for its pod, which it names in selected-node) and bound by the mode's binder; the
// Immediate claim is expanded by the real external-resizer (kube-controller-manager's expand
// controller leaves CSI volumes to it); the claims deleted, the provisioner deletes each volume
// in the backend and its PersistentVolume, and removes its finalizer: nothing stays, nothing
// leaks.
func TestDynamicProvisioning(t *testing.T) {
	const pods = 3
	forEachMode(t, func(t *testing.T, m cluster.Mode) *endState {
		ctx := context.Background()
		before := readCounters(t)
		f := newCSIFlow(t, "dynamic", m)
		ns := f.ns
		wffc, imm := "csi-wffc-"+string(m), "csi-imm-"+string(m)
		csiClass(t, wffc, storagev1.VolumeBindingWaitForFirstConsumer)
		csiClass(t, imm, storagev1.VolumeBindingImmediate)
		s := newEndState()

		claims := []*corev1.PersistentVolumeClaim{claim(ns, "imm", imm, "10Mi")}
		for i := range pods {
			claims = append(claims, claim(ns, fmt.Sprintf("app-%d", i), wffc, "10Mi"))
		}
		createClaims(t, claims...)
		for i := range pods {
			name := fmt.Sprintf("app-%d", i)
			create(t, pod(ns, name, name))
		}
		harness.WaitFor(t, 2*time.Minute, "every claim Bound and every pod scheduled", func(ctx context.Context) (bool, error) {
			return allBoundAndScheduled(ctx, ns)
		})
		var provisioned []string
		pvc := harness.GetPVC(t, cl.Client, ns, "imm")
		if pv := expectBoundPair(t, pvc); pv != nil {
			if pv.Annotations[annProvisionedBy] != cl.CSI.Driver() || pv.Name != "pvc-"+string(pvc.UID) {
				t.Errorf("claim imm bound to %s, want the volume the provisioner made for it", pv.Name)
			}
			if pvc.Annotations[annSelectedNode] != "" {
				t.Errorf("Immediate claim imm has selected-node %q", pvc.Annotations[annSelectedNode])
			}
			s.add("Immediate claim provisioned for and Bound", 1)
			shape(s, pvc, pv)
			provisioned = append(provisioned, pv.Name)
		}
		for i := range pods {
			if pv := provisionedPair(t, s, ns, fmt.Sprintf("app-%d", i)); pv != nil {
				provisioned = append(provisioned, pv.Name)
			}
		}
		f.volumes = append(f.volumes, provisioned...)
		if got := f.newCalls("CreateVolume"); got < pods+1 {
			t.Errorf("CreateVolume called %d times for %d claims", got, pods+1)
		}
		settleUnused(t, s, ns)

		// Expansion: the user raises the Immediate claim's request.
		if err := devcluster.PatchPVC(ctx, cl.Client, ns, "imm", func(c *corev1.PersistentVolumeClaim) {
			c.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("20Mi")
		}); err != nil {
			t.Fatalf("raising claim imm's request: %v", err)
		}
		want := resource.MustParse("20Mi")
		harness.WaitFor(t, 2*time.Minute, "claim imm and its volume grown to 20Mi", func(ctx context.Context) (bool, error) {
			pvc := &corev1.PersistentVolumeClaim{}
			if err := cl.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "imm"}, pvc); err != nil {
				return false, err
			}
			pv := &corev1.PersistentVolume{}
			if err := cl.Client.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, pv); err != nil {
				return false, err
			}
			return pv.Spec.Capacity.Storage().Cmp(want) == 0 && pvc.Status.Capacity.Storage().Cmp(want) == 0, nil
		})
		pvc = harness.GetPVC(t, cl.Client, ns, "imm")
		var conds []string
		for _, c := range pvc.Status.Conditions {
			conds = append(conds, string(c.Type)+"="+string(c.Status))
		}
		slices.Sort(conds)
		s.add(fmt.Sprintf("expanded claim: phase %s, resize status %q, conditions %v", pvc.Status.Phase, pvc.Status.AllocatedResourceStatuses[corev1.ResourceStorage], conds), 1)
		if got := f.newCalls("ControllerExpandVolume"); got < 1 {
			t.Errorf("ControllerExpandVolume called %d times", got)
		}

		s.reasons = kindReasons(t, ns, f.volumes)
		f.deleteAll(provisioned)
		if got := f.newCalls("DeleteVolume"); got < len(provisioned) {
			t.Errorf("DeleteVolume called %d times for %d volumes", got, len(provisioned))
		}
		for k := range kindReasons(t, ns, f.volumes) {
			if k == "PersistentVolume/VolumeFailedDelete" {
				t.Errorf("a binder tried to delete a volume its provisioner deletes (VolumeFailedDelete)")
			}
		}
		checkAdmission(t, before, readCounters(t))
		return s
	})
}

// TestStaticBesideProvisioner is flow c: one WaitForFirstConsumer class with static volumes on
// one node and the CSI plugin as its provisioner. A pod on that node gets a static volume, no
// provisioning; a pod on a node without one is provisioned for there, and a static volume that
// appears on that node while the provisioning is in flight (CreateVolume held open) is left
// alone: the claim is bound to the volume the provisioner made, the late volume stays Available;
// no static volume on another node is ever bound to a claim. Each claim ends with exactly one
// volume, and the backend holds no disk without its PersistentVolume.
func TestStaticBesideProvisioner(t *testing.T) {
	forEachMode(t, func(t *testing.T, m cluster.Mode) *endState {
		ctx := context.Background()
		before := readCounters(t)
		f := newCSIFlow(t, "mixed", m)
		ns := f.ns
		class := "csi-mixed-" + string(m)
		csiClass(t, class, storagev1.VolumeBindingWaitForFirstConsumer)
		nodeA, nodeB, nodeC := cl.Nodes[0], cl.Nodes[1], cl.Nodes[2]
		statics := []*corev1.PersistentVolume{
			csiPV(fmt.Sprintf("mixed-%s-a0", m), class, nodeA, "10Mi"),
			csiPV(fmt.Sprintf("mixed-%s-a1", m), class, nodeA, "10Mi"),
		}
		f.createPVs(statics...)

		// CreateVolume for claim "onb" is held until released, so the test can act while the
		// provisioning is in flight.
		release := make(chan struct{})
		var once sync.Once
		held := make(chan struct{}, 1)
		cl.CSI.SetHook(func(method string, req any) error {
			if r, ok := req.(*csi.CreateVolumeRequest); ok && r.GetParameters()[paramClaimName] == "onb" {
				select {
				case held <- struct{}{}:
				default:
				}
				<-release
			}
			return nil
		})
		defer cl.CSI.SetHook(nil)
		defer once.Do(func() { close(release) })

		claims := []*corev1.PersistentVolumeClaim{claim(ns, "ona", class, "10Mi"), claim(ns, "onb", class, "10Mi"), claim(ns, "onc", class, "10Mi")}
		createClaims(t, claims...)
		for _, pn := range []struct{ name, node string }{{"ona", nodeA}, {"onb", nodeB}, {"onc", nodeC}} {
			p := pod(ns, pn.name, pn.name)
			p.Spec.NodeSelector = map[string]string{corev1.LabelHostname: pn.node}
			create(t, p)
		}
		select {
		case <-held:
		case <-time.After(time.Minute):
			t.Fatalf("CreateVolume for claim onb never came; %s", cl.Logs())
		}
		// A static volume appears on node-b while its provisioning is in flight.
		late := csiPV(fmt.Sprintf("mixed-%s-b-late", m), class, nodeB, "10Mi")
		f.createPVs(late)
		time.Sleep(3 * time.Second)
		if pv := harness.GetPV(t, cl.Client, late.Name); pv.Spec.ClaimRef != nil || pv.Status.Phase != corev1.VolumeAvailable {
			t.Errorf("the static volume that appeared while claim onb was being provisioned for: claimRef %+v phase %s, want left alone and Available", pv.Spec.ClaimRef, pv.Status.Phase)
		}
		if pvc := harness.GetPVC(t, cl.Client, ns, "onb"); pvc.Spec.VolumeName != "" {
			t.Errorf("claim onb bound to %s while its provisioning was in flight", pvc.Spec.VolumeName)
		}
		once.Do(func() { close(release) })
		harness.WaitFor(t, 2*time.Minute, "every claim Bound and every pod scheduled", func(ctx context.Context) (bool, error) {
			return allBoundAndScheduled(ctx, ns)
		})

		s := newEndState()
		pvc := harness.GetPVC(t, cl.Client, ns, "ona")
		if pv := expectBoundPair(t, pvc); pv != nil {
			if !strings.HasPrefix(pv.Name, fmt.Sprintf("mixed-%s-a", m)) {
				t.Errorf("claim ona bound to %s, want one of the static volumes of %s", pv.Name, nodeA)
			} else {
				s.add("claim on a node with a static volume: given a static one, not provisioned", 1)
			}
			if w := claimRefWriters(pv); !slices.Equal(w, []string{"kube-scheduler"}) {
				t.Errorf("volume %s: spec.claimRef written by %v, want kube-scheduler alone", pv.Name, w)
			}
			shape(s, pvc, pv)
		}
		var provisioned []string
		for _, name := range []string{"onb", "onc"} {
			if pv := provisionedPair(t, s, ns, name); pv != nil {
				provisioned = append(provisioned, pv.Name)
			}
		}
		f.volumes = append(f.volumes, provisioned...)
		if pv := harness.GetPV(t, cl.Client, late.Name); pv.Spec.ClaimRef != nil || pv.Status.Phase != corev1.VolumeAvailable {
			t.Errorf("late static volume %s: claimRef %+v phase %s at the end, want Available", pv.Name, pv.Spec.ClaimRef, pv.Status.Phase)
		} else {
			s.add("static volume that appeared during provisioning: left Available", 1)
		}
		// Count volumes per claim: exactly one each.
		var pvs corev1.PersistentVolumeList
		if err := cl.Client.List(ctx, &pvs); err != nil {
			t.Fatal(err)
		}
		perClaim := map[string]int{}
		for _, pv := range pvs.Items {
			if ref := pv.Spec.ClaimRef; ref != nil && ref.Namespace == ns {
				perClaim[ref.Name]++
			}
		}
		for _, c := range claims {
			if perClaim[c.Name] != 1 {
				t.Errorf("claim %s is named by %d volumes, want 1", c.Name, perClaim[c.Name])
			}
		}
		if got := f.newCalls("CreateVolume"); got < 2 {
			t.Errorf("CreateVolume called %d times, want at least 2 (claims onb and onc)", got)
		}
		f.noLeak()
		settleUnused(t, s, ns)
		s.reasons = kindReasons(t, ns, f.volumes)
		f.deleteAll(provisioned)
		checkAdmission(t, before, readCounters(t))
		return s
	})
}

// TestRaceWithProvisionerFallback is flow d with its fallback: many pods at once for fewer
// static volumes than claims, in a class whose provisioner makes a volume for every pod whose
// node has no static volume left. Every claim ends bound to exactly one volume, each static
// volume to at most one claim on its node, the rest provisioned on their pods' nodes; pvguard's
// binder loses no write to a conflict; the backend holds exactly the provisioned volumes.
func TestRaceWithProvisionerFallback(t *testing.T) {
	const perNode, pods = 2, 15
	forEachMode(t, func(t *testing.T, m cluster.Mode) *endState {
		ctx := context.Background()
		before := readCounters(t)
		f := newCSIFlow(t, "fallback", m)
		ns := f.ns
		class := "csi-fallback-" + string(m)
		csiClass(t, class, storagev1.VolumeBindingWaitForFirstConsumer)
		var statics []*corev1.PersistentVolume
		for _, n := range cl.Nodes {
			for i := range perNode {
				statics = append(statics, csiPV(fmt.Sprintf("fallback-%s-%s-%d", m, n, i), class, n, "10Mi"))
			}
		}
		f.createPVs(statics...)
		var claims []*corev1.PersistentVolumeClaim
		for i := range pods {
			claims = append(claims, claim(ns, fmt.Sprintf("app-%02d", i), class, "10Mi"))
		}
		createClaims(t, claims...)
		var wg sync.WaitGroup
		for _, c := range claims {
			wg.Go(func() {
				if err := cl.Client.Create(ctx, pod(ns, c.Name, c.Name)); err != nil {
					t.Errorf("creating pod %s: %v", c.Name, err)
				}
			})
		}
		wg.Wait()
		harness.WaitFor(t, 3*time.Minute, "every claim Bound and every pod scheduled", func(ctx context.Context) (bool, error) {
			return allBoundAndScheduled(ctx, ns)
		})
		time.Sleep(2 * time.Second)

		s := newEndState()
		owner := map[string]string{}
		var provisioned []string
		for _, c := range claims {
			p, pvc := getPod(t, ns, c.Name), harness.GetPVC(t, cl.Client, ns, c.Name)
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
			}
			if _, dynamic := pv.Annotations[annProvisionedBy]; dynamic {
				provisioned = append(provisioned, pv.Name)
			} else if w := claimRefWriters(pv); !slices.Equal(w, []string{"kube-scheduler"}) {
				t.Errorf("static volume %s: spec.claimRef written by %v, want kube-scheduler alone", pv.Name, w)
			}
		}
		f.volumes = append(f.volumes, provisioned...)
		staticBound := 0
		for _, pv := range statics {
			if harness.GetPV(t, cl.Client, pv.Name).Spec.ClaimRef != nil {
				staticBound++
			}
		}
		// Which pods land where is the scheduler's choice; what both modes must agree on is
		// that every claim got exactly one volume and every static volume was used first on its
		// node only when a pod landed there.
		s.add("claims Bound", len(owner))
		if staticBound+len(provisioned) != pods {
			t.Errorf("%d static + %d provisioned volumes bound for %d claims", staticBound, len(provisioned), pods)
		}
		if got := f.newCalls("CreateVolume"); got < len(provisioned) {
			t.Errorf("CreateVolume called %d times for %d provisioned volumes", got, len(provisioned))
		}
		t.Logf("%s: %d static and %d provisioned volumes bound; CreateVolume called %d times", m, staticBound, len(provisioned), f.newCalls("CreateVolume"))
		f.noLeak()
		s.reasons = kindReasons(t, ns, f.volumes)
		after := readCounters(t)
		checkAdmission(t, before, after)
		if conflicts, _ := after.since(before); m == cluster.ModePVGuard && conflicts > 0 {
			t.Errorf("pvguard's binder lost %d writes to conflicts (409); see %s", conflicts, cl.PVGuard().Log)
		}
		f.deleteAll(provisioned)
		return s
	})
}

// allBoundAndScheduled reports whether every claim of the namespace is Bound and every pod has a
// node.
func allBoundAndScheduled(ctx context.Context, ns string) (bool, error) {
	var claims corev1.PersistentVolumeClaimList
	var pl corev1.PodList
	if err := cl.Client.List(ctx, &claims, client.InNamespace(ns)); err != nil {
		return false, err
	}
	if err := cl.Client.List(ctx, &pl, client.InNamespace(ns)); err != nil {
		return false, err
	}
	for _, c := range claims.Items {
		if c.Status.Phase != corev1.ClaimBound {
			return false, fmt.Errorf("claim %s %s", c.Name, c.Status.Phase)
		}
	}
	for _, p := range pl.Items {
		if p.Spec.NodeName == "" {
			return false, fmt.Errorf("pod %s not scheduled", p.Name)
		}
	}
	return true, nil
}
