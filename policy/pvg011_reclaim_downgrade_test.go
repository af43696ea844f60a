package policy_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/test/testobj"
)

func TestPVG011ReclaimDowngrade(t *testing.T) {
	claim := testobj.PVC("team-a", "data")
	bound := testobj.PV("pv-7", testobj.BoundTo(claim))
	released := testobj.PV("pv-7", testobj.BoundTo(claim), testobj.Phase(corev1.VolumeReleased))
	free := testobj.PV("pv-7", testobj.Phase(corev1.VolumeAvailable))
	toDelete := testobj.Reclaim(corev1.PersistentVolumeReclaimDelete)
	toRecycle := testobj.Reclaim(corev1.PersistentVolumeReclaimRecycle)
	confirm := func(v string) testobj.PVMod {
		return testobj.PVMeta(testobj.Annotation(policy.DefaultReclaimConfirmAnnotation, v))
	}
	bind := testobj.BindSteps(free, claim)

	runRuleCases(t, "PVG011", []ruleCase{
		{
			name:     "Retain to Delete on a Bound volume is denied",
			review:   pvUpdate(admin, bound, testobj.PVWith(bound, toDelete)),
			want:     []string{"spec.persistentVolumeReclaimPolicy"},
			wantText: "PersistentVolume pv-7 is Bound to PersistentVolumeClaim team-a/data, and changing its reclaim policy from Retain to Delete deletes the backing storage once the claim is deleted; if that is intended, set the annotation pvguard.io/confirm-reclaim-policy=Delete on the volume in the same write",
		},
		{
			name:   "Retain to Delete with the confirmation is allowed",
			review: pvUpdate(admin, bound, testobj.PVWith(bound, toDelete, confirm("Delete"))),
		},
		{
			name:     "a confirmation left by an earlier write does not count",
			review:   pvUpdate(admin, testobj.PVWith(bound, confirm("Delete")), testobj.PVWith(bound, toDelete, confirm("Delete"))),
			want:     []string{"spec.persistentVolumeReclaimPolicy"},
			wantText: "was already on the volume before this write, so it does not confirm it",
		},
		{
			name:   "a confirmation changed to the new policy in the same write counts",
			review: pvUpdate(admin, testobj.PVWith(bound, confirm("Recycle")), testobj.PVWith(bound, toDelete, confirm("Delete"))),
		},
		{
			name:   "confirmation for another policy does not count",
			review: pvUpdate(admin, bound, testobj.PVWith(bound, toDelete, confirm("Recycle"))),
			want:   []string{"spec.persistentVolumeReclaimPolicy"},
		},
		{
			name:   "confirmation is case sensitive, as the policy is",
			review: pvUpdate(admin, bound, testobj.PVWith(bound, toDelete, confirm("delete"))),
			want:   []string{"spec.persistentVolumeReclaimPolicy"},
		},
		{
			name:     "Retain to Recycle on a Released volume is denied",
			review:   pvUpdate(admin, released, testobj.PVWith(released, toRecycle)),
			want:     []string{"spec.persistentVolumeReclaimPolicy"},
			wantText: "is Released by PersistentVolumeClaim team-a/data",
		},
		{
			name:   "volume whose claimRef has a uid is in use before its phase follows",
			review: pvUpdate(admin, bind.PVSpec, testobj.PVWith(bind.PVSpec, toDelete)),
			want:   []string{"spec.persistentVolumeReclaimPolicy"},
		},
		{
			name:   "releasing the volume in the same write does not slip past",
			review: pvUpdate(admin, bound, testobj.PVWith(bound, toDelete, testobj.NoClaimRef, testobj.Phase(corev1.VolumeAvailable))),
			want:   []string{"spec.persistentVolumeReclaimPolicy"},
		},
		{
			name:   "Available volume may change freely",
			review: pvUpdate(admin, free, testobj.PVWith(free, toDelete)),
		},
		{
			name:   "volume pre-bound without a uid holds no data yet",
			review: pvUpdate(admin, testobj.PVWith(free, testobj.ClaimRef("team-a", "data", "")), testobj.PVWith(free, testobj.ClaimRef("team-a", "data", ""), toDelete)),
		},
		{
			name:   "Delete to Retain is always allowed",
			review: pvUpdate(admin, testobj.PVWith(bound, toDelete), bound),
		},
		{
			name:   "Recycle to Delete is not a downgrade from Retain",
			review: pvUpdate(admin, testobj.PVWith(bound, toRecycle), testobj.PVWith(bound, toDelete)),
		},
		{
			name:   "creating a volume with Delete is allowed",
			review: pvCreate(provisioner, testobj.PV("pvc-uid", testobj.ClaimRef("team-a", "data", string(claim.UID)), toDelete)),
			config: provisionerConfig(),
		},
		{
			name:   "renamed confirmation annotation is honoured",
			review: pvUpdate(admin, bound, testobj.PVWith(bound, toDelete, testobj.PVMeta(testobj.Annotation("example.com/yes-really", "Delete")))),
			config: mustConfig(t, "reclaimConfirmAnnotation: example.com/yes-really\n"),
		},
		{
			name:   "binder write 1 (PV spec) is allowed",
			review: pvUpdate(binder, bind.PV, bind.PVSpec),
		},
		{
			name:   "binder write 2 (PV status) is allowed",
			review: pvStatus(binder, bind.PVSpec, bind.PVStatus),
		},
		{
			name:   "binder releasing a Retain volume is allowed",
			review: pvStatus(binder, bound, released),
		},
	})
}
