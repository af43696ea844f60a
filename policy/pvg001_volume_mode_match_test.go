package policy_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/pvguard/pvguard/test/testobj"
)

func TestPVG001VolumeModeMatch(t *testing.T) {
	block := corev1.PersistentVolumeBlock
	blockClaim := testobj.PVC("team-a", "data", testobj.ClaimVolumeMode(block))
	fsClaim := testobj.PVC("team-a", "data")
	fsPV := testobj.PV("pv-7")
	blockPV := testobj.PV("pv-7", testobj.VolumeMode(block))

	runRuleCases(t, "PVG001", []ruleCase{
		{
			name:     "claim pre-bound to a volume of another mode is denied",
			review:   pvcCreate(tenant, testobj.PVC("team-a", "data", testobj.ClaimVolumeMode(block), testobj.VolumeName("pv-7"))),
			view:     testobj.NewView(fsPV),
			want:     []string{"spec.volumeName"},
			wantText: "PersistentVolumeClaim team-a/data requests volumeMode Block, but PersistentVolume pv-7 is Filesystem; use a Block volume or drop spec.volumeName",
		},
		{
			name:   "claim pre-bound to a volume of the same mode is allowed",
			review: pvcCreate(tenant, testobj.PVC("team-a", "data", testobj.ClaimVolumeMode(block), testobj.VolumeName("pv-7"))),
			view:   testobj.NewView(blockPV),
		},
		{
			name:   "unset mode on both sides is Filesystem",
			review: pvcCreate(tenant, testobj.PVC("team-a", "data", testobj.VolumeName("pv-7"))),
			view:   testobj.NewView(testobj.PV("pv-7", testobj.VolumeMode(corev1.PersistentVolumeFilesystem))),
		},
		{
			name:   "claim pre-bound to a volume that does not exist yet is allowed",
			review: pvcCreate(tenant, testobj.PVC("team-a", "data", testobj.ClaimVolumeMode(block), testobj.VolumeName("pv-7"))),
		},
		{
			name:   "volume pre-bound to a claim of another mode is denied",
			review: pvCreate(admin, testobj.PV("pv-7", testobj.ClaimRef("team-a", "data", ""))),
			view:   testobj.NewView(blockClaim),
			want:   []string{"spec.claimRef"},
		},
		{
			name:   "binder step 1 (PV spec) to a claim of the same mode is allowed",
			review: pvUpdate(binder, fsPV, testobj.PV("pv-7", testobj.ClaimRef("team-a", "data", string(fsClaim.UID)))),
			view:   testobj.NewView(fsClaim),
		},
		{
			name:   "binder step 1 (PV spec) to a claim of another mode is denied",
			review: pvUpdate(binder, fsPV, testobj.PV("pv-7", testobj.ClaimRef("team-a", "data", string(blockClaim.UID)))),
			view:   testobj.NewView(blockClaim),
			want:   []string{"spec.claimRef"},
		},
		{
			name:   "binder step 3 (PVC spec) after step 1 is allowed",
			review: pvcUpdate(binder, fsClaim, testobj.PVC("team-a", "data", testobj.ClaimBoundTo("pv-7"))),
			view:   testobj.NewView(testobj.PV("pv-7", testobj.BoundTo(fsClaim))),
		},
		{
			name: "status update of an existing mismatched pair is not a new bind",
			review: pvcStatus(binder,
				testobj.PVC("team-a", "data", testobj.ClaimVolumeMode(block), testobj.VolumeName("pv-7")),
				testobj.PVC("team-a", "data", testobj.ClaimVolumeMode(block), testobj.VolumeName("pv-7"), testobj.ClaimPhase(corev1.ClaimBound))),
			view: testobj.NewView(fsPV),
		},
		{
			name:   "volume whose claimRef uid is not the live claim's is left to PVG002",
			review: pvCreate(admin, testobj.PV("pv-7", testobj.ClaimRef("team-a", "data", "someone-else"))),
			view:   testobj.NewView(blockClaim),
		},
		{
			name:   "rule set to off",
			review: pvCreate(admin, testobj.PV("pv-7", testobj.ClaimRef("team-a", "data", ""))),
			view:   testobj.NewView(blockClaim),
			config: mustConfig(t, "rules:\n  volume-mode-match: {action: off}\n"),
		},
		{
			name:   "namespace exemption applies to a volume through its claimRef",
			review: pvCreate(admin, testobj.PV("pv-7", testobj.ClaimRef("team-a", "data", ""))),
			view:   testobj.NewView(blockClaim),
			config: mustConfig(t, "exemptions:\n  namespaces: [team-*]\n"),
		},
		{
			name: "controller release of a pre-bound volume (uid dropped) is not a bind, even to a re-created claim of another mode",
			review: pvUpdate(binder,
				testobj.PV("pv-7", testobj.ClaimRef("team-a", "data", "old-uid"), testobj.Phase(corev1.VolumeBound)),
				testobj.PV("pv-7", testobj.ClaimRef("team-a", "data", ""), testobj.Phase(corev1.VolumeBound))),
			view: testobj.NewView(blockClaim),
		},
		{
			name:   "an exempt namespace does not exempt re-pointing a volume away from a claim elsewhere",
			review: pvUpdate(admin, testobj.PV("pv-7", testobj.ClaimRef("prod", "db", "")), testobj.PV("pv-7", testobj.ClaimRef("team-a", "data", ""))),
			view:   testobj.NewView(blockClaim),
			config: mustConfig(t, "exemptions:\n  namespaces: [team-*]\n"),
			want:   []string{"spec.claimRef"},
		},
		{
			name:   "rule-level user exemption",
			review: pvcCreate(tenant, testobj.PVC("team-a", "data", testobj.ClaimVolumeMode(block), testobj.VolumeName("pv-7"))),
			view:   testobj.NewView(fsPV),
			config: mustConfig(t, "rules:\n  PVG001:\n    exemptions: {users: [alice]}\n"),
		},
	})
}
