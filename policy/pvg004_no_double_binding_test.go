package policy_test

import (
	"testing"

	"github.com/pvguard/pvguard/storage"
	"github.com/pvguard/pvguard/test/testobj"
)

func TestPVG004NoDoubleBinding(t *testing.T) {
	claim := testobj.PVC("team-a", "data")
	recreated := testobj.PVC("team-a", "data", testobj.ClaimUID("5678"))
	other := testobj.PVC("team-b", "other", testobj.ClaimBoundTo("pv-7"))
	otherPending := testobj.PVC("team-b", "other")
	otherRecreated := testobj.PVC("team-b", "other", testobj.ClaimUID("9999"))
	byController := testobj.PVMeta(testobj.Annotation(storage.AnnBoundByController, "yes"))
	free := testobj.PV("pv-7")
	takenByOther := testobj.PV("pv-7", testobj.BoundTo(otherPending))
	preBoundToOther := testobj.PV("pv-7", testobj.ClaimRef("team-b", "other", ""))
	step1 := testobj.PV("pv-7", testobj.ClaimRef("team-a", "data", string(claim.UID)), byController)
	wantsVolume := testobj.PVC("team-a", "data", testobj.VolumeName("pv-7"))

	runRuleCases(t, "PVG004", []ruleCase{
		// A second volume for one claim: two binders (or one that woke from a freeze) each
		// choosing a volume for the same claim.
		{
			name:     "linking a second volume to a claim another volume is linked to is denied",
			review:   pvUpdate(binder, free, step1),
			view:     testobj.NewView(claim, testobj.PV("pv-9", testobj.BoundTo(claim), byController)),
			want:     []string{"spec.claimRef"},
			wantText: "PersistentVolume pv-7 points spec.claimRef at PersistentVolumeClaim team-a/data, which PersistentVolume pv-9 is already linked to; one claim would be claimed by two volumes",
		},
		{
			name:   "pre-binding by name a second volume to a claim another volume is linked to is denied",
			review: pvUpdate(admin, free, testobj.PV("pv-7", testobj.ClaimRef("team-a", "data", ""))),
			view:   testobj.NewView(claim, testobj.PV("pv-9", testobj.BoundTo(claim))),
			want:   []string{"spec.claimRef"},
		},
		{
			name:   "a link of another volume to an earlier claim of the same name does not count",
			review: pvUpdate(binder, free, testobj.PV("pv-7", testobj.BoundTo(recreated), byController)),
			view:   testobj.NewView(recreated, testobj.PV("pv-9", testobj.BoundTo(claim))),
		},
		{
			name:   "re-linking the volume a claim completed its binding to is allowed whatever else links the claim",
			review: pvUpdate(binder, free, testobj.PV("pv-7", testobj.BoundTo(claim), byController)),
			view:   testobj.NewView(testobj.PVCWith(claim, testobj.ClaimBoundTo("pv-7")), testobj.PV("pv-9", testobj.BoundTo(claim))),
		},
		{
			name: "a provisioner saves the volume it made for a claim another volume was linked to meanwhile",
			review: pvCreate(unlistedProvisioner, testobj.PV("pvc-1234", testobj.ClaimRef("team-a", "data", string(claim.UID)),
				testobj.PVMeta(testobj.Annotation(storage.AnnProvisionedBy, "csi.example.com")))),
			view: testobj.NewView(claim, testobj.PV("pv-9", testobj.BoundTo(claim))),
		},
		// The binder's four writes and an external provisioner.
		{
			name:   "binder step 1 (PV spec) to a pending claim is allowed",
			review: pvUpdate(binder, free, step1),
			view:   testobj.NewView(claim),
		},
		{
			name:   "binder step 2 (PV status) is allowed",
			review: pvStatus(binder, step1, testobj.PV("pv-7", testobj.BoundTo(claim), byController)),
			view:   testobj.NewView(claim),
		},
		{
			name:   "binder step 3 (PVC spec) after step 1 is allowed",
			review: pvcUpdate(binder, claim, testobj.PVC("team-a", "data", testobj.ClaimBoundTo("pv-7"))),
			view:   testobj.NewView(testobj.PV("pv-7", testobj.BoundTo(claim)), claim),
		},
		{
			name:   "binder step 1 for a claim the user pre-bound to this volume is allowed",
			review: pvUpdate(binder, free, step1),
			view:   testobj.NewView(wantsVolume),
		},
		{
			name:   "external provisioner creates a volume for the live claim",
			review: pvCreate(provisioner, testobj.PV("pvc-1234", testobj.ClaimRef("team-a", "data", string(claim.UID)))),
			view:   testobj.NewView(claim),
			config: provisionerConfig(),
		},

		// A claim naming a volume.
		{
			name:   "claim pre-bound to a free volume is allowed",
			review: pvcCreate(tenant, wantsVolume),
			view:   testobj.NewView(free),
		},
		{
			name:   "claim pre-bound to a volume that does not exist yet is allowed",
			review: pvcCreate(tenant, wantsVolume),
		},
		{
			name:     "claim naming a volume bound to another live claim is denied",
			review:   pvcCreate(tenant, wantsVolume),
			view:     testobj.NewView(takenByOther, otherPending),
			want:     []string{"spec.volumeName"},
			wantText: "PersistentVolumeClaim team-a/data names PersistentVolume pv-7, which is already claimed by PersistentVolumeClaim team-b/other; use another volume",
		},
		{
			name:   "claim naming a volume pre-bound by name to another live claim is denied",
			review: pvcCreate(tenant, wantsVolume),
			view:   testobj.NewView(preBoundToOther, otherPending),
			want:   []string{"spec.volumeName"},
		},
		{
			name:   "another live claim naming the volume it is bound to is reported once",
			review: pvcUpdate(tenant, claim, wantsVolume),
			view:   testobj.NewView(takenByOther, other, claim),
			want:   []string{"spec.volumeName"},
		},
		{
			name:   "claim naming a volume whose claim was deleted is allowed (the volume is Released)",
			review: pvcCreate(tenant, wantsVolume),
			view:   testobj.NewView(takenByOther),
		},
		{
			name:   "claim naming a volume whose claim was re-created is allowed",
			review: pvcCreate(tenant, wantsVolume),
			view:   testobj.NewView(takenByOther, otherRecreated),
		},
		{
			name:   "re-created claim naming the volume of its previous incarnation is not a rival",
			review: pvcCreate(tenant, testobj.PVC("team-a", "data", testobj.ClaimUID("5678"), testobj.VolumeName("pv-7"))),
			view:   testobj.NewView(testobj.PV("pv-7", testobj.BoundTo(claim)), claim),
		},
		{
			name:   "re-created claim naming the volume of its previous incarnation, cache caught up",
			review: pvcUpdate(tenant, recreated, testobj.PVC("team-a", "data", testobj.ClaimUID("5678"), testobj.VolumeName("pv-7"))),
			view:   testobj.NewView(testobj.PV("pv-7", testobj.BoundTo(claim)), recreated),
		},
		{
			name:   "two claims pre-bound to one free volume are not a double binding",
			review: pvcCreate(tenant, wantsVolume),
			view:   testobj.NewView(free, testobj.PVC("team-b", "other", testobj.VolumeName("pv-7"))),
		},
		{
			name: "status update of a claim is not a new link",
			review: pvcStatus(binder, testobj.PVC("team-a", "data", testobj.VolumeName("pv-7")),
				testobj.PVC("team-a", "data", testobj.ClaimBoundTo("pv-7"))),
			view: testobj.NewView(takenByOther, otherPending),
		},

		// A volume naming a claim.
		{
			name:     "volume pointing at a claim bound to another volume is denied",
			review:   pvCreate(admin, testobj.PV("pv-8", testobj.ClaimRef("team-b", "other", ""))),
			view:     testobj.NewView(other, takenByOther),
			want:     []string{"spec.claimRef"},
			wantText: "PersistentVolume pv-8 points spec.claimRef at PersistentVolumeClaim team-b/other, which is already bound to PersistentVolume pv-7",
		},
		{
			name:   "volume pointing at a claim only pre-bound to another volume is allowed",
			review: pvCreate(admin, testobj.PV("pv-8", testobj.ClaimRef("team-b", "other", ""))),
			view:   testobj.NewView(other, free),
		},
		{
			name:   "volume pointing at a claim whose named volume is gone is allowed",
			review: pvCreate(admin, testobj.PV("pv-8", testobj.ClaimRef("team-b", "other", ""))),
			view:   testobj.NewView(other),
		},
		{
			name:   "volume pointing at a claim whose other volume is pre-bound by name only is allowed",
			review: pvCreate(admin, testobj.PV("pv-8", testobj.ClaimRef("team-b", "other", ""))),
			view:   testobj.NewView(other, preBoundToOther),
		},
		{
			name:   "volume pointing at an old uid of a claim bound elsewhere is left to PVG002",
			review: pvCreate(admin, testobj.PV("pv-8", testobj.ClaimRef("team-b", "other", "1234"))),
			view:   testobj.NewView(other, takenByOther),
		},
		{
			name: "controller release of a pre-bound volume whose claim was re-created and bound elsewhere is allowed",
			review: pvUpdate(binder,
				testobj.PV("pv-8", testobj.BoundTo(testobj.PVC("team-b", "other", testobj.ClaimUID("1234")))),
				testobj.PV("pv-8", testobj.ClaimRef("team-b", "other", ""))),
			view: testobj.NewView(other, takenByOther),
		},
		{
			name: "a provisioner saves the volume it made for a claim bound elsewhere meanwhile",
			review: pvCreate(unlistedProvisioner, testobj.PV("pvc-1234", testobj.ClaimRef("team-b", "other", string(other.UID)),
				testobj.PVMeta(testobj.Annotation(storage.AnnProvisionedBy, "csi.example.com")))),
			view: testobj.NewView(other, takenByOther),
		},
		{
			name: "an existing provisioned volume pointed at a claim bound elsewhere is denied",
			review: pvUpdate(admin, testobj.PV("pvc-1234", testobj.PVMeta(testobj.Annotation(storage.AnnProvisionedBy, "csi.example.com"))),
				testobj.PV("pvc-1234", testobj.ClaimRef("team-b", "other", string(other.UID)),
					testobj.PVMeta(testobj.Annotation(storage.AnnProvisionedBy, "csi.example.com")))),
			view: testobj.NewView(other, takenByOther),
			want: []string{"spec.claimRef"},
		},
		{
			name:   "volume pointed at one claim while another only pre-bound by name wants it is allowed (upstream: first link wins)",
			review: pvUpdate(binder, free, testobj.PV("pv-7", testobj.ClaimRef("team-b", "other", string(otherPending.UID)))),
			view:   testobj.NewView(otherPending, wantsVolume),
		},
		{
			name:   "volume pointed at the claim that names it is allowed",
			review: pvUpdate(admin, free, testobj.PV("pv-7", testobj.ClaimRef("team-a", "data", ""))),
			view:   testobj.NewView(wantsVolume),
		},
		{
			name:   "rule set to warn",
			review: pvcCreate(tenant, wantsVolume),
			view:   testobj.NewView(takenByOther, otherPending),
			config: mustConfig(t, "rules:\n  no-double-binding: {action: warn}\n"),
			want:   []string{"spec.volumeName"},
		},
	})
}
