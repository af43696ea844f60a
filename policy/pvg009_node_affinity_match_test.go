package policy_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/storage"
	"github.com/pvguard/pvguard/test/testobj"
)

const zoneKey = "topology.kubernetes.io/zone"

func TestPVG009NodeAffinityMatch(t *testing.T) {
	node := testobj.Node("node-1", map[string]string{zoneKey: "zone-a"})
	selected := testobj.ClaimMeta(testobj.Annotation(storage.AnnSelectedNode, "node-1"))
	claim := testobj.PVC("team-a", "data", selected)
	inZone := testobj.PV("pv-7", testobj.NodeAffinity(zoneKey, "zone-a"))
	otherZone := testobj.PV("pv-7", testobj.NodeAffinity(zoneKey, "zone-b"))
	bind := testobj.BindSteps(inZone, claim)
	view := testobj.NewView(node, claim, inZone)

	provisioned := testobj.PV("pvc-uid", testobj.ClaimRef("team-a", "data", string(claim.UID)),
		testobj.NodeAffinity(zoneKey, "zone-a"),
		testobj.PVMeta(testobj.Annotation(storage.AnnProvisionedBy, "csi.example.com")))

	runRuleCases(t, "PVG009", []ruleCase{
		{
			name:     "scheduled claim naming a volume out of the node's reach is denied",
			review:   pvcCreate(tenant, testobj.PVC("team-a", "data", selected, testobj.VolumeName("pv-7"))),
			view:     testobj.NewView(node, otherZone),
			want:     []string{"spec.volumeName"},
			wantText: "PersistentVolumeClaim team-a/data is scheduled to node node-1 (volume.kubernetes.io/selected-node), but the node affinity of PersistentVolume pv-7 does not admit that node; bind a volume reachable from node node-1, or drop spec.volumeName",
		},
		{
			name:   "scheduled claim naming a volume the node reaches is allowed",
			review: pvcCreate(tenant, testobj.PVC("team-a", "data", selected, testobj.VolumeName("pv-7"))),
			view:   testobj.NewView(node, inZone),
		},
		{
			name:   "claim without a selected node is not judged",
			review: pvcCreate(tenant, testobj.PVC("team-a", "data", testobj.VolumeName("pv-7"))),
			view:   testobj.NewView(node, otherZone),
		},
		{
			name:   "volume without node affinity is reachable from everywhere",
			review: pvcCreate(tenant, testobj.PVC("team-a", "data", selected, testobj.VolumeName("pv-7"))),
			view:   testobj.NewView(node, testobj.PV("pv-7")),
		},
		{
			name:   "unknown node, volume pinned to a zone: the zone cannot be known, not judged",
			review: pvcCreate(tenant, testobj.PVC("team-a", "data", selected, testobj.VolumeName("pv-7"))),
			view:   testobj.NewView(otherZone),
		},
		{
			name:     "unknown node, volume pinned to another host: judged by the kubelet's hostname label",
			review:   pvcCreate(tenant, testobj.PVC("team-a", "data", selected, testobj.VolumeName("pv-7"))),
			view:     testobj.NewView(testobj.PV("pv-7", testobj.NodeAffinity(corev1.LabelHostname, "node-2"))),
			want:     []string{"spec.volumeName"},
			wantText: "but the node affinity of PersistentVolume pv-7 does not admit that node (Node node-1 not found; judged by the labels every kubelet sets: kubernetes.io/hostname=node-1); bind a volume reachable from node node-1",
		},
		{
			name:   "unknown node, volume pinned to its host",
			review: pvcCreate(tenant, testobj.PVC("team-a", "data", selected, testobj.VolumeName("pv-7"))),
			view:   testobj.NewView(testobj.PV("pv-7", testobj.NodeAffinity(corev1.LabelHostname, "node-0", "node-1"))),
		},
		{
			name:   "unknown node, volume pinned to another node by name (matchFields)",
			review: pvcCreate(tenant, testobj.PVC("team-a", "data", selected, testobj.VolumeName("pv-7"))),
			view:   testobj.NewView(testobj.PV("pv-7", testobj.NodeSelector(nodeTerms(fieldTerm("node-2"))))),
			want:   []string{"spec.volumeName"},
		},
		{
			name:   "unknown node, volume pinned to it by name (matchFields)",
			review: pvcCreate(tenant, testobj.PVC("team-a", "data", selected, testobj.VolumeName("pv-7"))),
			view:   testobj.NewView(testobj.PV("pv-7", testobj.NodeSelector(nodeTerms(fieldTerm("node-1"))))),
		},
		{
			name:   "unknown node, volume excluding its host (NotIn)",
			review: pvcCreate(tenant, testobj.PVC("team-a", "data", selected, testobj.VolumeName("pv-7"))),
			view: testobj.NewView(testobj.PV("pv-7", testobj.NodeSelector(nodeTerms(corev1.NodeSelectorTerm{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpNotIn, Values: []string{"node-1"}}},
			})))),
			want: []string{"spec.volumeName"},
		},
		{
			name:   "unknown node, term asking another host and a zone: the host alone rules it out",
			review: pvcCreate(tenant, testobj.PVC("team-a", "data", selected, testobj.VolumeName("pv-7"))),
			view:   testobj.NewView(testobj.PV("pv-7", testobj.NodeSelector(nodeTerms(hostAndZone("node-2", "zone-a"))))),
			want:   []string{"spec.volumeName"},
		},
		{
			name:   "unknown node, term asking its host and a zone: the zone cannot be known, not judged",
			review: pvcCreate(tenant, testobj.PVC("team-a", "data", selected, testobj.VolumeName("pv-7"))),
			view:   testobj.NewView(testobj.PV("pv-7", testobj.NodeSelector(nodeTerms(hostAndZone("node-1", "zone-a"))))),
		},
		{
			name:   "unknown node, one term for another host and one for a zone: not judged",
			review: pvcCreate(tenant, testobj.PVC("team-a", "data", selected, testobj.VolumeName("pv-7"))),
			view: testobj.NewView(testobj.PV("pv-7", testobj.NodeSelector(nodeTerms(hostAndZone("node-2", ""), corev1.NodeSelectorTerm{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: zoneKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"zone-a"}}},
			})))),
		},
		{
			name:   "unknown node, every term for another host",
			review: pvcCreate(tenant, testobj.PVC("team-a", "data", selected, testobj.VolumeName("pv-7"))),
			view:   testobj.NewView(testobj.PV("pv-7", testobj.NodeSelector(nodeTerms(hostAndZone("node-2", ""), fieldTerm("node-3"))))),
			want:   []string{"spec.volumeName"},
		},
		{
			name:     "a known node is judged by its own labels, not the assumption",
			review:   pvcCreate(tenant, testobj.PVC("team-a", "data", selected, testobj.VolumeName("pv-7"))),
			view:     testobj.NewView(testobj.Node("node-1", map[string]string{corev1.LabelHostname: "host-a"}), testobj.PV("pv-7", testobj.NodeAffinity(corev1.LabelHostname, "node-1"))),
			want:     []string{"spec.volumeName"},
			wantText: "does not admit that node; bind",
		},
		{
			name:   "unknown node, volume pre-bound by an admin to a claim scheduled to another host",
			review: pvCreate(admin, testobj.PV("pv-7", testobj.NodeAffinity(corev1.LabelHostname, "node-2"), testobj.ClaimRef("team-a", "data", ""))),
			view:   testobj.NewView(claim),
			want:   []string{"spec.claimRef"},
		},
		{
			name:   "match fields on the node name are honoured",
			review: pvcCreate(tenant, testobj.PVC("team-a", "data", selected, testobj.VolumeName("pv-7"))),
			view: testobj.NewView(node, testobj.PV("pv-7", testobj.NodeSelector(&corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{
					Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"node-1"},
				}}}},
			}))),
		},
		{
			name:   "any one of several terms admitting the node is enough",
			review: pvcCreate(tenant, testobj.PVC("team-a", "data", selected, testobj.VolumeName("pv-7"))),
			view: testobj.NewView(node, testobj.PV("pv-7", testobj.NodeSelector(&corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{
					{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: zoneKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"zone-b"}}}},
					{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: zoneKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"zone-a"}}}},
				},
			}))),
		},
		{
			name:   "invalid node selector on the volume is a finding on the volume",
			review: pvcCreate(tenant, testobj.PVC("team-a", "data", selected, testobj.VolumeName("pv-7"))),
			view: testobj.NewView(node, testobj.PV("pv-7", testobj.NodeSelector(&corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
					Key: zoneKey, Operator: "Near", Values: []string{"zone-a"},
				}}}},
			}))),
			want:     []string{"spec.nodeAffinity"},
			wantText: "PersistentVolume pv-7 has an invalid node affinity",
		},
		{
			name:   "volume pre-bound by an admin to a claim scheduled elsewhere is denied",
			review: pvCreate(admin, testobj.PVWith(otherZone, testobj.ClaimRef("team-a", "data", ""))),
			view:   testobj.NewView(node, claim),
			want:   []string{"spec.claimRef"},
		},
		{
			name:   "scheduler selecting a node is not a bind",
			review: pvcUpdate(scheduler, testobj.PVC("team-a", "data", testobj.VolumeName("pv-7")), testobj.PVC("team-a", "data", selected, testobj.VolumeName("pv-7"))),
			view:   testobj.NewView(node, otherZone),
		},
		{
			name:   "binder write 1 (PV spec) is allowed",
			review: pvUpdate(binder, bind.PV, bind.PVSpec),
			view:   view,
		},
		{
			name:   "binder write 2 (PV status) is allowed",
			review: pvStatus(binder, bind.PVSpec, bind.PVStatus),
			view:   view,
		},
		{
			name:   "binder write 3 (PVC spec) is allowed",
			review: pvcUpdate(binder, bind.PVC, bind.PVCSpec),
			view:   testobj.NewView(node, bind.PVStatus),
		},
		{
			name:   "binder write 4 (PVC status) is allowed",
			review: pvcStatus(binder, bind.PVCSpec, bind.PVCStatus),
			view:   testobj.NewView(node, bind.PVStatus),
		},
		{
			name:   "external provisioner creating a pre-bound volume in the node's zone is allowed",
			review: pvCreate(provisioner, provisioned),
			view:   view,
			config: provisionerConfig(),
		},
		{
			name:   "external provisioner creating a volume in another zone is denied",
			review: pvCreate(provisioner, testobj.PVWith(provisioned, testobj.NodeAffinity(zoneKey, "zone-b"))),
			view:   view,
			config: provisionerConfig(),
			want:   []string{"spec.claimRef"},
		},
	})
}

func TestPVG009ViewErrorIsReturned(t *testing.T) {
	view := testobj.NewView()
	view.Err = errors.New("cache not synced")
	r := pvcCreate(tenant, testobj.PVC("team-a", "data",
		testobj.ClaimMeta(testobj.Annotation(storage.AnnSelectedNode, "node-1")), testobj.VolumeName("pv-7")))
	_, err := policy.NewEngine(onlyRule(t, "PVG009")).Admit(r, view)
	if err == nil || !errors.Is(err, view.Err) || !strings.Contains(err.Error(), "PVG009") {
		t.Fatalf("Admit error = %v, want the view's error wrapped with the rule", err)
	}
}

func nodeTerms(terms ...corev1.NodeSelectorTerm) *corev1.NodeSelector {
	return &corev1.NodeSelector{NodeSelectorTerms: terms}
}

// fieldTerm admits the node of that name by metadata.name.
func fieldTerm(name string) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{name}}}}
}

// hostAndZone asks for a hostname and, unless zone is empty, a zone, in one term.
func hostAndZone(host, zone string) corev1.NodeSelectorTerm {
	t := corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{host}}}}
	if zone != "" {
		t.MatchExpressions = append(t.MatchExpressions, corev1.NodeSelectorRequirement{Key: zoneKey, Operator: corev1.NodeSelectorOpIn, Values: []string{zone}})
	}
	return t
}

// onlyRule is a config that turns every rule but one off, so an error from a view can be pinned
// on the rule under test.
func onlyRule(t *testing.T, id policy.RuleID) *policy.Config {
	t.Helper()
	var b strings.Builder
	b.WriteString("rules:\n")
	for _, rl := range policy.Catalogue() {
		if rl.ID != id {
			b.WriteString("  " + string(rl.ID) + ": {action: off}\n")
		}
	}
	return mustConfig(t, b.String())
}

// A change of a linked volume's node affinity (the MutablePVNodeAffinity feature gate) must keep
// admitting the node its claim is scheduled to and the nodes of the pods using the claim.
func TestPVG009NodeAffinityChange(t *testing.T) {
	claim := testobj.PVC("team-a", "data", testobj.VolumeName("pv-7"),
		testobj.ClaimMeta(testobj.Annotation(storage.AnnBindCompleted, "yes")))
	bound := func(hosts ...string) *corev1.PersistentVolume {
		return testobj.PV("pv-7", testobj.BoundTo(claim), testobj.NodeAffinity(corev1.LabelHostname, hosts...))
	}
	nodes := []*corev1.Node{
		testobj.Node("node-1", map[string]string{zoneKey: "zone-a"}),
		testobj.Node("node-2", map[string]string{zoneKey: "zone-b"}),
		testobj.Node("node-3", map[string]string{zoneKey: "zone-b"}),
	}
	view := func(objs ...runtime.Object) *testobj.View {
		for _, n := range nodes {
			objs = append(objs, n)
		}
		return testobj.NewView(objs...)
	}
	running := testobj.Pod("team-a", "app-0", "node-1", corev1.PodRunning, "data")
	scheduled := testobj.Pod("team-a", "app-0", "node-1", corev1.PodPending, "data")
	selected := testobj.PVCWith(claim, testobj.ClaimMeta(testobj.Annotation(storage.AnnSelectedNode, "node-1")))

	runRuleCases(t, "PVG009", []ruleCase{
		{
			name:     "narrowing away from the node a pod runs on is denied, naming the pod and the node",
			review:   pvUpdate(admin, bound("node-1", "node-2"), bound("node-2")),
			view:     view(claim, running),
			want:     []string{"spec.nodeAffinity"},
			wantText: "[PVG009 node-affinity-match] the new node affinity of PersistentVolume pv-7 does not admit node node-1, where Pod team-a/app-0 using PersistentVolumeClaim team-a/data runs on it; keep node node-1 in spec.nodeAffinity of PersistentVolume pv-7 while Pod team-a/app-0 is there",
		},
		{
			name:     "narrowing away from the node a pod is scheduled to is denied",
			review:   pvUpdate(admin, bound("node-1", "node-2"), bound("node-2")),
			view:     view(claim, scheduled),
			want:     []string{"spec.nodeAffinity"},
			wantText: "where Pod team-a/app-0 using PersistentVolumeClaim team-a/data is scheduled to it",
		},
		{
			name:   "widening is allowed",
			review: pvUpdate(admin, bound("node-1"), bound("node-1", "node-2", "node-3")),
			view:   view(claim, running),
		},
		{
			name:   "narrowing to the node the pod runs on is allowed",
			review: pvUpdate(admin, bound("node-1", "node-2"), bound("node-1")),
			view:   view(claim, running),
		},
		{
			name: "moving from hostnames to a zone holding the pod's node is allowed",
			review: pvUpdate(admin, bound("node-1", "node-2"),
				testobj.PVWith(bound(), testobj.NodeAffinity(zoneKey, "zone-a"))),
			view: view(claim, running),
		},
		{
			name: "moving to a zone without the pod's node is denied",
			review: pvUpdate(admin, bound("node-1", "node-2"),
				testobj.PVWith(bound(), testobj.NodeAffinity(zoneKey, "zone-b"))),
			view: view(claim, running),
			want: []string{"spec.nodeAffinity"},
		},
		{
			name:   "dropping the affinity altogether is a widening",
			review: pvUpdate(admin, bound("node-1"), testobj.PVWith(bound(), func(pv *corev1.PersistentVolume) { pv.Spec.NodeAffinity = nil })),
			view:   view(claim, running),
		},
		{
			name: "setting an affinity where there was none is judged like any narrowing",
			review: pvUpdate(admin, testobj.PVWith(bound(), func(pv *corev1.PersistentVolume) { pv.Spec.NodeAffinity = nil }),
				bound("node-2")),
			view: view(claim, running),
			want: []string{"spec.nodeAffinity"},
		},
		{
			name:   "a finished pod holds no node",
			review: pvUpdate(admin, bound("node-1", "node-2"), bound("node-2")),
			view:   view(claim, testobj.Pod("team-a", "app-0", "node-1", corev1.PodSucceeded, "data")),
		},
		{
			name:   "a pod not scheduled yet holds no node",
			review: pvUpdate(admin, bound("node-1", "node-2"), bound("node-2")),
			view:   view(claim, testobj.Pod("team-a", "app-0", "", corev1.PodPending, "data")),
		},
		{
			name:   "a pod of another claim, or of a claim of that name elsewhere, is not the claim's",
			review: pvUpdate(admin, bound("node-1", "node-2"), bound("node-2")),
			view:   view(claim, testobj.Pod("team-a", "app-0", "node-1", corev1.PodRunning, "other"), testobj.Pod("team-b", "app-0", "node-1", corev1.PodRunning, "data")),
		},
		{
			name: "a generic ephemeral volume's claim is the pod's",
			review: pvUpdate(admin,
				testobj.PV("pv-7", testobj.ClaimRef("team-a", "app-0-scratch", "uid-team-a-app-0-scratch"), testobj.NodeAffinity(corev1.LabelHostname, "node-1")),
				testobj.PV("pv-7", testobj.ClaimRef("team-a", "app-0-scratch", "uid-team-a-app-0-scratch"), testobj.NodeAffinity(corev1.LabelHostname, "node-2"))),
			view: view(testobj.PVC("team-a", "app-0-scratch"), func() *corev1.Pod {
				p := testobj.Pod("team-a", "app-0", "node-1", corev1.PodRunning)
				p.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}}}
				return p
			}()),
			want: []string{"spec.nodeAffinity"},
		},
		{
			name:     "narrowing away from the claim's selected node is denied",
			review:   pvUpdate(admin, bound("node-1", "node-2"), bound("node-2")),
			view:     view(selected),
			want:     []string{"spec.nodeAffinity"},
			wantText: "the new node affinity of PersistentVolume pv-7 does not admit node node-1, to which PersistentVolumeClaim team-a/data is scheduled (volume.kubernetes.io/selected-node); keep node node-1",
		},
		{
			name:   "the selected node and a pod, both on the node: two findings",
			review: pvUpdate(admin, bound("node-1", "node-2"), bound("node-2")),
			view:   view(selected, running),
			want:   []string{"spec.nodeAffinity", "spec.nodeAffinity"},
		},
		{
			name:   "a node the old affinity already excluded is not the write's doing",
			review: pvUpdate(admin, bound("node-2", "node-3"), bound("node-2")),
			view:   view(claim, running),
		},
		{
			name:     "a node that is gone is judged by its hostname label",
			review:   pvUpdate(admin, bound("node-9", "node-2"), bound("node-2")),
			view:     view(claim, testobj.Pod("team-a", "app-0", "node-9", corev1.PodRunning, "data")),
			want:     []string{"spec.nodeAffinity"},
			wantText: "(Node node-9 not found; judged by the labels every kubelet sets: kubernetes.io/hostname=node-9)",
		},
		{
			name: "a node that is gone, the volume moving between zones: not judged",
			review: pvUpdate(admin, testobj.PVWith(bound(), testobj.NodeAffinity(zoneKey, "zone-a")),
				testobj.PVWith(bound(), testobj.NodeAffinity(zoneKey, "zone-b"))),
			view: view(claim, testobj.Pod("team-a", "app-0", "node-9", corev1.PodRunning, "data")),
		},
		{
			name:   "a volume linked to no live claim keeps no pod's node",
			review: pvUpdate(admin, testobj.PVWith(bound("node-1"), testobj.ClaimRef("team-a", "data", "uid-earlier")), testobj.PVWith(bound("node-2"), testobj.ClaimRef("team-a", "data", "uid-earlier"))),
			view:   view(claim, running),
		},
		{
			name:   "an unlinked volume is not judged",
			review: pvUpdate(admin, testobj.PV("pv-7", testobj.NodeAffinity(corev1.LabelHostname, "node-1")), testobj.PV("pv-7", testobj.NodeAffinity(corev1.LabelHostname, "node-2"))),
			view:   view(claim, running),
		},
		{
			name:   "a write that leaves the affinity as it was is not judged again",
			review: pvUpdate(admin, bound("node-2"), testobj.PVWith(bound("node-2"), testobj.PVMeta(testobj.Annotation("note", "x")))),
			view:   view(claim, running),
		},
	})
}

func TestPVG009NodeAffinityChangeNamesThePodToItsReaders(t *testing.T) {
	claim := testobj.PVC("team-a", "data", testobj.VolumeName("pv-7"))
	old := testobj.PV("pv-7", testobj.BoundTo(claim), testobj.NodeAffinity(corev1.LabelHostname, "node-1", "node-2"))
	cur := testobj.PVWith(old, testobj.NodeAffinity(corev1.LabelHostname, "node-2"))
	view := testobj.NewView(claim, testobj.Pod("team-a", "app-0", "node-1", corev1.PodRunning, "data"))
	d, err := policy.NewEngine(onlyRule(t, "PVG009")).Admit(pvUpdate(admin, old, cur), view)
	if err != nil || len(d.Deny) != 1 {
		t.Fatalf("Admit = %+v, %v; want one denial", d, err)
	}
	other := policy.NamespaceReaders("team-b", view, nil)
	got := d.Deny[0].For(other)
	if strings.Contains(got, "app-0") || strings.Contains(got, "team-a") || !strings.Contains(got, policy.HiddenPod) || !strings.Contains(got, "node node-1") {
		t.Errorf("for a reader of team-b: %q; want the pod and claim hidden (%q), the node named", got, policy.HiddenPod)
	}
	own := d.Deny[0].For(policy.NamespaceReaders("team-a", view, nil))
	if !strings.Contains(own, "Pod team-a/app-0") {
		t.Errorf("for a reader of team-a: %q; want the pod named", own)
	}
}

func TestPVG009NodeAffinityChangeViewErrorIsReturned(t *testing.T) {
	claim := testobj.PVC("team-a", "data", testobj.VolumeName("pv-7"))
	old := testobj.PV("pv-7", testobj.BoundTo(claim), testobj.NodeAffinity(corev1.LabelHostname, "node-1", "node-2"))
	cur := testobj.PVWith(old, testobj.NodeAffinity(corev1.LabelHostname, "node-2"))
	view := &podsFail{View: testobj.NewView(claim), err: errors.New("pods not synced")}
	_, err := policy.NewEngine(onlyRule(t, "PVG009")).Admit(pvUpdate(admin, old, cur), view)
	if err == nil || !errors.Is(err, view.err) || !strings.Contains(err.Error(), "PVG009") {
		t.Fatalf("Admit error = %v, want the pod list's error wrapped with the rule", err)
	}
}

type podsFail struct {
	*testobj.View
	err error
}

func (v *podsFail) PodsUsingClaim(string, string) ([]*corev1.Pod, error) { return nil, v.err }

// The audit reports a bound pair whose volume does not reach the node of a pod using its claim,
// once, on the volume.
func TestPVG009AuditReportsPodsOutOfReach(t *testing.T) {
	claim := testobj.PVC("team-a", "data", testobj.VolumeName("pv-7"),
		testobj.ClaimMeta(testobj.Annotation(storage.AnnBindCompleted, "yes")))
	pv := testobj.PV("pv-7", testobj.BoundTo(claim), testobj.NodeAffinity(corev1.LabelHostname, "node-2"))
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want int
	}{
		{"pod on a node the volume does not reach", testobj.Pod("team-a", "app-0", "node-1", corev1.PodRunning, "data"), 1},
		{"pod on the volume's node", testobj.Pod("team-a", "app-0", "node-2", corev1.PodRunning, "data"), 0},
		{"pod not scheduled", testobj.Pod("team-a", "app-0", "", corev1.PodPending, "data"), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := testobj.NewView(claim, pv, tc.pod, testobj.Node("node-1", nil), testobj.Node("node-2", nil))
			found, err := policy.NewEngine(onlyRule(t, "PVG009")).Audit(v.State, time.Time{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(found) != tc.want {
				t.Fatalf("audit found %v; want %d findings", found, tc.want)
			}
			if tc.want == 0 {
				return
			}
			f := found[0]
			want := "[PVG009 node-affinity-match] Pod team-a/app-0 using PersistentVolumeClaim team-a/data runs on node node-1, which the node affinity of PersistentVolume pv-7 does not admit; delete Pod team-a/app-0 so that it is scheduled where the volume is, or (where the apiserver's MutablePVNodeAffinity gate is on) widen spec.nodeAffinity of PersistentVolume pv-7 to admit node node-1"
			if f.Object.Kind != policy.KindPersistentVolume || f.Field != "spec.nodeAffinity" || f.String() != want {
				t.Errorf("finding on %v %s: %q; want on the volume's spec.nodeAffinity: %q", f.Object, f.Field, f, want)
			}
			checkFixes(t, onlyRule(t, "PVG009"), nil, v.State, f)
		})
	}
}
