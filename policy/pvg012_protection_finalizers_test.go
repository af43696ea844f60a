package policy_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/test/testobj"
)

const (
	finPVProtection  = "kubernetes.io/pv-protection"
	finPVCProtection = "kubernetes.io/pvc-protection"
	finPVController  = "kubernetes.io/pv-controller"
	finProvisioner   = "external-provisioner.volume.kubernetes.io/finalizer"
	finUnrelated     = "example.com/backup"
)

func TestPVG012ProtectionFinalizers(t *testing.T) {
	pvProtector := policy.UserInfo{Username: "system:serviceaccount:kube-system:pv-protection-controller"}
	pvcProtector := policy.UserInfo{Username: "system:serviceaccount:kube-system:pvc-protection-controller"}
	fin := func(f ...string) testobj.MetaMod { return testobj.Finalizers(f...) }

	claim := testobj.PVC("team-a", "data", testobj.ClaimMeta(fin(finPVCProtection)))
	boundClaim := testobj.PVCWith(claim, testobj.ClaimBoundTo("pv-7"))
	bound := testobj.PV("pv-7", testobj.BoundTo(claim), testobj.PVMeta(fin(finPVProtection)))
	released := testobj.PV("pv-7", testobj.BoundTo(claim), testobj.Phase(corev1.VolumeReleased),
		testobj.Reclaim(corev1.PersistentVolumeReclaimDelete), testobj.PVMeta(fin(finPVProtection, finPVController, finProvisioner)))
	free := testobj.PV("pv-7", testobj.Phase(corev1.VolumeAvailable), testobj.PVMeta(fin(finPVProtection)))
	deleting := testobj.PVWith(released, testobj.PVMeta(testobj.Deleting()))
	retained := testobj.PVWith(bound, testobj.Reclaim(corev1.PersistentVolumeReclaimRetain), testobj.PVMeta(fin(finPVProtection, finProvisioner)))
	bind := testobj.BindSteps(free, claim)

	runRuleCases(t, "PVG012", append([]ruleCase{
		{
			name:     "user removing pv-protection from a Bound volume is denied",
			review:   pvUpdate(tenant, bound, testobj.PVWith(bound, testobj.PVMeta(fin()))),
			want:     []string{"metadata.finalizers"},
			wantText: "alice removed finalizer kubernetes.io/pv-protection from PersistentVolume pv-7, which is Bound to PersistentVolumeClaim team-a/data; the pv-protection controller removes it once no claim is bound to the volume",
		},
		{
			name:     "user removing pvc-protection from a Bound claim is denied",
			review:   pvcUpdate(tenant, boundClaim, testobj.PVCWith(boundClaim, testobj.ClaimMeta(fin()))),
			want:     []string{"metadata.finalizers"},
			wantText: "alice removed finalizer kubernetes.io/pvc-protection from PersistentVolumeClaim team-a/data, which is bound to PersistentVolume pv-7",
		},
		{
			name:   "claim that names a volume is in use before its phase follows",
			review: pvcUpdate(tenant, bind.PVCSpec, testobj.PVCWith(bind.PVCSpec, testobj.ClaimMeta(fin()))),
			want:   []string{"metadata.finalizers"},
		},
		{
			name:   "volume whose claimRef has a uid is in use before its phase follows",
			review: pvUpdate(admin, bind.PVSpec, testobj.PVWith(bind.PVSpec, testobj.PVMeta(fin()))),
			want:   []string{"metadata.finalizers"},
		},
		{
			name:   "each removed finalizer of a Released volume is a finding",
			review: pvUpdate(admin, released, testobj.PVWith(released, testobj.PVMeta(fin(finPVProtection)))),
			want:   []string{"metadata.finalizers", "metadata.finalizers"},
		},
		{
			name:   "removing a finalizer from an Available volume is allowed",
			review: pvUpdate(admin, free, testobj.PVWith(free, testobj.PVMeta(fin()))),
		},
		{
			name:   "removing pvc-protection from a Pending claim is allowed",
			review: pvcUpdate(tenant, claim, testobj.PVCWith(claim, testobj.ClaimMeta(fin()))),
		},
		{
			name:   "removing an unrelated finalizer is allowed",
			review: pvUpdate(admin, testobj.PVWith(bound, testobj.PVMeta(fin(finPVProtection, finUnrelated))), bound),
		},
		{
			name:   "adding a finalizer is allowed",
			review: pvUpdate(admin, bound, testobj.PVWith(bound, testobj.PVMeta(fin(finPVProtection, finUnrelated)))),
		},
		{
			name:   "the state before the write decides, not the one it writes",
			review: pvUpdate(admin, bound, testobj.PVWith(bound, testobj.NoClaimRef, testobj.Phase(corev1.VolumeAvailable), testobj.PVMeta(fin()))),
			want:   []string{"metadata.finalizers"},
		},
		{
			name:   "pv-protection controller removing its finalizer is allowed",
			review: pvUpdate(pvProtector, released, testobj.PVWith(released, testobj.PVMeta(fin(finPVController, finProvisioner)))),
		},
		{
			name:   "pvc-protection controller removing its finalizer is allowed",
			review: pvcUpdate(pvcProtector, boundClaim, testobj.PVCWith(boundClaim, testobj.ClaimMeta(fin()))),
		},
		{
			name:   "PV controller removing its finalizer after reclaim is allowed",
			review: pvUpdate(policy.UserInfo{Username: "system:kube-controller-manager"}, released, testobj.PVWith(released, testobj.PVMeta(fin(finPVProtection, finProvisioner)))),
		},
		{
			name:   "external provisioner removing its finalizer is allowed",
			review: pvUpdate(provisioner, released, testobj.PVWith(released, testobj.PVMeta(fin(finPVProtection, finPVController)))),
			config: provisionerConfig(),
		},
		{
			name:   "the same identity not configured as a controller is denied",
			review: pvUpdate(provisioner, released, testobj.PVWith(released, testobj.PVMeta(fin(finPVProtection, finPVController)))),
			want:   []string{"metadata.finalizers"},
		},
		{
			name:   "an unlisted provisioner removing its finalizer from a deleted volume whose claim is gone is allowed",
			review: pvUpdate(unlistedProvisioner, deleting, testobj.PVWith(deleting, testobj.PVMeta(fin(finPVProtection)))),
		},
		{
			name:   "the same removal while the claim the volume is linked to lives is denied",
			review: pvUpdate(unlistedProvisioner, deleting, testobj.PVWith(deleting, testobj.PVMeta(fin(finPVProtection)))),
			view:   testobj.NewView(claim),
			want:   []string{"metadata.finalizers", "metadata.finalizers"},
		},
		{
			name:   "removing pv-protection from a deleted volume whose claim was re-created is allowed",
			review: pvUpdate(tenant, deleting, testobj.PVWith(deleting, testobj.PVMeta(fin(finPVController, finProvisioner)))),
			view:   testobj.NewView(testobj.PVC("team-a", "data", testobj.ClaimUID("5678"))),
		},
		{
			name:   "an unlisted provisioner removing its finalizer from a deleted volume whose claim went to another volume is allowed",
			review: pvUpdate(unlistedProvisioner, deleting, testobj.PVWith(deleting, testobj.PVMeta(fin(finPVProtection, finPVController)))),
			view:   testobj.NewView(testobj.PVCWith(claim, testobj.ClaimBoundTo("pv-9"))),
		},
		{
			name:   "an unlisted provisioner dropping its finalizer from a Bound volume whose policy became Retain is allowed",
			review: pvUpdate(unlistedProvisioner, retained, testobj.PVWith(retained, testobj.PVMeta(fin(finPVProtection)))),
			view:   testobj.NewView(boundClaim),
		},
		{
			name: "the same removal while the policy is Delete is denied",
			review: pvUpdate(unlistedProvisioner, testobj.PVWith(retained, testobj.Reclaim(corev1.PersistentVolumeReclaimDelete)),
				testobj.PVWith(retained, testobj.Reclaim(corev1.PersistentVolumeReclaimDelete), testobj.PVMeta(fin(finPVProtection)))),
			view: testobj.NewView(boundClaim),
			want: []string{"metadata.finalizers"},
		},
		{
			name:   "removing pv-protection from a Bound volume through /status is denied",
			review: pvStatus(tenant, bound, testobj.PVWith(bound, testobj.PVMeta(fin()))),
			want:   []string{"metadata.finalizers"},
		},
		{
			name:   "removing pvc-protection from a bound claim through /status is denied",
			review: pvcStatus(admin, boundClaim, testobj.PVCWith(boundClaim, testobj.ClaimMeta(fin()))),
			want:   []string{"metadata.finalizers"},
		},
		{
			name:   "the PV controller's phase update through /status is allowed",
			review: pvStatus(binder, bound, testobj.PVWith(bound, testobj.Phase(corev1.VolumeReleased))),
		},
		{
			name:   "a status write that keeps the finalizers is allowed whoever makes it",
			review: pvcStatus(tenant, boundClaim, testobj.PVCWith(boundClaim, testobj.ClaimPhase(corev1.ClaimLost))),
		},
		{
			name:   "creating an object without finalizers is not a removal",
			review: pvCreate(tenant, testobj.PV("pv-8", testobj.Phase(corev1.VolumeBound))),
		},
	}, bindWriteCases(bind, nil)...))
}
