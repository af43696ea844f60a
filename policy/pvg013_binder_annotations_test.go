package policy_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/storage"
	"github.com/pvguard/pvguard/test/testobj"
)

func TestPVG013BinderAnnotations(t *testing.T) {
	ann := func(k, v string) testobj.MetaMod { return testobj.Annotation(k, v) }
	claim := testobj.PVC("team-a", "data")
	scheduled := testobj.PVCWith(claim, testobj.ClaimMeta(ann(storage.AnnSelectedNode, "node-1")))
	bind := testobj.BindSteps(testobj.PV("pv-7"), claim)
	provisioned := testobj.PV("pvc-uid", testobj.ClaimRef("team-a", "data", string(claim.UID)),
		testobj.PVMeta(ann(storage.AnnProvisionedBy, "csi.example.com")))
	kcm := policy.UserInfo{Username: "system:kube-controller-manager"}
	// A populator's target claim, scheduled to node-1, and the claim made for it.
	const targetUID = "0f5c3f5e-6b0a-4c47-9d43-7c2f2b1e9a10"
	target := testobj.PVC("team-a", "db", testobj.ClaimUID(targetUID), testobj.DataSourceRef("example.io", "Hello", "hello"),
		testobj.ClaimMeta(ann(storage.AnnSelectedNode, "node-1")))
	primeOnNode := func(node string) *corev1.PersistentVolumeClaim {
		return testobj.PVC("populators", "prime-"+targetUID, testobj.ClaimMeta(ann(storage.AnnSelectedNode, node)))
	}

	runRuleCases(t, "PVG013", append([]ruleCase{
		{
			name:     "user creating a claim that claims to be bound is warned",
			review:   pvcCreate(tenant, testobj.PVC("team-a", "data", testobj.ClaimMeta(ann(storage.AnnBindCompleted, "yes")))),
			want:     []string{"metadata.annotations[pv.kubernetes.io/bind-completed]"},
			wantText: "alice added annotation pv.kubernetes.io/bind-completed to PersistentVolumeClaim team-a/data, but only the binding controllers (PV controller, scheduler, provisioners) manage it; leave pv.kubernetes.io/bind-completed to the controllers",
		},
		{
			name:   "user choosing a node for a claim is warned",
			review: pvcUpdate(tenant, claim, scheduled),
			want:   []string{"metadata.annotations[volume.kubernetes.io/selected-node]"},
		},
		{
			name:   "user moving a claim to another node is warned",
			review: pvcUpdate(tenant, scheduled, testobj.PVCWith(scheduled, testobj.ClaimMeta(ann(storage.AnnSelectedNode, "node-2")))),
			want:   []string{"metadata.annotations[volume.kubernetes.io/selected-node]"},
		},
		{
			name:     "user removing bind-completed is warned",
			review:   pvcUpdate(tenant, bind.PVCStatus, testobj.PVCWith(bind.PVCStatus, testobj.ClaimMeta(testobj.NoAnnotation(storage.AnnBindCompleted)))),
			want:     []string{"metadata.annotations[pv.kubernetes.io/bind-completed]"},
			wantText: "alice removed annotation pv.kubernetes.io/bind-completed from PersistentVolumeClaim team-a/data",
		},
		{
			name:   "admin creating a volume that claims a controller bound it is warned",
			review: pvCreate(admin, testobj.PV("pv-7", testobj.PVMeta(ann(storage.AnnProvisionedBy, "csi.example.com"), ann(storage.AnnBoundByController, "yes")))),
			want: []string{
				"metadata.annotations[pv.kubernetes.io/bound-by-controller]",
			},
		},
		{
			name:   "a populator's claim made for a waiting claim copies its selected node",
			review: pvcCreate(unlistedProvisioner, primeOnNode("node-1")),
			view:   testobj.NewView(target),
		},
		{
			name:   "a claim made for another claim may not choose another node than that claim's",
			review: pvcCreate(tenant, primeOnNode("node-2")),
			view:   testobj.NewView(target),
			want:   []string{"metadata.annotations[volume.kubernetes.io/selected-node]"},
		},
		{
			name:   "a claim named after the uid of a claim that waits for no data may not choose a node",
			review: pvcCreate(tenant, primeOnNode("node-1")),
			view:   testobj.NewView(testobj.PVCWith(target, func(c *corev1.PersistentVolumeClaim) { c.Spec.DataSourceRef = nil })),
			want:   []string{"metadata.annotations[volume.kubernetes.io/selected-node]"},
		},
		{
			name:   "a claim named after a uid no claim has may not choose a node",
			review: pvcCreate(tenant, primeOnNode("node-1")),
			want:   []string{"metadata.annotations[volume.kubernetes.io/selected-node]"},
		},
		{
			name: "removing bound-by-controller in the write that re-points the volume is allowed (Velero's restore)",
			review: pvUpdate(tenant, testobj.PV("pv-7", testobj.ClaimRef("velero", "restore-x", "uid-gone"), testobj.PVMeta(ann(storage.AnnBoundByController, "yes"))),
				testobj.PV("pv-7", testobj.ClaimRef("team-a", "data", ""))),
		},
		{
			name: "removing bound-by-controller and keeping the link is warned",
			review: pvUpdate(tenant, testobj.PV("pv-7", testobj.ClaimRef("team-a", "data", "uid-x"), testobj.PVMeta(ann(storage.AnnBoundByController, "yes"))),
				testobj.PV("pv-7", testobj.ClaimRef("team-a", "data", "uid-x"))),
			want: []string{"metadata.annotations[pv.kubernetes.io/bound-by-controller]"},
		},
		{
			name:   "other annotations are free",
			review: pvcUpdate(tenant, bind.PVCStatus, testobj.PVCWith(bind.PVCStatus, testobj.ClaimMeta(ann("example.com/owner", "alice")))),
		},
		{
			name:   "rewriting the same value is no change",
			review: pvcUpdate(tenant, scheduled, testobj.PVCWith(scheduled, testobj.ClaimMeta(ann(storage.AnnSelectedNode, "node-1")))),
		},
		{
			name:   "controller manager without service account credentials is allowed",
			review: pvcUpdate(kcm, bind.PVC, bind.PVCSpec),
		},
		{
			name:   "scheduler selecting a node is allowed",
			review: pvcUpdate(scheduler, claim, scheduled),
		},
		{
			name:   "external provisioner creating a provisioned volume is allowed",
			review: pvCreate(provisioner, provisioned),
			config: provisionerConfig(),
		},
		{
			name:   "external provisioner dropping selected-node to reschedule is allowed",
			review: pvcUpdate(provisioner, scheduled, claim),
			config: provisionerConfig(),
		},
		{
			name:   "an external provisioner no config names saving the volume it made is allowed (default install)",
			review: pvCreate(unlistedProvisioner, provisioned),
		},
		{
			name:   "an external provisioner no config names dropping selected-node to reschedule is allowed",
			review: pvcUpdate(unlistedProvisioner, scheduled, claim),
		},
		{
			name:   "a static provisioner no config names creating the volumes it discovered is allowed (default install)",
			review: pvCreate(unlistedProvisioner, testobj.PV("local-pv-1a2b3c4d", testobj.PVMeta(ann(storage.AnnProvisionedBy, "local-volume-provisioner-node-1")))),
		},
		{
			name:   "provisioned-by added to an existing volume is warned",
			review: pvUpdate(unlistedProvisioner, testobj.PV("pvc-uid", testobj.ClaimRef("team-a", "data", string(claim.UID))), provisioned),
			want:   []string{"metadata.annotations[pv.kubernetes.io/provisioned-by]"},
		},
		{
			name:   "removing selected-node from a bound claim is warned",
			review: pvcUpdate(tenant, testobj.PVCWith(scheduled, testobj.ClaimBoundTo("pv-7")), testobj.PVCWith(claim, testobj.ClaimBoundTo("pv-7"))),
			want:   []string{"metadata.annotations[volume.kubernetes.io/selected-node]"},
		},
		{
			name:   "controllers configured by group are allowed",
			review: pvCreate(policy.UserInfo{Username: "velero", Groups: []string{"backup-operators"}}, provisioned),
			config: mustConfig(t, "controllers:\n  groups: [backup-operators]\n"),
		},
	}, bindWriteCases(bind, nil)...))
}
