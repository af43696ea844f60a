package policy_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/storage"
	"github.com/pvguard/pvguard/test/testobj"
)

func TestPVG003VolumeNameImmutable(t *testing.T) {
	pv := testobj.PV("pv-7")
	byController := testobj.ClaimMeta(testobj.Annotation(storage.AnnBoundByController, "yes"))
	pending := testobj.PVC("team-a", "data")
	step3 := testobj.PVC("team-a", "data", testobj.VolumeName("pv-7"), byController,
		testobj.ClaimMeta(testobj.Annotation(storage.AnnBindCompleted, "yes")))
	bound := testobj.PVC("team-a", "data", testobj.ClaimBoundTo("pv-7"), byController, testobj.ClaimBoundStatus(pv))
	noBindCompleted := testobj.ClaimMeta(testobj.NoAnnotation(storage.AnnBindCompleted))

	runRuleCases(t, "PVG003", []ruleCase{
		{
			name:   "binder step 3 (PVC spec) sets volumeName and bind-completed",
			review: pvcUpdate(binder, pending, step3),
		},
		{
			name:   "binder step 4 (PVC status Bound) is allowed",
			review: pvcStatus(binder, step3, bound),
		},
		{
			name:   "binder step 3 on a claim pre-bound by the user adds bind-completed",
			review: pvcUpdate(binder, testobj.PVC("team-a", "data", testobj.VolumeName("pv-7")), testobj.PVC("team-a", "data", testobj.ClaimBoundTo("pv-7"))),
		},
		{
			name:   "unrelated annotation edit of a bound claim is allowed",
			review: pvcUpdate(tenant, bound, testobj.PVC("team-a", "data", testobj.ClaimBoundTo("pv-7"), byController, testobj.ClaimMeta(testobj.Annotation("owner", "alice")))),
		},
		{
			name:   "expanding a bound claim is allowed",
			review: pvcUpdate(tenant, bound, testobj.PVC("team-a", "data", testobj.ClaimBoundTo("pv-7"), byController, testobj.Request("5Gi"))),
		},
		{
			name:   "a claim pre-bound by the user may still change volumeName before binding",
			review: pvcUpdate(tenant, testobj.PVC("team-a", "data", testobj.VolumeName("pv-7")), testobj.PVC("team-a", "data", testobj.VolumeName("pv-8"))),
		},
		{
			name:   "removing bind-completed from a claim without volumeName is allowed",
			review: pvcUpdate(admin, testobj.PVC("team-a", "data", testobj.ClaimMeta(testobj.Annotation(storage.AnnBindCompleted, "yes"))), pending),
		},
		{
			name:     "changing volumeName of a bound claim is denied",
			review:   pvcUpdate(tenant, bound, testobj.PVC("team-a", "data", testobj.ClaimBoundTo("pv-8"), byController)),
			want:     []string{"spec.volumeName"},
			wantText: "PersistentVolumeClaim team-a/data is bound to PersistentVolume pv-7 and the write changes spec.volumeName from pv-7 to pv-8",
		},
		{
			name:     "clearing volumeName of a bound claim is denied",
			review:   pvcUpdate(tenant, bound, testobj.PVC("team-a", "data", testobj.ClaimBoundTo(""), byController)),
			want:     []string{"spec.volumeName"},
			wantText: "clears spec.volumeName (was pv-7)",
		},
		{
			name:   "clearing volumeName and bind-completed together is one finding",
			review: pvcUpdate(tenant, bound, testobj.PVC("team-a", "data", testobj.ClaimBoundTo(""), noBindCompleted)),
			want:   []string{"spec.volumeName"},
		},
		{
			name:     "removing bind-completed while volumeName is set is denied",
			review:   pvcUpdate(admin, bound, testobj.PVC("team-a", "data", testobj.ClaimBoundTo("pv-7"), noBindCompleted)),
			want:     []string{"metadata.annotations[pv.kubernetes.io/bind-completed]"},
			wantText: "removes the pv.kubernetes.io/bind-completed annotation; keep the annotation",
		},
		{
			name:   "removing every annotation of a bound claim is denied",
			review: pvcUpdate(admin, bound, testobj.PVC("team-a", "data", testobj.VolumeName("pv-7"))),
			want:   []string{"metadata.annotations[pv.kubernetes.io/bind-completed]"},
		},
		{
			name:   "changing volumeName and removing bind-completed are two findings",
			review: pvcUpdate(admin, bound, testobj.PVC("team-a", "data", testobj.ClaimBoundTo("pv-8"), noBindCompleted)),
			want:   []string{"spec.volumeName", "metadata.annotations[pv.kubernetes.io/bind-completed]"},
		},
		{
			name:   "removing bind-completed through /status is denied",
			review: pvcStatus(tenant, bound, testobj.PVCWith(bound, noBindCompleted)),
			want:   []string{"metadata.annotations[pv.kubernetes.io/bind-completed]"},
		},
		{
			name: "the resizer's status write keeps the annotations and is allowed",
			review: pvcStatus(policy.UserInfo{Username: "system:serviceaccount:csi:csi-resizer"}, bound, testobj.PVCWith(bound, func(c *corev1.PersistentVolumeClaim) {
				c.Status.Conditions = []corev1.PersistentVolumeClaimCondition{{Type: corev1.PersistentVolumeClaimResizing, Status: corev1.ConditionTrue}}
			})),
		},
		{
			name:   "namespace exemption",
			review: pvcUpdate(tenant, bound, testobj.PVC("team-a", "data", testobj.ClaimBoundTo("pv-8"))),
			config: mustConfig(t, "rules:\n  PVG003:\n    exemptions: {namespaces: [team-a]}\n"),
		},
	})
}
