package policy_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/pvguard/pvguard/test/testobj"
)

func TestPVG015PhaseConsistency(t *testing.T) {
	claim := testobj.PVC("team-a", "data")
	free := testobj.PV("pv-7", testobj.Phase(corev1.VolumeAvailable))
	bind := testobj.BindSteps(free, claim)
	bound := bind.PVStatus
	released := testobj.PVWith(bound, testobj.Phase(corev1.VolumeReleased))
	preBound := testobj.PVWith(free, testobj.ClaimRef("team-a", "data", ""))
	pending := testobj.PVCWith(claim, testobj.ClaimPhase(corev1.ClaimPending))

	runRuleCases(t, "PVG015", append([]ruleCase{
		{
			name:     "volume set Bound without a claim uid is reported",
			review:   pvStatus(admin, free, testobj.PVWith(free, testobj.Phase(corev1.VolumeBound))),
			want:     []string{"status.phase"},
			wantText: "PersistentVolume pv-7 is set to Bound, but spec.claimRef carries no claim uid",
		},
		{
			name:   "pre-bound volume set Bound before the binder adds the uid is reported",
			review: pvStatus(admin, preBound, testobj.PVWith(preBound, testobj.Phase(corev1.VolumeBound))),
			want:   []string{"status.phase"},
		},
		{
			name:     "volume set Available while its claimRef keeps a uid is reported",
			review:   pvStatus(admin, released, testobj.PVWith(released, testobj.Phase(corev1.VolumeAvailable))),
			want:     []string{"status.phase"},
			wantText: "still carries the uid of PersistentVolumeClaim team-a/data",
		},
		{
			name:     "claim set Bound without a volume is reported",
			review:   pvcStatus(admin, pending, testobj.PVCWith(pending, testobj.ClaimPhase(corev1.ClaimBound))),
			want:     []string{"status.phase"},
			wantText: "PersistentVolumeClaim team-a/data is set to Bound, but names no volume",
		},
		{
			name:   "manifest of a Bound volume without a uid is reported",
			review: pvCreate(admin, testobj.PV("pv-7", testobj.Phase(corev1.VolumeBound))),
			want:   []string{"status.phase"},
		},
		{
			name:   "write that leaves the phase alone is not judged",
			review: pvUpdate(admin, bound, testobj.PVWith(bound, testobj.NoClaimRef)),
		},
		{
			name:   "new volume without a phase is not judged",
			review: pvCreate(admin, testobj.PV("pv-7")),
		},
		{
			name:   "pre-bound volume Available is allowed",
			review: pvStatus(binder, testobj.PVWith(preBound, testobj.Phase(corev1.VolumePending)), preBound),
		},
		{
			name:   "binder releasing a volume whose claim is gone is allowed",
			review: pvStatus(binder, bound, released),
		},
		{
			name:   "binder recycling: claimRef cleared first, then Available",
			review: pvStatus(binder, testobj.PVWith(released, testobj.NoClaimRef), testobj.PVWith(released, testobj.NoClaimRef, testobj.Phase(corev1.VolumeAvailable))),
		},
		{
			name: "external provisioner creating a pre-bound volume is allowed",
			review: pvCreate(provisioner, testobj.PV("pvc-uid", testobj.ClaimRef("team-a", "data", string(claim.UID)),
				testobj.Phase(corev1.VolumePending))),
			config: provisionerConfig(),
		},
		{
			name:   "claim going Lost is not judged",
			review: pvcStatus(binder, bind.PVCStatus, testobj.PVCWith(bind.PVCStatus, testobj.ClaimPhase(corev1.ClaimLost))),
		},
	}, bindWriteCases(bind, nil)...))
}
