package policy_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/pvguard/pvguard/storage"
	"github.com/pvguard/pvguard/test/testobj"
)

func TestPVG006AccessModesSubset(t *testing.T) {
	rwo, rox, rwx := corev1.ReadWriteOnce, corev1.ReadOnlyMany, corev1.ReadWriteMany
	claim := testobj.PVC("team-a", "data", testobj.ClaimAccessModes(rwo, rwx))
	byController := testobj.PVMeta(testobj.Annotation(storage.AnnBoundByController, "yes"))
	all := testobj.PV("pv-7", testobj.AccessModes(rwo, rox, rwx))
	step1 := testobj.PV("pv-7", testobj.AccessModes(rwo, rox, rwx), testobj.ClaimRef("team-a", "data", string(claim.UID)), byController)
	bound := testobj.PV("pv-7", testobj.AccessModes(rwo, rox, rwx), testobj.BoundTo(claim), byController)
	step3 := testobj.PVC("team-a", "data", testobj.ClaimAccessModes(rwo, rwx), testobj.ClaimBoundTo("pv-7"))
	step4 := testobj.PVC("team-a", "data", testobj.ClaimAccessModes(rwo, rwx), testobj.ClaimBoundTo("pv-7"), testobj.ClaimBoundStatus(bound))
	boundWith := func(modes ...corev1.PersistentVolumeAccessMode) *corev1.PersistentVolume {
		return testobj.PV("pv-7", testobj.AccessModes(modes...), testobj.BoundTo(claim), byController)
	}

	runRuleCases(t, "PVG006", []ruleCase{
		// At bind.
		{
			name:     "claim pre-bound to a volume missing a mode is denied",
			review:   pvcCreate(tenant, testobj.PVC("team-a", "data", testobj.ClaimAccessModes(rwo, rwx, rox), testobj.VolumeName("pv-7"))),
			view:     testobj.NewView(testobj.PV("pv-7")),
			want:     []string{"spec.volumeName"},
			wantText: "PersistentVolumeClaim team-a/data requests access modes ReadWriteOnce, ReadWriteMany, ReadOnlyMany, but PersistentVolume pv-7 does not offer ReadWriteMany, ReadOnlyMany; use a volume that offers",
		},
		{
			name:   "claim pre-bound to a volume offering more modes is allowed",
			review: pvcCreate(tenant, testobj.PVC("team-a", "data", testobj.VolumeName("pv-7"))),
			view:   testobj.NewView(all),
		},
		{
			name:   "claim without access modes is allowed",
			review: pvcCreate(tenant, testobj.PVC("team-a", "data", testobj.ClaimAccessModes(), testobj.VolumeName("pv-7"))),
			view:   testobj.NewView(testobj.PV("pv-7")),
		},
		{
			name:   "volume without access modes pre-bound to a claim is denied",
			review: pvCreate(admin, testobj.PV("pv-7", testobj.AccessModes(), testobj.ClaimRef("team-a", "data", ""))),
			view:   testobj.NewView(claim),
			want:   []string{"spec.claimRef"},
		},
		{
			name:   "ReadWriteOncePod is not ReadWriteOnce",
			review: pvcCreate(tenant, testobj.PVC("team-a", "data", testobj.ClaimAccessModes(corev1.ReadWriteOncePod), testobj.VolumeName("pv-7"))),
			view:   testobj.NewView(testobj.PV("pv-7")),
			want:   []string{"spec.volumeName"},
		},

		// The binder's writes and an external provisioner.
		{
			name:   "binder step 1 (PV spec) is allowed",
			review: pvUpdate(binder, all, step1),
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
			name:   "binder step 4 (PVC status with access modes) is allowed",
			review: pvcStatus(binder, step3, step4),
			view:   testobj.NewView(bound),
		},
		{
			name:   "external provisioner creates a volume with the claim's modes",
			review: pvCreate(provisioner, testobj.PV("pvc-1234", testobj.AccessModes(rwo, rwx), testobj.ClaimRef("team-a", "data", string(claim.UID)))),
			view:   testobj.NewView(claim),
			config: provisionerConfig(),
		},

		{
			name: "controller release of a pre-bound volume whose claim was re-created with other modes is allowed",
			review: pvUpdate(binder,
				testobj.PV("pv-7", testobj.BoundTo(testobj.PVC("team-a", "data", testobj.ClaimUID("1234")))),
				testobj.PV("pv-7", testobj.ClaimRef("team-a", "data", ""), testobj.Phase(corev1.VolumeBound))),
			view: testobj.NewView(claim),
		},
		// After bind.
		{
			name:     "dropping a mode the claim uses from a bound volume is denied",
			review:   pvUpdate(admin, bound, boundWith(rwo, rox)),
			view:     testobj.NewView(step4),
			want:     []string{"spec.accessModes"},
			wantText: "PersistentVolume pv-7 is bound to PersistentVolumeClaim team-a/data, which uses ReadWriteOnce, ReadWriteMany, and the write drops ReadWriteMany; keep ReadWriteMany",
		},
		{
			name:   "clearing the modes of a bound volume is denied, not a panic",
			review: pvUpdate(admin, bound, boundWith()),
			view:   testobj.NewView(step4),
			want:   []string{"spec.accessModes"},
		},
		{
			name:   "dropping a mode the claim does not use is allowed",
			review: pvUpdate(admin, bound, boundWith(rwo, rwx)),
			view:   testobj.NewView(step4),
		},
		{
			name:   "reordering the modes of a bound volume is allowed",
			review: pvUpdate(admin, bound, boundWith(rwx, rox, rwo)),
			view:   testobj.NewView(step4),
		},
		{
			name:   "dropping a mode from a Released volume is allowed",
			review: pvUpdate(admin, bound, boundWith(rox)),
		},
	})
}
