package policy_test

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/storage"
	"github.com/pvguard/pvguard/test/testobj"
)

func TestPVG002ClaimRefUIDConsistent(t *testing.T) {
	claim := testobj.PVC("team-a", "data")
	recreated := testobj.PVC("team-a", "data", testobj.ClaimUID("5678"))
	other := testobj.PVC("team-b", "other")
	byController := testobj.PVMeta(testobj.Annotation(storage.AnnBoundByController, "yes"))
	available := testobj.PV("pv-7", testobj.Phase(corev1.VolumeAvailable))
	step1 := testobj.PV("pv-7", testobj.ClaimRef("team-a", "data", string(claim.UID)), byController)
	bound := testobj.PV("pv-7", testobj.BoundTo(claim), byController)
	preBound := testobj.PV("pv-7", testobj.ClaimRef("team-a", "data", ""))
	preBoundBound := testobj.PV("pv-7", testobj.BoundTo(claim))
	boundClaim := testobj.PVCWith(claim, testobj.ClaimBoundTo("pv-7"))
	elsewhere := testobj.PVCWith(claim, testobj.ClaimBoundTo("pv-9"))
	otherElsewhere := testobj.PVCWith(other, testobj.ClaimBoundTo("pv-9"))
	released := testobj.PV("pv-7", testobj.BoundTo(claim), testobj.Phase(corev1.VolumeReleased))
	// A populator's target claim, waiting for its data, and the claims made for it.
	const targetUID = "0f5c3f5e-6b0a-4c47-9d43-7c2f2b1e9a10"
	target := testobj.PVC("team-a", "db", testobj.ClaimUID(targetUID), testobj.DataSourceRef("example.io", "Hello", "hello"))
	prime := testobj.PVCWith(testobj.PVC("populators", "prime-"+targetUID), testobj.ClaimBoundTo("pv-7"))
	primeBound := testobj.PV("pv-7", testobj.BoundTo(prime), byController)
	tmp := testobj.PVCWith(testobj.PVC("team-src", "tmp-pvc-"+targetUID), testobj.ClaimBoundTo("pv-7"))
	tmpBound := testobj.PV("pv-7", testobj.BoundTo(tmp), byController)

	runRuleCases(t, "PVG002", []ruleCase{
		{
			name:   "binder step 1 (PV spec) with the live claim's uid is allowed",
			review: pvUpdate(binder, available, step1),
			view:   testobj.NewView(claim),
		},
		{
			name:   "binder step 2 (PV status Bound) is allowed",
			review: pvStatus(binder, step1, bound),
			view:   testobj.NewView(claim),
		},
		{
			name:   "binder step 1 on a volume pre-bound by name fills in the uid",
			review: pvUpdate(binder, preBound, testobj.PV("pv-7", testobj.ClaimRef("team-a", "data", string(claim.UID)))),
			view:   testobj.NewView(claim),
		},
		{
			name: "external provisioner creates a volume for the live claim",
			review: pvCreate(provisioner, testobj.PV("pvc-1234",
				testobj.ClaimRef("team-a", "data", string(claim.UID)),
				testobj.PVMeta(testobj.Annotation(storage.AnnProvisionedBy, "csi.example.com")))),
			view:   testobj.NewView(claim),
			config: provisionerConfig(),
		},
		{
			name:   "controller unbind clears a claimRef it set",
			review: pvUpdate(binder, bound, testobj.PV("pv-7", testobj.Phase(corev1.VolumeBound), byController)),
		},
		{
			name:   "controller unbind clears only the uid of a pre-bound volume",
			review: pvUpdate(binder, preBoundBound, testobj.PV("pv-7", testobj.BoundTo(claim), testobj.ClaimRefUID(""))),
		},
		{
			name: "status Available after unbind is allowed",
			review: pvStatus(binder,
				testobj.PV("pv-7", testobj.ClaimRef("team-a", "data", ""), testobj.Phase(corev1.VolumeReleased)),
				testobj.PV("pv-7", testobj.ClaimRef("team-a", "data", ""), testobj.Phase(corev1.VolumeAvailable))),
		},
		{
			name:   "pre-binding by name to a claim that does not exist yet is allowed",
			review: pvCreate(admin, preBound),
		},
		{
			name:   "re-pointing a volume pre-bound by name only is allowed",
			review: pvUpdate(admin, preBound, testobj.PV("pv-7", testobj.ClaimRef("team-b", "other", ""))),
			view:   testobj.NewView(claim, other),
		},
		{
			name:   "unrelated edit of a bound volume is allowed",
			review: pvUpdate(admin, bound, testobj.PV("pv-7", testobj.BoundTo(claim), byController, testobj.PVMeta(testobj.Label("tier", "gold")))),
			view:   testobj.NewView(claim),
		},
		{
			name:     "a set uid changed while its claim lives is denied",
			review:   pvUpdate(admin, bound, testobj.PV("pv-7", testobj.BoundTo(recreated))),
			view:     testobj.NewView(claim),
			want:     []string{"spec.claimRef.uid"},
			wantText: "PersistentVolume pv-7 is claimed by the live PersistentVolumeClaim team-a/data (uid uid-team-a-data) and the write changes spec.claimRef.uid from uid-team-a-data to 5678",
		},
		{
			name:   "a Released volume handed to the re-created claim of the same name is allowed",
			review: pvUpdate(admin, bound, testobj.PV("pv-7", testobj.BoundTo(recreated))),
			view:   testobj.NewView(recreated),
		},
		{
			name:     "re-pointing a bound volume to another claim is denied once",
			review:   pvUpdate(admin, bound, testobj.PV("pv-7", testobj.BoundTo(other))),
			view:     testobj.NewView(boundClaim, other),
			want:     []string{"spec.claimRef"},
			wantText: "PersistentVolume pv-7 is claimed by the live PersistentVolumeClaim team-a/data (uid uid-team-a-data) and the write points spec.claimRef at PersistentVolumeClaim team-b/other (uid uid-team-b-other)",
		},
		{
			name:   "re-pointing a bound volume by name only is denied",
			review: pvUpdate(admin, bound, testobj.PV("pv-7", testobj.ClaimRef("team-b", "other", ""))),
			view:   testobj.NewView(claim, other),
			want:   []string{"spec.claimRef"},
		},
		{
			name:     "clearing the claimRef of a bound pair is denied, whoever asks",
			review:   pvUpdate(binder, bound, testobj.PV("pv-7", testobj.Phase(corev1.VolumeBound), byController)),
			view:     testobj.NewView(boundClaim),
			want:     []string{"spec.claimRef"},
			wantText: "the write clears spec.claimRef (was PersistentVolumeClaim team-a/data (uid uid-team-a-data)); a volume stays with its claim until the claim is deleted or bound to another volume",
		},
		{
			name:     "dropping only the uid of a bound pair is denied",
			review:   pvUpdate(admin, bound, testobj.PVWith(bound, testobj.ClaimRefUID(""))),
			view:     testobj.NewView(boundClaim),
			want:     []string{"spec.claimRef.uid"},
			wantText: "drops spec.claimRef.uid uid-team-a-data",
		},
		{
			name:   "clearing a link the binder made before the claim was written is denied",
			review: pvUpdate(admin, step1, available),
			view:   testobj.NewView(claim),
			want:   []string{"spec.claimRef"},
		},
		{
			name:   "upstream unbind of a volume it bound to a claim that went elsewhere is allowed",
			review: pvUpdate(binder, bound, testobj.PV("pv-7", testobj.Phase(corev1.VolumeBound), byController)),
			view:   testobj.NewView(elsewhere),
		},
		{
			name:   "upstream unbind of a user-pre-bound volume drops only the uid",
			review: pvUpdate(binder, preBoundBound, testobj.PVWith(preBoundBound, testobj.ClaimRefUID(""))),
			view:   testobj.NewView(elsewhere),
		},
		{
			name:   "an admin re-pointing a volume whose claim went elsewhere is allowed",
			review: pvUpdate(admin, bound, testobj.PV("pv-7", testobj.BoundTo(other))),
			view:   testobj.NewView(elsewhere, other),
		},
		{
			name:     "re-pointing a Released volume to another claim while keeping the old uid is denied",
			review:   pvUpdate(admin, released, testobj.PVWith(released, testobj.ClaimRef("team-b", "other", string(claim.UID)))),
			view:     testobj.NewView(other),
			want:     []string{"spec.claimRef.uid"},
			wantText: "spec.claimRef.uid uid-team-a-data is not the uid uid-team-b-other of the live PersistentVolumeClaim team-b/other",
		},
		{
			name:   "clearing the claimRef of a Released volume whose claim is gone is allowed (reuse)",
			review: pvUpdate(admin, released, testobj.PV("pv-7", testobj.Phase(corev1.VolumeReleased))),
		},
		{
			name:   "the PV controller re-links a volume to the claim that completed its binding",
			review: pvUpdate(binder, testobj.PV("pv-7", testobj.Phase(corev1.VolumeBound)), testobj.PV("pv-7", testobj.BoundTo(boundClaim), byController)),
			view:   testobj.NewView(boundClaim),
		},
		{
			name:     "a volume a claim completed its binding to cannot be pointed at another claim",
			review:   pvUpdate(admin, testobj.PV("pv-7", testobj.Phase(corev1.VolumeAvailable)), testobj.PV("pv-7", testobj.BoundTo(other))),
			view:     testobj.NewView(boundClaim, other),
			want:     []string{"spec.claimRef"},
			wantText: "PersistentVolumeClaim team-a/data completed its binding to PersistentVolume pv-7 (pv.kubernetes.io/bind-completed), so the volume holds its data, and the write points spec.claimRef at PersistentVolumeClaim team-b/other",
		},
		{
			name:   "clearing a link to a claim that went elsewhere from a volume another claim completed its binding to is allowed (the way back to its owner)",
			review: pvUpdate(binder, testobj.PV("pv-7", testobj.BoundTo(otherElsewhere), byController), testobj.PV("pv-7", testobj.Phase(corev1.VolumeBound), byController)),
			view:   testobj.NewView(boundClaim, otherElsewhere),
		},
		{
			name:   "a volume a claim completed its binding to cannot be linked to it without uid",
			review: pvUpdate(admin, testobj.PV("pv-7"), preBound),
			view:   testobj.NewView(boundClaim),
			want:   []string{"spec.claimRef"},
		},
		{
			name:   "a volume created pointing at another claim than the one that completed its binding is denied",
			review: pvCreate(admin, testobj.PV("pv-7", testobj.BoundTo(other))),
			view:   testobj.NewView(boundClaim, other),
			want:   []string{"spec.claimRef"},
		},
		{
			name:   "a volume re-created without claimRef for the claim that completed its binding is allowed (restore)",
			review: pvCreate(admin, testobj.PV("pv-7")),
			view:   testobj.NewView(boundClaim),
		},
		{
			name: "a provisioner saves the volume it made for a claim deleted meanwhile",
			review: pvCreate(unlistedProvisioner, testobj.PV("pvc-1234", testobj.ClaimRef("team-a", "data", "1234"),
				testobj.PVMeta(testobj.Annotation(storage.AnnProvisionedBy, "csi.example.com")))),
		},
		{
			name: "a provisioner saves the volume it made for a claim re-created meanwhile",
			review: pvCreate(unlistedProvisioner, testobj.PV("pvc-1234", testobj.ClaimRef("team-a", "data", "1234"),
				testobj.PVMeta(testobj.Annotation(storage.AnnProvisionedBy, "csi.example.com")))),
			view: testobj.NewView(recreated),
		},
		{
			name:     "a uid that is not the live claim's is denied",
			review:   pvCreate(admin, testobj.PV("pv-7", testobj.ClaimRef("team-a", "data", "1234"))),
			view:     testobj.NewView(recreated),
			want:     []string{"spec.claimRef.uid"},
			wantText: "spec.claimRef.uid 1234 is not the uid 5678 of the live PersistentVolumeClaim team-a/data (a re-created claim of the same name?); the volume would be released at once (and deleted with reclaim policy Delete); drop spec.claimRef.uid",
		},
		{
			name:     "a uid naming a claim that does not exist is denied",
			review:   pvCreate(admin, testobj.PV("pv-7", testobj.ClaimRef("team-a", "data", "1234"))),
			want:     []string{"spec.claimRef.uid"},
			wantText: "PersistentVolumeClaim team-a/data, which does not exist",
		},
		{
			name:   "setting a uid on a pre-bound volume whose claim is gone is denied",
			review: pvUpdate(admin, preBound, testobj.PV("pv-7", testobj.ClaimRef("team-a", "data", "1234"))),
			want:   []string{"spec.claimRef.uid"},
		},
		// A populator's hand-off (policy/handoff.go) and its forgeries.
		{
			name:   "a populator hands the volume it filled from its prime claim to the claim it was made for",
			review: pvUpdate(unlistedProvisioner, primeBound, testobj.PVWith(primeBound, testobj.ClaimRef("team-a", "db", targetUID))),
			view:   testobj.NewView(prime, target),
		},
		{
			name: "CDI hands a clone across namespaces with a full update that drops kind and apiVersion",
			review: pvUpdate(unlistedProvisioner, tmpBound, testobj.PVWith(tmpBound, testobj.EditClaimRef(func(ref *corev1.ObjectReference) {
				*ref = corev1.ObjectReference{Namespace: "team-a", Name: "db", UID: target.UID, ResourceVersion: "42"}
			}))),
			view: testobj.NewView(tmp, target),
		},
		{
			name:     "a forged hand-off from a claim not made for the target is denied",
			review:   pvUpdate(tenant, bound, testobj.PVWith(bound, testobj.ClaimRef("team-a", "db", targetUID))),
			view:     testobj.NewView(boundClaim, target),
			want:     []string{"spec.claimRef"},
			wantText: "PersistentVolume pv-7 is claimed by the live PersistentVolumeClaim team-a/data (uid uid-team-a-data) and the write points spec.claimRef at PersistentVolumeClaim team-a/db",
		},
		{
			name:   "a hand-off to a target that already has a volume is denied",
			review: pvUpdate(unlistedProvisioner, primeBound, testobj.PVWith(primeBound, testobj.ClaimRef("team-a", "db", targetUID))),
			view:   testobj.NewView(prime, testobj.PVCWith(target, testobj.VolumeName("pv-9"))),
			want:   []string{"spec.claimRef"},
		},
		{
			name:   "a hand-off to a target that waits for no data is denied",
			review: pvUpdate(unlistedProvisioner, primeBound, testobj.PVWith(primeBound, testobj.ClaimRef("team-a", "db", targetUID))),
			view:   testobj.NewView(prime, testobj.PVC("team-a", "db", testobj.ClaimUID(targetUID))),
			want:   []string{"spec.claimRef"},
		},
		{
			name:   "a hand-off by name only, without the target's uid, is denied",
			review: pvUpdate(unlistedProvisioner, primeBound, testobj.PVWith(primeBound, testobj.ClaimRef("team-a", "db", ""))),
			view:   testobj.NewView(prime, target),
			want:   []string{"spec.claimRef"},
		},
		{
			name:   "a hand-off to a target another volume is already linked to is denied",
			review: pvUpdate(unlistedProvisioner, primeBound, testobj.PVWith(primeBound, testobj.ClaimRef("team-a", "db", targetUID))),
			view:   testobj.NewView(prime, target, testobj.PV("pv-9", testobj.BoundTo(target))),
			want:   []string{"spec.claimRef"},
		},
		{
			name:   "a hand-off to a re-created target (the uid its prime claim was named for is gone) is denied",
			review: pvUpdate(unlistedProvisioner, primeBound, testobj.PVWith(primeBound, testobj.ClaimRef("team-a", "db", targetUID))),
			view:   testobj.NewView(prime, testobj.PVCWith(target, testobj.ClaimUID("aaaaaaaa-1111-4222-8333-444444444444"))),
			want:   []string{"spec.claimRef"},
		},
		{
			name:   "rule set to off",
			review: pvCreate(admin, testobj.PV("pv-7", testobj.ClaimRef("team-a", "data", "1234"))),
			config: mustConfig(t, "rules:\n  claimref-uid-consistent: {action: off}\n"),
		},
	})
}

// TestPVG002to008ViewErrors checks that a failed read of a related object reaches the caller
// with its cause, instead of letting the write through unjudged.
func TestPVG002to008ViewErrors(t *testing.T) {
	boom := errors.New("cache unavailable")
	claim := testobj.PVC("team-a", "data")
	bound := testobj.PV("pv-7", testobj.BoundTo(claim))
	cases := map[policy.RuleID]*policy.Review{
		"PVG002": pvCreate(admin, testobj.PV("pv-7", testobj.ClaimRef("team-a", "data", "1234"))),
		"PVG003": nil, // reads nothing
		"PVG004": pvcCreate(tenant, testobj.PVC("team-a", "data", testobj.VolumeName("pv-7"))),
		"PVG005": pvUpdate(admin, bound, testobj.PV("pv-7", testobj.BoundTo(claim), testobj.Capacity("1Mi"))),
		"PVG006": pvUpdate(admin, bound, testobj.PV("pv-7", testobj.BoundTo(claim), testobj.AccessModes())),
		"PVG007": pvCreate(admin, testobj.PV("pv-7", testobj.ClaimRef("team-a", "data", ""))),
		"PVG008": pvcCreate(tenant, testobj.PVC("team-a", "data", testobj.VolumeName("pv-7"))),
	}
	for id, review := range cases {
		if review == nil {
			continue
		}
		t.Run(string(id), func(t *testing.T) {
			// Only the rule under test runs, so the error is known to come from it.
			cfg := policy.DefaultConfig()
			cfg.Rules = map[string]policy.RuleConfig{}
			for _, rl := range policy.Catalogue() {
				if rl.ID != id {
					cfg.Rules[string(rl.ID)] = policy.RuleConfig{Action: policy.ActionOff}
				}
			}
			_, err := policy.NewEngine(cfg).Admit(review, &testobj.View{Err: boom})
			if !errors.Is(err, boom) {
				t.Fatalf("Admit error = %v, want one wrapping %v", err, boom)
			}
		})
	}
}
