package policy_test

import (
	"testing"

	"github.com/pvguard/pvguard/storage"
	"github.com/pvguard/pvguard/test/testobj"
)

func TestPVG007StorageClassMatch(t *testing.T) {
	claim := testobj.PVC("team-a", "data", testobj.ClaimClass("fast"))
	byController := testobj.PVMeta(testobj.Annotation(storage.AnnBoundByController, "yes"))
	fast := testobj.PV("pv-7", testobj.Class("fast"))
	step1 := testobj.PV("pv-7", testobj.Class("fast"), testobj.ClaimRef("team-a", "data", string(claim.UID)), byController)
	bound := testobj.PV("pv-7", testobj.Class("fast"), testobj.BoundTo(claim), byController)
	step3 := testobj.PVC("team-a", "data", testobj.ClaimClass("fast"), testobj.ClaimBoundTo("pv-7"))

	runRuleCases(t, "PVG007", []ruleCase{
		{
			name:     "claim without a class pre-bound to a volume of a class is reported",
			review:   pvcCreate(tenant, testobj.PVC("team-a", "data", testobj.VolumeName("pv-7"))),
			view:     testobj.NewView(fast),
			want:     []string{"spec.volumeName"},
			wantText: `[PVG007 storage-class-match] PersistentVolumeClaim team-a/data has storage class "" (no class), but PersistentVolume pv-7 has class "fast"; use a volume of class "" (no class) or drop spec.volumeName`,
		},
		{
			name:   "claim with an unset class matches a volume without a class",
			review: pvcCreate(tenant, testobj.PVC("team-a", "data", testobj.ClaimNoClass, testobj.VolumeName("pv-7"))),
			view:   testobj.NewView(testobj.PV("pv-7")),
		},
		{
			name:   "the beta class annotation on the volume counts",
			review: pvcCreate(tenant, testobj.PVC("team-a", "data", testobj.ClaimClass("fast"), testobj.VolumeName("pv-7"))),
			view:   testobj.NewView(testobj.PV("pv-7", testobj.PVMeta(testobj.Annotation(storage.AnnBetaStorageClass, "fast")))),
		},
		{
			name:   "the beta class annotation on the claim counts",
			review: pvcCreate(tenant, testobj.PVC("team-a", "data", testobj.ClaimMeta(testobj.Annotation(storage.AnnBetaStorageClass, "slow")), testobj.ClaimClass("fast"), testobj.VolumeName("pv-7"))),
			view:   testobj.NewView(fast),
			want:   []string{"spec.volumeName"},
		},
		{
			name:     "volume pre-bound to a claim of another class is reported",
			review:   pvCreate(admin, testobj.PV("pv-7", testobj.Class("slow"), testobj.ClaimRef("team-a", "data", ""))),
			view:     testobj.NewView(claim),
			want:     []string{"spec.claimRef"},
			wantText: `PersistentVolumeClaim team-a/data has storage class "fast", but PersistentVolume pv-7 has class "slow"`,
		},
		{
			name:   "binder step 1 (PV spec) is allowed",
			review: pvUpdate(binder, fast, step1),
			view:   testobj.NewView(claim),
		},
		{
			name:   "binder step 2 (PV status) is allowed",
			review: pvStatus(binder, step1, bound),
			view:   testobj.NewView(claim),
		},
		{
			name:   "binder step 3 (PVC spec) is allowed",
			review: pvcUpdate(binder, claim, step3),
			view:   testobj.NewView(bound),
		},
		{
			name:   "binder step 4 (PVC status) is allowed",
			review: pvcStatus(binder, step3, testobj.PVC("team-a", "data", testobj.ClaimClass("fast"), testobj.ClaimBoundTo("pv-7"), testobj.ClaimBoundStatus(bound))),
			view:   testobj.NewView(bound),
		},
		{
			name:   "external provisioner creates a volume of the claim's class",
			review: pvCreate(provisioner, testobj.PV("pvc-1234", testobj.Class("fast"), testobj.ClaimRef("team-a", "data", string(claim.UID)))),
			view:   testobj.NewView(claim),
			config: provisionerConfig(),
		},
		{
			name: "controller release of a pre-bound volume whose claim was re-created with another class is allowed",
			review: pvUpdate(binder,
				testobj.PV("pv-7", testobj.BoundTo(testobj.PVC("team-a", "data", testobj.ClaimUID("1234")))),
				testobj.PV("pv-7", testobj.ClaimRef("team-a", "data", ""))),
			view: testobj.NewView(claim),
		},
		{
			name:   "rule set to deny",
			review: pvcCreate(tenant, testobj.PVC("team-a", "data", testobj.VolumeName("pv-7"))),
			view:   testobj.NewView(fast),
			config: mustConfig(t, "rules:\n  PVG007: {action: deny}\n"),
			want:   []string{"spec.volumeName"},
		},
	})
}
