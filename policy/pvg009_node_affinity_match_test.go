package policy_test

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

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
