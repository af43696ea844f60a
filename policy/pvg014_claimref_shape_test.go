package policy_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/pvguard/pvguard/test/testobj"
)

func TestPVG014ClaimRefShape(t *testing.T) {
	claim := testobj.PVC("team-a", "data")
	bind := testobj.BindSteps(testobj.PV("pv-7"), claim)
	edit := func(f func(*corev1.ObjectReference)) testobj.PVMod { return testobj.EditClaimRef(f) }
	noKind := edit(func(r *corev1.ObjectReference) { r.Kind, r.APIVersion = "", "" })
	badKind := testobj.PV("pv-7", testobj.ClaimRef("team-a", "data", ""), edit(func(r *corev1.ObjectReference) { r.Kind = "Pod" }))

	runRuleCases(t, "PVG014", []ruleCase{
		{
			name:     "claimRef without a name is denied",
			review:   pvCreate(admin, testobj.PV("pv-7", testobj.ClaimRef("team-a", "", ""))),
			want:     []string{"spec.claimRef.name"},
			wantText: "PersistentVolume pv-7 has a spec.claimRef without a name, so no claim can ever bind it; set spec.claimRef.name",
		},
		{
			name:   "claimRef without a namespace is denied",
			review: pvCreate(admin, testobj.PV("pv-7", testobj.ClaimRef("", "data", ""))),
			want:   []string{"spec.claimRef.namespace"},
		},
		{
			name:   "empty claimRef is two findings",
			review: pvCreate(admin, testobj.PV("pv-7", testobj.ClaimRef("", "", ""), noKind)),
			want:   []string{"spec.claimRef.name", "spec.claimRef.namespace"},
		},
		{
			name:     "claimRef to another kind is denied",
			review:   pvCreate(admin, badKind),
			want:     []string{"spec.claimRef.kind"},
			wantText: `spec.claimRef.kind "Pod"`,
		},
		{
			name:   "claimRef with another apiVersion is denied",
			review: pvCreate(admin, testobj.PV("pv-7", testobj.ClaimRef("team-a", "data", ""), edit(func(r *corev1.ObjectReference) { r.APIVersion = "v2" }))),
			want:   []string{"spec.claimRef.apiVersion"},
		},
		{
			name:   "empty kind and apiVersion are left to the mutating webhook",
			review: pvCreate(admin, testobj.PV("pv-7", testobj.ClaimRef("team-a", "data", ""), noKind)),
		},
		{
			name:   "volume without claimRef is not judged",
			review: pvCreate(admin, testobj.PV("pv-7")),
		},
		{
			name:   "update that keeps a stored bad claimRef is not judged",
			review: pvUpdate(admin, badKind, testobj.PVWith(badKind, testobj.PVMeta(testobj.Label("tier", "gold")))),
		},
		{
			name:   "update that edits any field of a bad claimRef is judged",
			review: pvUpdate(admin, badKind, testobj.PVWith(badKind, edit(func(r *corev1.ObjectReference) { r.ResourceVersion = "42" }))),
			want:   []string{"spec.claimRef.kind"},
		},
		{
			name:   "update that fixes the claimRef is allowed",
			review: pvUpdate(admin, badKind, testobj.PV("pv-7", testobj.ClaimRef("team-a", "data", ""))),
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
			name:   "binder releasing a pre-bound volume (uid cleared) is allowed",
			review: pvUpdate(binder, bind.PVStatus, testobj.PVWith(bind.PVStatus, testobj.ClaimRefUID(""))),
		},
		{
			name: "external provisioner creating a pre-bound volume is allowed",
			review: pvCreate(provisioner, testobj.PV("pvc-uid", testobj.ClaimRef("team-a", "data", string(claim.UID)),
				edit(func(r *corev1.ObjectReference) { r.ResourceVersion = "7" }))),
			config: provisionerConfig(),
		},
	})
}
