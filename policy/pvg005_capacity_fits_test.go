package policy_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/pvguard/pvguard/storage"
	"github.com/pvguard/pvguard/test/testobj"
)

func TestPVG005CapacityFits(t *testing.T) {
	claim := testobj.PVC("team-a", "data", testobj.Request("5Gi"))
	byController := testobj.PVMeta(testobj.Annotation(storage.AnnBoundByController, "yes"))
	pv10 := testobj.PV("pv-7", testobj.Capacity("10Gi"))
	step1 := testobj.PV("pv-7", testobj.Capacity("10Gi"), testobj.ClaimRef("team-a", "data", string(claim.UID)), byController)
	bound10 := testobj.PV("pv-7", testobj.Capacity("10Gi"), testobj.BoundTo(claim), byController)
	step3 := testobj.PVC("team-a", "data", testobj.Request("5Gi"), testobj.ClaimBoundTo("pv-7"))
	step4 := testobj.PVC("team-a", "data", testobj.Request("5Gi"), testobj.ClaimBoundTo("pv-7"), testobj.ClaimBoundStatus(bound10))
	// expanding asks for 20Gi while status.capacity still says the 10Gi it was given.
	expanding := testobj.PVC("team-a", "data", testobj.Request("20Gi"), testobj.ClaimBoundTo("pv-7"), testobj.ClaimBoundStatus(bound10))
	boundTo := func(capacity string) *corev1.PersistentVolume {
		return testobj.PV("pv-7", testobj.Capacity(capacity), testobj.BoundTo(claim), byController)
	}

	runRuleCases(t, "PVG005", []ruleCase{
		// At bind.
		{
			name:     "claim pre-bound to a smaller volume is denied",
			review:   pvcCreate(tenant, testobj.PVC("team-a", "data", testobj.Request("5Gi"), testobj.VolumeName("pv-7"))),
			view:     testobj.NewView(testobj.PV("pv-7")),
			want:     []string{"spec.volumeName"},
			wantText: "PersistentVolumeClaim team-a/data requests 5Gi, but PersistentVolume pv-7 offers 1Gi; use a volume of at least 5Gi or drop spec.volumeName",
		},
		{
			name:   "claim pre-bound to a volume of exactly its size is allowed",
			review: pvcCreate(tenant, testobj.PVC("team-a", "data", testobj.Request("1Gi"), testobj.VolumeName("pv-7"))),
			view:   testobj.NewView(testobj.PV("pv-7")),
		},
		{
			name:   "equal sizes in different units are allowed",
			review: pvcCreate(tenant, testobj.PVC("team-a", "data", testobj.Request("1024Mi"), testobj.VolumeName("pv-7"))),
			view:   testobj.NewView(testobj.PV("pv-7")),
		},
		{
			name:   "volume pre-bound to a claim larger than itself is denied",
			review: pvCreate(admin, testobj.PV("pv-7", testobj.ClaimRef("team-a", "data", ""))),
			view:   testobj.NewView(claim),
			want:   []string{"spec.claimRef"},
		},
		{
			name:   "volume without capacity pre-bound to a claim is denied, not a panic",
			review: pvCreate(admin, testobj.PV("pv-7", testobj.NoCapacity, testobj.ClaimRef("team-a", "data", ""))),
			view:   testobj.NewView(claim),
			want:   []string{"spec.claimRef"},
		},
		{
			name:   "claim without a request fits any volume",
			review: pvcCreate(tenant, testobj.PVC("team-a", "data", testobj.ClaimNoRequest, testobj.VolumeName("pv-7"))),
			view:   testobj.NewView(testobj.PV("pv-7", testobj.NoCapacity)),
		},

		// The binder's writes and an external provisioner.
		{
			name:   "binder step 1 (PV spec) is allowed",
			review: pvUpdate(binder, pv10, step1),
			view:   testobj.NewView(claim),
		},
		{
			name:   "binder step 2 (PV status) is allowed",
			review: pvStatus(binder, step1, bound10),
			view:   testobj.NewView(claim),
		},
		{
			name:   "binder step 3 (PVC spec) is allowed",
			review: pvcUpdate(binder, claim, step3),
			view:   testobj.NewView(bound10),
		},
		{
			name:   "binder step 4 (PVC status with capacity) is allowed",
			review: pvcStatus(binder, step3, step4),
			view:   testobj.NewView(bound10),
		},
		{
			name:   "external provisioner creates a volume of the requested size",
			review: pvCreate(provisioner, testobj.PV("pvc-1234", testobj.Capacity("5Gi"), testobj.ClaimRef("team-a", "data", string(claim.UID)))),
			view:   testobj.NewView(claim),
			config: provisionerConfig(),
		},
		{
			name:   "controller unbind of a volume is allowed",
			review: pvUpdate(binder, bound10, testobj.PV("pv-7", testobj.Capacity("10Gi"), testobj.Phase(corev1.VolumeBound), byController)),
		},

		{
			name: "controller release of a pre-bound volume whose claim was re-created larger is allowed",
			review: pvUpdate(binder,
				testobj.PV("pv-7", testobj.BoundTo(testobj.PVC("team-a", "data", testobj.ClaimUID("1234")))),
				testobj.PV("pv-7", testobj.ClaimRef("team-a", "data", ""), testobj.Phase(corev1.VolumeBound))),
			view: testobj.NewView(claim),
		},
		{
			name: "the PV controller re-links a volume to its bind-completed claim mid-expansion",
			review: pvUpdate(binder, testobj.PV("pv-7", testobj.Capacity("10Gi"), testobj.Phase(corev1.VolumeBound)),
				testobj.PV("pv-7", testobj.Capacity("10Gi"), testobj.BoundTo(expanding), byController)),
			view: testobj.NewView(expanding),
		},
		{
			name: "a re-link to a bind-completed claim given more than the volume has is denied",
			review: pvUpdate(binder, testobj.PV("pv-7", testobj.Capacity("4Gi"), testobj.Phase(corev1.VolumeBound)),
				testobj.PV("pv-7", testobj.Capacity("4Gi"), testobj.BoundTo(expanding), byController)),
			view:     testobj.NewView(expanding),
			want:     []string{"spec.claimRef"},
			wantText: "PersistentVolumeClaim team-a/data has been given 10Gi, but PersistentVolume pv-7 offers 4Gi",
		},
		// After bind.
		{
			name:   "expanding a bound claim beyond its volume is allowed",
			review: pvcUpdate(tenant, step4, testobj.PVC("team-a", "data", testobj.Request("20Gi"), testobj.ClaimBoundTo("pv-7"), testobj.ClaimBoundStatus(bound10))),
			view:   testobj.NewView(bound10),
		},
		{
			name:   "the resizer growing a bound volume is allowed",
			review: pvUpdate(binder, bound10, boundTo("20Gi")),
			view:   testobj.NewView(step4),
		},
		{
			name:     "shrinking a bound volume below the claim's capacity is denied",
			review:   pvUpdate(admin, bound10, boundTo("2Gi")),
			view:     testobj.NewView(step4),
			want:     []string{"spec.capacity"},
			wantText: "PersistentVolume pv-7 is bound to PersistentVolumeClaim team-a/data, which has 10Gi, and the write shrinks it from 10Gi to 2Gi",
		},
		{
			name:   "shrinking a bound volume whose claim has no status capacity compares with the request",
			review: pvUpdate(admin, bound10, boundTo("2Gi")),
			view:   testobj.NewView(step3),
			want:   []string{"spec.capacity"},
		},
		{
			name:   "shrinking a bound volume to what the claim was given is allowed",
			review: pvUpdate(admin, bound10, boundTo("8Gi")),
			view:   testobj.NewView(step3),
		},
		{
			name:   "clearing the capacity of a bound volume is denied, not a panic",
			review: pvUpdate(admin, bound10, testobj.PV("pv-7", testobj.NoCapacity, testobj.BoundTo(claim))),
			view:   testobj.NewView(step4),
			want:   []string{"spec.capacity"},
		},
		{
			name:   "shrinking a Released volume is allowed",
			review: pvUpdate(admin, bound10, boundTo("2Gi")),
		},
		{
			name:   "shrinking an unbound volume is allowed",
			review: pvUpdate(admin, pv10, testobj.PV("pv-7", testobj.Capacity("2Gi"))),
		},
	})
}
