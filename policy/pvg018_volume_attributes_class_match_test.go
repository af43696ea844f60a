package policy_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/pvguard/pvguard/storage"
	"github.com/pvguard/pvguard/test/testobj"
)

func TestPVG018VolumeAttributesClassMatch(t *testing.T) {
	gold, silver, empty := testobj.ClaimVolumeAttributesClass("gold"), testobj.ClaimVolumeAttributesClass("silver"), testobj.ClaimVolumeAttributesClass("")
	goldClaim := testobj.PVC("team-a", "data", gold)
	plainClaim := testobj.PVC("team-a", "data")
	goldPV := testobj.PV("pv-7", testobj.VolumeAttributesClass("gold"))
	silverPV := testobj.PV("pv-7", testobj.VolumeAttributesClass("silver"))
	plainPV := testobj.PV("pv-7")
	byController := testobj.PVMeta(testobj.Annotation(storage.AnnBoundByController, "yes"))
	provisioned := testobj.PVMeta(testobj.Annotation(storage.AnnProvisionedBy, "csi.example.com"))
	// boundGoldToSilver is bound to pv-7, which was given "gold"; its user has since asked for
	// "silver", and the external-resizer has not modified the volume yet.
	boundGoldToSilver := testobj.PVC("team-a", "data", silver, testobj.ClaimBoundTo("pv-7"), testobj.ClaimCurrentAttributesClass("gold"))

	cases := []ruleCase{
		// A claim naming a volume (spec.volumeName).
		{
			name:     "claim pre-bound to a volume of another class is denied",
			review:   pvcCreate(tenant, testobj.PVC("team-a", "data", gold, testobj.VolumeName("pv-7"))),
			view:     testobj.NewView(silverPV),
			want:     []string{"spec.volumeName"},
			wantText: `[PVG018 volume-attributes-class-match] PersistentVolumeClaim team-a/data asks for VolumeAttributesClass "gold", but PersistentVolume pv-7 has "silver"; name a volume whose volumeAttributesClassName is "gold" in spec.volumeName, or leave it unset so that a matching volume is bound or provisioned`,
		},
		{
			name:   "claim pre-bound to a volume of the same class is allowed",
			review: pvcCreate(tenant, testobj.PVC("team-a", "data", gold, testobj.VolumeName("pv-7"))),
			view:   testobj.NewView(goldPV),
		},
		{
			name:     "claim with a class pre-bound to a volume without one is denied",
			review:   pvcCreate(tenant, testobj.PVC("team-a", "data", gold, testobj.VolumeName("pv-7"))),
			view:     testobj.NewView(plainPV),
			want:     []string{"spec.volumeName"},
			wantText: `asks for VolumeAttributesClass "gold", but PersistentVolume pv-7 has none`,
		},
		{
			name:     "claim without a class pre-bound to a volume that has one is denied",
			review:   pvcCreate(tenant, testobj.PVC("team-a", "data", testobj.VolumeName("pv-7"))),
			view:     testobj.NewView(silverPV),
			want:     []string{"spec.volumeName"},
			wantText: `PersistentVolumeClaim team-a/data asks for no VolumeAttributesClass, but PersistentVolume pv-7 has "silver"; name a volume without a volumeAttributesClassName in spec.volumeName`,
		},
		{
			name:   "unset on both sides is allowed",
			review: pvcCreate(tenant, testobj.PVC("team-a", "data", testobj.VolumeName("pv-7"))),
			view:   testobj.NewView(plainPV),
		},
		{
			name:   `claim "" and volume unset both mean none`,
			review: pvcCreate(tenant, testobj.PVC("team-a", "data", empty, testobj.VolumeName("pv-7"))),
			view:   testobj.NewView(plainPV),
		},
		{
			name:   `claim unset and volume "" both mean none`,
			review: pvcCreate(tenant, testobj.PVC("team-a", "data", testobj.VolumeName("pv-7"))),
			view:   testobj.NewView(testobj.PV("pv-7", testobj.VolumeAttributesClass(""))),
		},
		{
			name:   `claim "" pre-bound to a volume that has a class is denied`,
			review: pvcCreate(tenant, testobj.PVC("team-a", "data", empty, testobj.VolumeName("pv-7"))),
			view:   testobj.NewView(goldPV),
			want:   []string{"spec.volumeName"},
		},
		{
			name:   "claim pre-bound to a volume that does not exist yet is allowed",
			review: pvcCreate(tenant, testobj.PVC("team-a", "data", gold, testobj.VolumeName("pv-7"))),
		},
		{
			name:   "claim re-pointed at a volume of another class is denied",
			review: pvcUpdate(tenant, testobj.PVC("team-a", "data", gold, testobj.VolumeName("pv-1")), testobj.PVC("team-a", "data", gold, testobj.VolumeName("pv-7"))),
			view:   testobj.NewView(silverPV),
			want:   []string{"spec.volumeName"},
		},
		{
			name: "changing the class of a claim that already names a volume is not a new bind",
			review: pvcUpdate(tenant, testobj.PVC("team-a", "data", gold, testobj.VolumeName("pv-7")),
				testobj.PVC("team-a", "data", silver, testobj.VolumeName("pv-7"))),
			view: testobj.NewView(goldPV),
		},

		// A volume naming a claim (spec.claimRef).
		{
			name:     "volume pre-bound to a claim of another class is denied",
			review:   pvCreate(admin, testobj.PV("pv-7", testobj.VolumeAttributesClass("silver"), testobj.ClaimRef("team-a", "data", ""))),
			view:     testobj.NewView(goldClaim),
			want:     []string{"spec.claimRef"},
			wantText: `PersistentVolumeClaim team-a/data asks for VolumeAttributesClass "gold", but PersistentVolume pv-7 has "silver"; link the volume only to a claim that asks for VolumeAttributesClass "silver"`,
		},
		{
			name:   "volume pre-bound to a claim of the same class is allowed",
			review: pvCreate(admin, testobj.PV("pv-7", testobj.VolumeAttributesClass("gold"), testobj.ClaimRef("team-a", "data", ""))),
			view:   testobj.NewView(goldClaim),
		},
		{
			name:     "volume with a class pre-bound to a claim without one is denied",
			review:   pvCreate(admin, testobj.PV("pv-7", testobj.VolumeAttributesClass("silver"), testobj.ClaimRef("team-a", "data", ""))),
			view:     testobj.NewView(plainClaim),
			want:     []string{"spec.claimRef"},
			wantText: `link the volume only to a claim that asks for VolumeAttributesClass "silver"`,
		},
		{
			name:     "volume without a class pre-bound to a claim that asks for one is denied",
			review:   pvCreate(admin, testobj.PV("pv-7", testobj.ClaimRef("team-a", "data", ""))),
			view:     testobj.NewView(goldClaim),
			want:     []string{"spec.claimRef"},
			wantText: "link the volume only to a claim that asks for no VolumeAttributesClass",
		},
		{
			name:   `volume "" pre-bound to a claim with the class unset is allowed`,
			review: pvCreate(admin, testobj.PV("pv-7", testobj.VolumeAttributesClass(""), testobj.ClaimRef("team-a", "data", ""))),
			view:   testobj.NewView(plainClaim),
		},
		{
			name:   "binder step 1 (PV spec) to a claim of another class is denied",
			review: pvUpdate(binder, silverPV, testobj.PV("pv-7", testobj.VolumeAttributesClass("silver"), testobj.ClaimRef("team-a", "data", string(goldClaim.UID)), byController)),
			view:   testobj.NewView(goldClaim),
			want:   []string{"spec.claimRef"},
		},
		{
			name:   "volume whose claimRef uid is not the live claim's is left to PVG002",
			review: pvCreate(admin, testobj.PV("pv-7", testobj.VolumeAttributesClass("silver"), testobj.ClaimRef("team-a", "data", "someone-else"))),
			view:   testobj.NewView(goldClaim),
		},
		{
			name: "status update of an existing mismatched pair is not a new bind",
			review: pvStatus(binder, testobj.PV("pv-7", testobj.VolumeAttributesClass("silver"), testobj.ClaimRef("team-a", "data", "")),
				testobj.PV("pv-7", testobj.VolumeAttributesClass("silver"), testobj.ClaimRef("team-a", "data", ""), testobj.Phase(corev1.VolumeBound))),
			view: testobj.NewView(goldClaim),
		},
		{
			name: "controller release of a pre-bound volume (uid dropped) is not a bind, even to a re-created claim of another class",
			review: pvUpdate(binder,
				testobj.PV("pv-7", testobj.VolumeAttributesClass("silver"), testobj.ClaimRef("team-a", "data", "old-uid"), testobj.Phase(corev1.VolumeBound)),
				testobj.PV("pv-7", testobj.VolumeAttributesClass("silver"), testobj.ClaimRef("team-a", "data", ""), testobj.Phase(corev1.VolumeBound))),
			view: testobj.NewView(goldClaim),
		},

		// External provisioners.
		{
			name: "external provisioner creates a matching volume for the claim",
			review: pvCreate(provisioner, testobj.PV("pvc-1234", testobj.VolumeAttributesClass("gold"), provisioned,
				testobj.ClaimRef("team-a", "data", string(goldClaim.UID)))),
			view:   testobj.NewView(goldClaim),
			config: provisionerConfig(),
		},
		{
			name: "external provisioner saves a volume for a claim whose class changed while it provisioned",
			review: pvCreate(provisioner, testobj.PV("pvc-1234", testobj.VolumeAttributesClass("gold"), provisioned,
				testobj.ClaimRef("team-a", "data", string(goldClaim.UID)))),
			view:   testobj.NewView(testobj.PVC("team-a", "data", silver)),
			config: provisionerConfig(),
		},
		{
			name: "a provisioned-by volume for a claim that already names it is judged",
			review: pvCreate(admin, testobj.PV("pv-7", testobj.VolumeAttributesClass("silver"), provisioned,
				testobj.ClaimRef("team-a", "data", ""))),
			view: testobj.NewView(testobj.PVC("team-a", "data", gold, testobj.VolumeName("pv-7"))),
			want: []string{"spec.claimRef"},
		},
		{
			name:   "a provisioned-by annotation added by an update is judged",
			review: pvUpdate(admin, silverPV, testobj.PV("pv-7", testobj.VolumeAttributesClass("silver"), provisioned, testobj.ClaimRef("team-a", "data", ""))),
			view:   testobj.NewView(goldClaim),
			want:   []string{"spec.claimRef"},
		},

		// A volume re-linked to its bind-completed claim while the claim is being modified.
		{
			name: "PV controller re-links a volume to its claim mid-modification (volume still has the old class)",
			review: pvUpdate(binder, testobj.PV("pv-7", testobj.VolumeAttributesClass("gold"), testobj.Phase(corev1.VolumeBound)),
				testobj.PV("pv-7", testobj.VolumeAttributesClass("gold"), testobj.BoundTo(boundGoldToSilver))),
			view: testobj.NewView(boundGoldToSilver),
		},
		{
			name: "PV controller re-links a volume to its claim after the resizer wrote the new class to the volume only",
			review: pvUpdate(binder, testobj.PV("pv-7", testobj.VolumeAttributesClass("silver"), testobj.Phase(corev1.VolumeBound)),
				testobj.PV("pv-7", testobj.VolumeAttributesClass("silver"), testobj.BoundTo(boundGoldToSilver))),
			view: testobj.NewView(boundGoldToSilver),
		},
		{
			name: "PV controller re-links a volume to its claim while the resizer modifies it to a class the spec has left again",
			review: pvUpdate(binder, testobj.PV("pv-7", testobj.VolumeAttributesClass("bronze"), testobj.Phase(corev1.VolumeBound)),
				testobj.PV("pv-7", testobj.VolumeAttributesClass("bronze"), testobj.BoundTo(boundGoldToSilver))),
			view: testobj.NewView(testobj.PVCWith(boundGoldToSilver, testobj.ClaimModifyingTo("bronze"))),
		},
		{
			name: "re-linking a volume of a class its bound claim neither has nor asks for is denied",
			review: pvUpdate(binder, testobj.PV("pv-7", testobj.VolumeAttributesClass("bronze"), testobj.Phase(corev1.VolumeBound)),
				testobj.PV("pv-7", testobj.VolumeAttributesClass("bronze"), testobj.BoundTo(boundGoldToSilver))),
			view:     testobj.NewView(boundGoldToSilver),
			want:     []string{"spec.claimRef"},
			wantText: `PersistentVolumeClaim team-a/data asks for VolumeAttributesClass "silver", but PersistentVolume pv-7 has "bronze"; the pair is bound: change the volume's attributes through the claim's spec.volumeAttributesClassName`,
		},
		{
			name:     "a claim created already bind-completed to a volume of another class is judged as any bind (a restore that carries the mismatch)",
			review:   pvcCreate(tenant, testobj.PVC("team-a", "data", gold, testobj.ClaimBoundTo("pv-7"))),
			view:     testobj.NewView(testobj.PV("pv-7", testobj.VolumeAttributesClass("silver"), testobj.BoundTo(goldClaim))),
			want:     []string{"spec.volumeName"},
			wantText: `asks for VolumeAttributesClass "gold", but PersistentVolume pv-7 has "silver"; name a volume whose volumeAttributesClassName is "gold"`,
		},
		{
			name: "the modification allowance is only for the claim that names the volume",
			review: pvUpdate(admin, testobj.PV("pv-9", testobj.VolumeAttributesClass("gold")),
				testobj.PV("pv-9", testobj.VolumeAttributesClass("gold"), testobj.ClaimRef("team-a", "data", ""))),
			view: testobj.NewView(boundGoldToSilver),
			want: []string{"spec.claimRef"},
		},

		// Configuration.
		{
			name:   "rule set to off",
			review: pvCreate(admin, testobj.PV("pv-7", testobj.VolumeAttributesClass("silver"), testobj.ClaimRef("team-a", "data", ""))),
			view:   testobj.NewView(goldClaim),
			config: mustConfig(t, "rules:\n  volume-attributes-class-match: {action: off}\n"),
		},
		{
			name:   "namespace exemption applies to a volume through its claimRef",
			review: pvCreate(admin, testobj.PV("pv-7", testobj.VolumeAttributesClass("silver"), testobj.ClaimRef("team-a", "data", ""))),
			view:   testobj.NewView(goldClaim),
			config: mustConfig(t, "exemptions:\n  namespaces: [team-*]\n"),
		},
		{
			name:   "rule-level user exemption",
			review: pvcCreate(tenant, testobj.PVC("team-a", "data", gold, testobj.VolumeName("pv-7"))),
			view:   testobj.NewView(silverPV),
			config: mustConfig(t, "rules:\n  PVG018:\n    exemptions: {users: [alice]}\n"),
		},
	}
	// The upstream binder's four writes for a matching pair, with a class and without.
	cases = append(cases, bindWriteCases(testobj.BindSteps(goldPV, goldClaim), testobj.NewView(goldPV, goldClaim))...)
	for _, c := range bindWriteCases(testobj.BindSteps(plainPV, testobj.PVC("team-a", "data", empty)), testobj.NewView(plainPV, testobj.PVC("team-a", "data", empty))) {
		c.name += ` ("" on the claim, unset on the volume)`
		cases = append(cases, c)
	}
	runRuleCases(t, "PVG018", cases)
}
