package policy_test

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/test/testobj"
)

const zoneKey = "topology.kubernetes.io/zone"

func TestPVG009NodeAffinityMatch(t *testing.T) {
	node := testobj.Node("node-1", map[string]string{zoneKey: "zone-a"})
	selected := testobj.ClaimMeta(testobj.Annotation(policy.AnnSelectedNode, "node-1"))
	claim := testobj.PVC("team-a", "data", selected)
	inZone := testobj.PV("pv-7", testobj.NodeAffinity(zoneKey, "zone-a"))
	otherZone := testobj.PV("pv-7", testobj.NodeAffinity(zoneKey, "zone-b"))
	bind := testobj.BindSteps(inZone, claim)
	view := testobj.NewView(node, claim, inZone)

	provisioned := testobj.PV("pvc-uid", testobj.ClaimRef("team-a", "data", string(claim.UID)),
		testobj.NodeAffinity(zoneKey, "zone-a"),
		testobj.PVMeta(testobj.Annotation(policy.AnnProvisionedBy, "csi.example.com")))

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
			name:   "selected node that does not exist cannot be judged",
			review: pvcCreate(tenant, testobj.PVC("team-a", "data", selected, testobj.VolumeName("pv-7"))),
			view:   testobj.NewView(otherZone),
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
		testobj.ClaimMeta(testobj.Annotation(policy.AnnSelectedNode, "node-1")), testobj.VolumeName("pv-7")))
	_, err := policy.NewEngine(onlyRule(t, "PVG009")).Admit(r, view)
	if err == nil || !errors.Is(err, view.Err) || !strings.Contains(err.Error(), "PVG009") {
		t.Fatalf("Admit error = %v, want the view's error wrapped with the rule", err)
	}
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
