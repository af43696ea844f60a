package policy_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pvguard/pvguard/storage"
	"github.com/pvguard/pvguard/test/testobj"
)

func TestPVG008SelectorMatch(t *testing.T) {
	gold := testobj.Selector(map[string]string{"tier": "gold"})
	claim := testobj.PVC("team-a", "data", gold)
	byController := testobj.PVMeta(testobj.Annotation(storage.AnnBoundByController, "yes"))
	goldLabel := testobj.PVMeta(testobj.Label("tier", "gold"))
	goldPV := testobj.PV("pv-7", goldLabel)
	step1 := testobj.PV("pv-7", goldLabel, testobj.ClaimRef("team-a", "data", string(claim.UID)), byController)
	bound := testobj.PV("pv-7", goldLabel, testobj.BoundTo(claim), byController)
	step3 := testobj.PVC("team-a", "data", gold, testobj.ClaimBoundTo("pv-7"))

	runRuleCases(t, "PVG008", []ruleCase{
		{
			name:     "claim pre-bound to a volume its selector does not match is reported",
			review:   pvcCreate(tenant, testobj.PVC("team-a", "data", gold, testobj.VolumeName("pv-7"))),
			view:     testobj.NewView(testobj.PV("pv-7", testobj.PVMeta(testobj.Label("tier", "bronze")))),
			want:     []string{"spec.volumeName"},
			wantText: "PersistentVolumeClaim team-a/data selects volumes with tier=gold, but the labels of PersistentVolume pv-7 (tier=bronze) do not match",
		},
		{
			name:     "a volume without labels does not match a selector",
			review:   pvcCreate(tenant, testobj.PVC("team-a", "data", gold, testobj.VolumeName("pv-7"))),
			view:     testobj.NewView(testobj.PV("pv-7")),
			want:     []string{"spec.volumeName"},
			wantText: "(none)",
		},
		{
			name:   "claim naming a volume linked to another claim is not judged until the volume is re-pointed (Velero's restore)",
			review: pvcUpdate(tenant, testobj.PVC("team-a", "data", gold), testobj.PVC("team-a", "data", gold, testobj.VolumeName("pv-7"))),
			view:   testobj.NewView(testobj.PV("pv-7", testobj.ClaimRef("velero", "restore-x", "uid-gone"), testobj.Phase(corev1.VolumeReleased))),
		},
		{
			name: "the volume pointed at the claim in the same write that labels it is allowed (Velero's restore)",
			review: pvUpdate(tenant, testobj.PV("pv-7", testobj.ClaimRef("velero", "restore-x", "uid-gone")),
				testobj.PV("pv-7", goldLabel, testobj.ClaimRef("team-a", "data", ""))),
			view: testobj.NewView(testobj.PVC("team-a", "data", gold, testobj.VolumeName("pv-7"))),
		},
		{
			name: "the volume pointed at the claim without the labels its selector asks for is reported",
			review: pvUpdate(tenant, testobj.PV("pv-7", testobj.ClaimRef("velero", "restore-x", "uid-gone")),
				testobj.PV("pv-7", testobj.ClaimRef("team-a", "data", ""))),
			view: testobj.NewView(testobj.PVC("team-a", "data", gold, testobj.VolumeName("pv-7"))),
			want: []string{"spec.claimRef"},
		},
		{
			name:   "claim pre-bound to a matching volume is allowed",
			review: pvcCreate(tenant, testobj.PVC("team-a", "data", gold, testobj.VolumeName("pv-7"))),
			view:   testobj.NewView(goldPV),
		},
		{
			name:   "match expressions are honoured",
			review: pvcCreate(tenant, testobj.PVC("team-a", "data", testobj.SelectorExpression("tier", metav1.LabelSelectorOpIn, "gold", "silver"), testobj.VolumeName("pv-7"))),
			view:   testobj.NewView(goldPV),
		},
		{
			name:   "claim without a selector is allowed",
			review: pvcCreate(tenant, testobj.PVC("team-a", "data", testobj.VolumeName("pv-7"))),
			view:   testobj.NewView(testobj.PV("pv-7")),
		},
		{
			name:   "an empty selector matches every volume",
			review: pvcCreate(tenant, testobj.PVC("team-a", "data", testobj.Selector(nil), testobj.VolumeName("pv-7"))),
			view:   testobj.NewView(testobj.PV("pv-7")),
		},
		{
			name:     "an invalid selector is reported on the claim's selector",
			review:   pvcCreate(tenant, testobj.PVC("team-a", "data", testobj.SelectorExpression("tier", "Near", "gold"), testobj.VolumeName("pv-7"))),
			view:     testobj.NewView(goldPV),
			want:     []string{"spec.selector"},
			wantText: "PersistentVolumeClaim team-a/data has an invalid spec.selector",
		},
		{
			name:   "an invalid selector on the claim a volume points at is reported on the claim",
			review: pvCreate(admin, testobj.PV("pv-7", testobj.ClaimRef("team-a", "data", ""))),
			view:   testobj.NewView(testobj.PVC("team-a", "data", testobj.SelectorExpression("tier", "Near", "gold"))),
			want:   []string{"spec.selector"},
		},
		{
			name:   "volume pre-bound to a claim whose selector it does not match is reported",
			review: pvCreate(admin, testobj.PV("pv-7", testobj.ClaimRef("team-a", "data", ""))),
			view:   testobj.NewView(claim),
			want:   []string{"spec.claimRef"},
		},
		{
			name:   "binder step 1 (PV spec) is allowed",
			review: pvUpdate(binder, goldPV, step1),
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
			review: pvcStatus(binder, step3, testobj.PVC("team-a", "data", gold, testobj.ClaimBoundTo("pv-7"), testobj.ClaimBoundStatus(bound))),
			view:   testobj.NewView(bound),
		},
		{
			name: "controller release of a pre-bound volume whose claim was re-created with a selector is allowed",
			review: pvUpdate(binder,
				testobj.PV("pv-7", testobj.BoundTo(testobj.PVC("team-a", "data", testobj.ClaimUID("1234")))),
				testobj.PV("pv-7", testobj.ClaimRef("team-a", "data", ""))),
			view: testobj.NewView(claim),
		},
		{
			name:   "relabelling a bound volume is not a new bind",
			review: pvUpdate(admin, bound, testobj.PV("pv-7", testobj.BoundTo(claim), byController)),
			view:   testobj.NewView(claim),
		},
	})
}
