package policy_test

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/test/testobj"
)

func TestPVG002ClaimRefUIDConsistent(t *testing.T) {
	claim := testobj.PVC("team-a", "data")
	recreated := testobj.PVC("team-a", "data", testobj.ClaimUID("5678"))
	other := testobj.PVC("team-b", "other")
	byController := testobj.PVMeta(testobj.Annotation(policy.AnnBoundByController, "yes"))
	available := testobj.PV("pv-7", testobj.Phase(corev1.VolumeAvailable))
	step1 := testobj.PV("pv-7", testobj.ClaimRef("team-a", "data", string(claim.UID)), byController)
	bound := testobj.PV("pv-7", testobj.BoundTo(claim), byController)
	preBound := testobj.PV("pv-7", testobj.ClaimRef("team-a", "data", ""))
	preBoundBound := testobj.PV("pv-7", testobj.BoundTo(claim))

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
				testobj.PVMeta(testobj.Annotation(policy.AnnProvisionedBy, "csi.example.com")))),
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
			name:     "a set uid changed to another uid is denied",
			review:   pvUpdate(admin, bound, testobj.PV("pv-7", testobj.BoundTo(recreated))),
			view:     testobj.NewView(recreated),
			want:     []string{"spec.claimRef.uid"},
			wantText: "PersistentVolume pv-7 is bound to PersistentVolumeClaim team-a/data with uid uid-team-a-data and spec.claimRef.uid changes to 5678; a set uid never changes to another uid; clear spec.claimRef",
		},
		{
			name:     "re-pointing a bound volume to another claim is denied once",
			review:   pvUpdate(admin, bound, testobj.PV("pv-7", testobj.BoundTo(other))),
			view:     testobj.NewView(claim, other),
			want:     []string{"spec.claimRef"},
			wantText: "PersistentVolume pv-7 is bound to PersistentVolumeClaim team-a/data (uid uid-team-a-data) and spec.claimRef is re-pointed to PersistentVolumeClaim team-b/other",
		},
		{
			name:   "re-pointing a bound volume by name only is denied",
			review: pvUpdate(admin, bound, testobj.PV("pv-7", testobj.ClaimRef("team-b", "other", ""))),
			view:   testobj.NewView(claim, other),
			want:   []string{"spec.claimRef"},
		},
		{
			name:     "a uid that is not the live claim's is denied",
			review:   pvCreate(admin, testobj.PV("pv-7", testobj.ClaimRef("team-a", "data", "1234"))),
			view:     testobj.NewView(recreated),
			want:     []string{"spec.claimRef.uid"},
			wantText: "spec.claimRef.uid 1234 is not the uid 5678 of the live PersistentVolumeClaim team-a/data (a re-created claim of the same name?); drop spec.claimRef.uid",
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
