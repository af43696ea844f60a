package policy_test

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/storage"
	"github.com/pvguard/pvguard/test/testobj"
)

func TestPVG010VolumeGrab(t *testing.T) {
	claim := testobj.PVC("team-a", "data")
	grab := pvcCreate(tenant, testobj.PVC("team-a", "data", testobj.VolumeName("pv-7")))
	granted := func(value string) *testobj.View {
		return testobj.NewView(testobj.PV("pv-7", testobj.PVMeta(testobj.Annotation(policy.DefaultGrantAnnotation, value))))
	}
	bind := testobj.BindSteps(testobj.PV("pv-7"), claim)
	released := testobj.PV("pv-7", testobj.ClaimRef("team-a", "gone", "uid-of-a-deleted-claim"), testobj.Phase(corev1.VolumeReleased))
	naming := testobj.PVC("team-b", "thief", testobj.VolumeName("pv-7"))
	other := testobj.PVC("team-b", "db", testobj.ClaimBoundTo("pv-7"))
	earlier := func(reclaim corev1.PersistentVolumeReclaimPolicy) *corev1.PersistentVolume {
		return testobj.PV("pv-7", testobj.ClaimRef("team-a", "data", "uid-of-the-deleted-data"), testobj.Phase(corev1.VolumeReleased),
			testobj.Reclaim(reclaim))
	}
	veleroSA := policy.UserInfo{Username: "system:serviceaccount:velero:velero"}

	runRuleCases(t, "PVG010", []ruleCase{
		{
			name:     "claim naming a free volume that does not grant its namespace is warned",
			review:   grab,
			view:     testobj.NewView(testobj.PV("pv-7")),
			want:     []string{"spec.volumeName"},
			wantText: "PersistentVolumeClaim team-a/data names PersistentVolume pv-7 in spec.volumeName, but the volume is not pre-bound to it and does not grant namespace team-a (annotation pvguard.io/allowed-namespaces); ask the owner of PersistentVolume pv-7 to pre-bind it to this claim (spec.claimRef) or to grant namespace team-a with the annotation pvguard.io/allowed-namespaces",
		},
		{
			name:     "claim naming a free volume while another volume is linked to it is told to name that one, not to have this one pre-bound",
			review:   grab,
			view:     testobj.NewView(testobj.PV("pv-7"), testobj.PV("pv-3", testobj.ClaimRef("team-a", "data", "uid-team-a-data"))),
			want:     []string{"spec.volumeName"},
			wantText: "PersistentVolume pv-3 is already linked to this claim, and no second volume may be linked to it: name that volume in spec.volumeName, or leave it unset",
		},
		{
			name:   "claim naming a volume reserved for another live claim is PVG004's denial, not repeated here",
			review: grab,
			view:   testobj.NewView(testobj.PV("pv-7", testobj.ClaimRef("team-b", "db", "")), testobj.PVC("team-b", "db")),
		},
		{
			name:   "claim naming a volume bound to another live claim is PVG004's denial, not repeated here",
			review: grab,
			view:   testobj.NewView(testobj.PV("pv-7", testobj.BoundTo(other)), other),
		},
		{
			name:   "claim naming a volume whose claimRef carries its namesake's uid, that claim seen live (a lagging cache), is not judged",
			review: grab,
			view:   testobj.NewView(earlier(corev1.PersistentVolumeReclaimRetain), testobj.PVCWith(testobj.PVC("team-a", "data"), testobj.ClaimUID("uid-of-the-deleted-data"))),
		},
		{
			name:     "a claim re-created naming the Released volume of its deleted namesake is warned, with what frees it (Retain)",
			review:   grab,
			view:     testobj.NewView(earlier(corev1.PersistentVolumeReclaimRetain)),
			want:     []string{"spec.volumeName"},
			wantText: "PersistentVolumeClaim team-a/data names PersistentVolume pv-7 in spec.volumeName, but the volume still belongs to an earlier claim of this name, PersistentVolumeClaim team-a/data (uid uid-of-the-deleted-data), which was deleted: the volume is Released and is bound to no other claim, so this claim stays Pending; an admin frees PersistentVolume pv-7 for this claim by clearing its spec.claimRef.uid",
		},
		{
			name:     "a claim re-created naming the Released volume of its deleted namesake is warned, with what frees it (Delete)",
			review:   grab,
			view:     testobj.NewView(earlier(corev1.PersistentVolumeReclaimDelete)),
			want:     []string{"spec.volumeName"},
			wantText: "its reclaim policy is Delete, so the volume is deleted rather than handed to this claim",
		},
		{
			name: "a tenant dressed up as Velero's restore (its selector label, no bind annotations) naming its namesake's volume is warned",
			review: pvcCreate(tenant, testobj.PVC("team-a", "data", testobj.VolumeName("pv-7"), func(c *corev1.PersistentVolumeClaim) {
				c.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"velero.io/dynamic-pv-restore": "team-a.data.x1"}}
			})),
			view: testobj.NewView(earlier(corev1.PersistentVolumeReclaimRetain)),
			want: []string{"spec.volumeName"},
		},
		{
			name:   "an update naming the volume later is judged as a create is (Velero's RebindPVC of a namesake's volume is warned too)",
			review: pvcUpdate(tenant, testobj.PVC("team-a", "data"), testobj.PVC("team-a", "data", testobj.VolumeName("pv-7"))),
			view:   testobj.NewView(earlier(corev1.PersistentVolumeReclaimRetain)),
			want:   []string{"spec.volumeName"},
		},
		{
			name:   "a volume pre-bound by name to the claim is its own (no warning)",
			review: grab,
			view:   testobj.NewView(testobj.PV("pv-7", testobj.ClaimRef("team-a", "data", ""), testobj.Phase(corev1.VolumeAvailable))),
		},
		{
			name:   "a volume whose claimRef carries this claim's own uid is its own (no warning)",
			review: grab,
			view:   testobj.NewView(testobj.PV("pv-7", testobj.ClaimRef("team-a", "data", "uid-team-a-data"))),
		},
		{
			name:   "Velero's RebindPVC: the restored claim names the volume its deleted restore claim left Released (no warning)",
			review: pvcUpdate(veleroSA, testobj.PVC("team-a", "db"), testobj.PVC("team-a", "db", testobj.VolumeName("pv-7"))),
			view: testobj.NewView(testobj.PV("pv-7", testobj.ClaimRef("velero", "dd-1", "uid-restore"), testobj.Phase(corev1.VolumeReleased),
				testobj.Reclaim(corev1.PersistentVolumeReclaimRetain))),
		},
		{
			name:   "claim naming a Released volume whose claim is gone names no deleted claim (Velero's restore names it first)",
			review: grab,
			view:   testobj.NewView(testobj.PV("pv-7", testobj.ClaimRef("velero", "restore-x", "uid-of-a-deleted-claim"), testobj.Phase(corev1.VolumeReleased))),
		},
		{
			name:     "freeing a volume that a claim names hands it to that claim, and is warned",
			review:   pvUpdate(admin, released, testobj.PV("pv-7", testobj.Phase(corev1.VolumeReleased))),
			view:     testobj.NewView(naming),
			want:     []string{"spec.claimRef"},
			wantText: "the write frees PersistentVolume pv-7, which PersistentVolumeClaim team-b/thief names in spec.volumeName: the volume would be bound to that claim at once, but it is not pre-bound to it and does not grant namespace team-b (annotation pvguard.io/allowed-namespaces)",
		},
		{
			name:   "creating a free volume that a claim names is warned",
			review: pvCreate(admin, testobj.PV("pv-7")),
			view:   testobj.NewView(naming),
			want:   []string{"spec.claimRef"},
		},
		{
			name:   "freeing a volume for a claim whose namespace it grants is allowed",
			review: pvUpdate(admin, released, testobj.PV("pv-7", testobj.PVMeta(testobj.Annotation(policy.DefaultGrantAnnotation, "team-b")))),
			view:   testobj.NewView(naming),
		},
		{
			name:   "freeing a volume no claim names is allowed",
			review: pvUpdate(admin, released, testobj.PV("pv-7", testobj.Phase(corev1.VolumeReleased))),
		},
		{
			name:   "pointing a Released volume at the claim that names it is allowed (Velero's restore)",
			review: pvUpdate(admin, released, testobj.PV("pv-7", testobj.ClaimRef("team-b", "thief", ""))),
			view:   testobj.NewView(naming),
		},
		{
			name:   "re-creating a volume without claimRef for the claim that completed its binding is allowed",
			review: pvCreate(admin, testobj.PV("pv-7")),
			view:   testobj.NewView(testobj.PVCWith(claim, testobj.ClaimBoundTo("pv-7"))),
		},
		{
			name:   "volume pre-bound to the claim by name is allowed",
			review: grab,
			view:   testobj.NewView(testobj.PV("pv-7", testobj.ClaimRef("team-a", "data", ""))),
		},
		{
			name:   "volume pre-bound to the claim by uid is allowed",
			review: grab,
			view:   testobj.NewView(testobj.PV("pv-7", testobj.ClaimRef("team-a", "data", string(claim.UID)))),
		},
		{
			name:   "volume that does not exist yet is allowed",
			review: grab,
		},
		{name: "grant naming the namespace", review: grab, view: granted("team-a")},
		{name: "grant with a glob", review: grab, view: granted("team-*")},
		{name: "grant list with spaces", review: grab, view: granted(" prod , team-a ,")},
		{name: "grant of other namespaces", review: grab, view: granted("team-b, prod"), want: []string{"spec.volumeName"}},
		{name: "empty grant", review: grab, view: granted(""), want: []string{"spec.volumeName"}},
		{name: "malformed glob grants nothing", review: grab, view: granted("team-["), want: []string{"spec.volumeName"}},
		{
			name:   "grant overrides a claimRef to another claim",
			review: grab,
			view: testobj.NewView(testobj.PV("pv-7", testobj.ClaimRef("team-b", "db", ""),
				testobj.PVMeta(testobj.Annotation(policy.DefaultGrantAnnotation, "team-a")))),
		},
		{
			name:   "renamed grant annotation is honoured",
			review: grab,
			view:   testobj.NewView(testobj.PV("pv-7", testobj.PVMeta(testobj.Annotation("example.com/share-with", "team-a")))),
			config: mustConfig(t, "grantAnnotation: example.com/share-with\n"),
		},
		{
			name:   "default grant annotation no longer counts once renamed",
			review: grab,
			view:   granted("team-a"),
			config: mustConfig(t, "grantAnnotation: example.com/share-with\n"),
			want:   []string{"spec.volumeName"},
		},
		{
			name:   "re-pointing volumeName to another free volume is warned",
			review: pvcUpdate(tenant, testobj.PVC("team-a", "data", testobj.VolumeName("pv-7")), testobj.PVC("team-a", "data", testobj.VolumeName("pv-8"))),
			view:   testobj.NewView(testobj.PV("pv-7", testobj.ClaimRef("team-a", "data", "")), testobj.PV("pv-8")),
			want:   []string{"spec.volumeName"},
		},
		{
			name: "update that keeps volumeName is not judged",
			review: pvcUpdate(tenant, testobj.PVC("team-a", "data", testobj.VolumeName("pv-7")),
				testobj.PVC("team-a", "data", testobj.VolumeName("pv-7"), testobj.ClaimMeta(testobj.Label("app", "db")))),
			view: testobj.NewView(testobj.PV("pv-7")),
		},
		{
			name:   "binder write 3 (PVC spec) after write 1 is allowed",
			review: pvcUpdate(binder, bind.PVC, bind.PVCSpec),
			view:   testobj.NewView(bind.PVSpec),
		},
		{
			name:   "binder write 4 (PVC status) is allowed",
			review: pvcStatus(binder, bind.PVCSpec, bind.PVCStatus),
			view:   testobj.NewView(bind.PVStatus),
		},
		{
			name:   "claim of a provisioned volume is allowed",
			review: pvcUpdate(binder, claim, testobj.PVCWith(claim, testobj.ClaimBoundTo("pvc-uid"))),
			view: testobj.NewView(testobj.PV("pvc-uid", testobj.ClaimRef("team-a", "data", string(claim.UID)),
				testobj.PVMeta(testobj.Annotation(storage.AnnProvisionedBy, "csi.example.com")))),
		},
	})
}

func TestPVG010ViewErrorIsReturned(t *testing.T) {
	view := testobj.NewView()
	view.Err = errors.New("cache not synced")
	r := pvcCreate(tenant, testobj.PVC("team-a", "data", testobj.VolumeName("pv-7")))
	_, err := policy.NewEngine(onlyRule(t, "PVG010")).Admit(r, view)
	if err == nil || !errors.Is(err, view.Err) {
		t.Fatalf("Admit error = %v, want the view's error wrapped", err)
	}
}
