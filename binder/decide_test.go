package binder

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pvguard/pvguard/storage"
	"github.com/pvguard/pvguard/test/testobj"
)

func class(name, provisioner string, mode storagev1.VolumeBindingMode) *storagev1.StorageClass {
	return testobj.StorageClass(name, provisioner, func(sc *storagev1.StorageClass) { sc.VolumeBindingMode = &mode })
}

func TestDecideClaim(t *testing.T) {
	fast := class("fast", "csi.example.com", storagev1.VolumeBindingImmediate)
	local := class("local", storage.NoProvisioner, storagev1.VolumeBindingWaitForFirstConsumer)
	manual := class("manual", storage.NoProvisioner, storagev1.VolumeBindingImmediate)
	def := testobj.StorageClass("standard", "csi.example.com", testobj.DefaultClass)
	pv := testobj.PV("pv-1", testobj.Phase(corev1.VolumeAvailable))
	claim := testobj.PVC("ns", "c")
	bound := testobj.PVC("ns", "c", testobj.ClaimBoundTo("pv-1"))
	deleting := testobj.PVC("ns", "c", testobj.ClaimMeta(func(m *metav1.ObjectMeta) { now := metav1.Now(); m.DeletionTimestamp = &now }))
	wffcCSI := class("wffc-csi", "csi.example.com", storagev1.VolumeBindingWaitForFirstConsumer)
	wffcClaim := testobj.PVC("ns", "c", testobj.ClaimClass("local"))
	wffcScheduled := testobj.PVC("ns", "c", testobj.ClaimClass("wffc-csi"), testobj.ClaimMeta(testobj.Annotation(storage.AnnSelectedNode, "n1")))
	localPV := testobj.PV("pv-local", testobj.Class("local"), testobj.Phase(corev1.VolumeAvailable))
	csiPV := testobj.PV("pv-static", testobj.Class("wffc-csi"), testobj.Phase(corev1.VolumeAvailable))
	byController := testobj.PVMeta(testobj.Annotation(storage.AnnBoundByController, "yes"))
	provisionedBy := testobj.PVMeta(testobj.Annotation(storage.AnnProvisionedBy, "csi.example.com"))

	for _, tc := range []struct {
		name       string
		s          ClaimState
		wantBind   string
		wantPhase  corev1.PersistentVolumeClaimPhase
		wantReason string
		wantPlan   bool
		wantClass  string
		wantProv   string
		wantLive   bool
	}{
		{name: "unplanned claim asks for a plan", s: ClaimState{Claim: claim}, wantPlan: true},
		{name: "planned claim binds its volume", s: ClaimState{Claim: claim, Planned: true, Assigned: pv}, wantBind: "pv-1"},
		{name: "claim being deleted is left alone", s: ClaimState{Claim: deleting, Planned: true, Assigned: pv}},
		{name: "no class and no volume", s: ClaimState{Claim: claim, Planned: true}, wantPhase: corev1.ClaimPending, wantReason: ReasonFailedBinding},
		{name: "unset class gets the default class retroactively",
			s: ClaimState{Claim: testobj.PVC("ns", "c", testobj.ClaimNoClass), Planned: true, DefaultClass: def}, wantClass: "standard"},
		{name: "explicit empty class is not defaulted",
			s: ClaimState{Claim: claim, Planned: true, DefaultClass: def}, wantPhase: corev1.ClaimPending, wantReason: ReasonFailedBinding},
		{name: "external provisioner is asked through the annotation",
			s:         ClaimState{Claim: testobj.PVC("ns", "c", testobj.ClaimClass("fast")), Planned: true, Class: fast},
			wantPhase: corev1.ClaimPending, wantReason: ReasonExternalProvisioning, wantProv: "csi.example.com"},
		{name: "annotation already there is not rewritten",
			s: ClaimState{Claim: testobj.PVC("ns", "c", testobj.ClaimClass("fast"), testobj.ClaimMeta(
				testobj.Annotation(storage.AnnStorageProvisioner, "csi.example.com"), testobj.Annotation(storage.AnnBetaStorageProvisioner, "csi.example.com"))), Planned: true, Class: fast},
			wantPhase: corev1.ClaimPending, wantReason: ReasonExternalProvisioning},
		{name: "wait for first consumer, without asking for a plan",
			s:         ClaimState{Claim: wffcClaim, Class: local},
			wantPhase: corev1.ClaimPending, wantReason: ReasonWaitForFirstConsumer},
		// Upstream's PV controller never binds a free volume to a WaitForFirstConsumer claim
		// (FindMatchingVolume skips unbound volumes when delayBinding and no node): the
		// scheduler does, by writing the volume's claimRef. A stale plan entry must not either.
		{name: "WFFC claim: a free volume, even one a plan named, is left to the scheduler",
			s:         ClaimState{Claim: wffcClaim, Class: local, Planned: true, Assigned: localPV, PreBound: nil},
			wantPhase: corev1.ClaimPending, wantReason: ReasonWaitForFirstConsumer},
		{name: "WFFC claim: the scheduler's claimRef (uid, bound-by-controller) is completed",
			s: ClaimState{Claim: wffcClaim, Class: local, PreBound: []*corev1.PersistentVolume{
				testobj.PV("pv-sched", testobj.Class("local"), testobj.Phase(corev1.VolumeAvailable), testobj.ClaimRef("ns", "c", string(wffcClaim.UID)), byController)}},
			wantBind: "pv-sched"},
		{name: "WFFC claim: a volume the user pre-bound by name is completed",
			s: ClaimState{Claim: wffcClaim, Class: local, PreBound: []*corev1.PersistentVolume{
				testobj.PV("pv-user", testobj.Class("local"), testobj.Phase(corev1.VolumeAvailable), testobj.ClaimRef("ns", "c", ""))}},
			wantBind: "pv-user"},
		{name: "WFFC claim: the volume carrying its uid goes before one pre-bound by name",
			s: ClaimState{Claim: wffcClaim, Class: local, PreBound: []*corev1.PersistentVolume{
				testobj.PV("a-by-name", testobj.Class("local"), testobj.ClaimRef("ns", "c", "")),
				testobj.PV("b-by-uid", testobj.Class("local"), testobj.ClaimRef("ns", "c", string(wffcClaim.UID)))}},
			wantBind: "b-by-uid"},
		{name: "WFFC claim: a volume linked to an earlier claim of the same name is not taken",
			s: ClaimState{Claim: wffcClaim, Class: local, PreBound: []*corev1.PersistentVolume{
				testobj.PV("pv-old", testobj.Class("local"), testobj.ClaimRef("ns", "c", "old-uid"))}},
			wantPhase: corev1.ClaimPending, wantReason: ReasonWaitForFirstConsumer},
		{name: "WFFC claim: a pre-bound volume that is too small is not bound",
			s: ClaimState{Claim: wffcClaim, Class: local, PreBound: []*corev1.PersistentVolume{
				testobj.PV("pv-small", testobj.Class("local"), testobj.Capacity("100Mi"), testobj.ClaimRef("ns", "c", string(wffcClaim.UID)))}},
			wantPhase: corev1.ClaimPending, wantReason: ReasonWaitForFirstConsumer},
		// selected-node means "provision here": the scheduler sets it only when no static
		// volume fits on the node it picked.
		{name: "WFFC claim with selected-node: the provisioner is asked, a fitting static volume is not bound",
			s:         ClaimState{Claim: wffcScheduled, Class: wffcCSI, Planned: true, Assigned: csiPV},
			wantPhase: corev1.ClaimPending, wantReason: ReasonExternalProvisioning, wantProv: "csi.example.com"},
		{name: "WFFC claim with selected-node: the provisioned volume is bound",
			s: ClaimState{Claim: wffcScheduled, Class: wffcCSI, PreBound: []*corev1.PersistentVolume{
				testobj.PV("pvc-new", testobj.Class("wffc-csi"), testobj.ClaimRef("ns", "c", string(wffcScheduled.UID)), provisionedBy)}},
			wantBind: "pvc-new"},
		{name: "WFFC claim with selected-node and a no-provisioner class: nothing to bind or ask",
			s:         ClaimState{Claim: testobj.PVC("ns", "c", testobj.ClaimClass("local"), testobj.ClaimMeta(testobj.Annotation(storage.AnnSelectedNode, "n1"))), Class: local, Planned: true, Assigned: localPV},
			wantPhase: corev1.ClaimPending, wantReason: ReasonFailedBinding},
		{name: "no-provisioner class", s: ClaimState{Claim: testobj.PVC("ns", "c", testobj.ClaimClass("manual")), Planned: true, Class: manual},
			wantPhase: corev1.ClaimPending, wantReason: ReasonFailedBinding},
		{name: "missing class", s: ClaimState{Claim: testobj.PVC("ns", "c", testobj.ClaimClass("gone")), Planned: true},
			wantPhase: corev1.ClaimPending, wantReason: ReasonProvisioningFailed},

		{name: "pre-bound claim, volume missing", s: ClaimState{Claim: testobj.PVC("ns", "c", testobj.VolumeName("pv-1"))}, wantPhase: corev1.ClaimPending},
		{name: "pre-bound claim binds a free fitting volume", s: ClaimState{Claim: testobj.PVC("ns", "c", testobj.VolumeName("pv-1")), Volume: pv}, wantBind: "pv-1"},
		{name: "pre-bound claim, volume too small",
			s:         ClaimState{Claim: testobj.PVC("ns", "c", testobj.VolumeName("pv-1"), testobj.Request("5Gi")), Volume: pv},
			wantPhase: corev1.ClaimPending, wantReason: ReasonVolumeMismatch},
		{name: "pre-bound claim, volume of another VolumeAttributesClass",
			s: ClaimState{Claim: testobj.PVC("ns", "c", testobj.VolumeName("pv-1"), testobj.ClaimVolumeAttributesClass("gold")),
				Volume: testobj.PVWith(pv, testobj.VolumeAttributesClass("silver"))},
			wantPhase: corev1.ClaimPending, wantReason: ReasonVolumeMismatch},
		{name: "pre-bound claim without a VolumeAttributesClass, volume with one",
			s:         ClaimState{Claim: testobj.PVC("ns", "c", testobj.VolumeName("pv-1")), Volume: testobj.PVWith(pv, testobj.VolumeAttributesClass("silver"))},
			wantPhase: corev1.ClaimPending, wantReason: ReasonVolumeMismatch},
		{name: "pre-bound claim, volume of the same VolumeAttributesClass",
			s: ClaimState{Claim: testobj.PVC("ns", "c", testobj.VolumeName("pv-1"), testobj.ClaimVolumeAttributesClass("gold")),
				Volume: testobj.PVWith(pv, testobj.VolumeAttributesClass("gold"))},
			wantBind: "pv-1"},
		{name: "pre-bound claim, volume pre-bound back", s: ClaimState{Claim: testobj.PVC("ns", "c", testobj.VolumeName("pv-1")),
			Volume: testobj.PV("pv-1", testobj.ClaimRef("ns", "c", ""))}, wantBind: "pv-1"},
		{name: "pre-bound claim, volume taken", s: ClaimState{Claim: testobj.PVC("ns", "c", testobj.VolumeName("pv-1")),
			Volume: testobj.PV("pv-1", testobj.ClaimRef("ns", "other", "x"))}, wantPhase: corev1.ClaimPending, wantReason: ReasonFailedBinding},

		{name: "bound claim completes or confirms its binding", s: ClaimState{Claim: bound, Volume: testobj.PV("pv-1", testobj.BoundTo(bound))}, wantBind: "pv-1"},
		{name: "bound claim whose volume lost its claimRef is re-bound", s: ClaimState{Claim: bound, Volume: pv}, wantBind: "pv-1"},
		{name: "bound claim, volume missing from the cache: read live first", s: ClaimState{Claim: bound}, wantLive: true},
		{name: "bound claim, volume confirmed gone: Lost", s: ClaimState{Claim: bound, VolumeConfirmed: true},
			wantPhase: corev1.ClaimLost, wantReason: ReasonClaimLost},
		{name: "bound claim, volume bound to another claim: Lost (misbound)",
			s:         ClaimState{Claim: bound, Volume: testobj.PV("pv-1", testobj.ClaimRef("ns", "other", "x"))},
			wantPhase: corev1.ClaimLost, wantReason: ReasonClaimMisbound},
		{name: "bound claim lost its volumeName", s: ClaimState{Claim: testobj.PVC("ns", "c", testobj.ClaimMeta(testobj.Annotation(storage.AnnBindCompleted, "yes")))},
			wantPhase: corev1.ClaimLost, wantReason: ReasonClaimLost},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := DecideClaim(tc.s)
			gotBind := ""
			if a.Bind != nil {
				gotBind = a.Bind.Name
			}
			gotReason := ""
			if a.Event != nil {
				gotReason = a.Event.Reason
			}
			if gotBind != tc.wantBind || a.Phase != tc.wantPhase || gotReason != tc.wantReason || a.NeedPlan != tc.wantPlan ||
				a.SetClass != tc.wantClass || a.Provisioner != tc.wantProv || a.NeedLiveVolume != tc.wantLive {
				t.Fatalf("got bind=%q phase=%q reason=%q plan=%v class=%q prov=%q live=%v; want bind=%q phase=%q reason=%q plan=%v class=%q prov=%q live=%v",
					gotBind, a.Phase, gotReason, a.NeedPlan, a.SetClass, a.Provisioner, a.NeedLiveVolume,
					tc.wantBind, tc.wantPhase, tc.wantReason, tc.wantPlan, tc.wantClass, tc.wantProv, tc.wantLive)
			}
		})
	}
}

func TestDecideVolume(t *testing.T) {
	claim := testobj.PVC("ns", "c")
	boundClaim := testobj.PVC("ns", "c", testobj.ClaimBoundTo("pv-1"))
	elsewhere := testobj.PVC("ns", "c", testobj.ClaimBoundTo("pv-2"))
	recreated := testobj.PVC("ns", "c", testobj.ClaimUID("new-uid"))
	boundPV := func(mods ...testobj.PVMod) *corev1.PersistentVolume {
		return testobj.PV("pv-1", append([]testobj.PVMod{testobj.BoundTo(claim)}, mods...)...)
	}
	released := testobj.Phase(corev1.VolumeReleased)
	byController := testobj.PVMeta(testobj.Annotation(storage.AnnBoundByController, "yes"))
	provisioned := testobj.PVMeta(testobj.Annotation(storage.AnnProvisionedBy, "csi.example.com"))
	inTree := testobj.PVMeta(testobj.Annotation(storage.AnnProvisionedBy, "kubernetes.io/host-path"))
	deleteReclaim := testobj.Reclaim(corev1.PersistentVolumeReclaimDelete)

	for _, tc := range []struct {
		name       string
		s          VolumeState
		want       VolumeAction
		wantReason string
	}{
		{name: "free volume is Available", s: VolumeState{Volume: testobj.PV("pv-1")}, want: VolumeAction{Phase: corev1.VolumeAvailable}},
		{name: "pre-bound volume is Available", s: VolumeState{Volume: testobj.PV("pv-1", testobj.ClaimRef("ns", "c", ""))}, want: VolumeAction{Phase: corev1.VolumeAvailable}},
		{name: "claim missing from the cache: confirm live, never release on the cache's word",
			s: VolumeState{Volume: boundPV()}, want: VolumeAction{NeedLiveClaim: true}},
		{name: "claim of another uid in the cache: confirm live", s: VolumeState{Volume: boundPV(), Claim: recreated}, want: VolumeAction{NeedLiveClaim: true}},
		{name: "claim confirmed gone: Released", s: VolumeState{Volume: boundPV(), ClaimConfirmed: true}, want: VolumeAction{Phase: corev1.VolumeReleased}},
		{name: "claim confirmed re-created: Released", s: VolumeState{Volume: boundPV(), Claim: recreated, ClaimConfirmed: true}, want: VolumeAction{Phase: corev1.VolumeReleased}},
		{name: "released Retain volume is kept", s: VolumeState{Volume: boundPV(released)}, want: VolumeAction{}},
		{name: "released Retain volume with the reuse annotation is reused",
			s: VolumeState{Volume: boundPV(released, testobj.PVMeta(testobj.Annotation(storage.AnnReuseWhenReleased, "true")))}, want: VolumeAction{Reuse: true}, wantReason: ReasonVolumeReused},
		{name: "released Delete volume from an external provisioner is left to it",
			s: VolumeState{Volume: boundPV(released, provisioned, testobj.Reclaim(corev1.PersistentVolumeReclaimDelete))}, want: VolumeAction{}},
		{name: "released static Delete volume fails: nothing can delete it",
			s: VolumeState{Volume: boundPV(released, testobj.Reclaim(corev1.PersistentVolumeReclaimDelete))}, want: VolumeAction{Phase: corev1.VolumeFailed}, wantReason: ReasonVolumeFailedDelete},
		{name: "released Recycle volume: event only, deprecated",
			s: VolumeState{Volume: boundPV(released, testobj.Reclaim(corev1.PersistentVolumeReclaimRecycle))}, want: VolumeAction{Phase: corev1.VolumeFailed}, wantReason: ReasonVolumeFailedRecycle},
		{name: "failed volume is not retried", s: VolumeState{Volume: boundPV(testobj.Phase(corev1.VolumeFailed))}, want: VolumeAction{}},
		{name: "claim bound here: volume Bound", s: VolumeState{Volume: boundPV(), Claim: boundClaim}, want: VolumeAction{Phase: corev1.VolumeBound}},
		{name: "claim mid-binding: enqueue it", s: VolumeState{Volume: boundPV(), Claim: claim}, want: VolumeAction{EnqueueClaim: true}},
		{name: "claim mid-binding with another mode: mismatch events",
			s:    VolumeState{Volume: boundPV(testobj.VolumeMode(corev1.PersistentVolumeBlock)), Claim: claim},
			want: VolumeAction{}, wantReason: ReasonVolumeMismatch},
		{name: "claim went elsewhere: unbind", s: VolumeState{Volume: boundPV(byController), Claim: elsewhere}, want: VolumeAction{Unbind: true}},
		{name: "provisioned Delete volume whose claim went elsewhere is released",
			s: VolumeState{Volume: boundPV(provisioned, testobj.Reclaim(corev1.PersistentVolumeReclaimDelete)), Claim: elsewhere}, want: VolumeAction{Phase: corev1.VolumeReleased}},

		// The kubernetes.io/pv-controller finalizer, as upstream's modifyDeletionFinalizers.
		{name: "in-tree provisioned Delete volume gets the pv-controller finalizer",
			s:    VolumeState{Volume: testobj.PV("pv-1", inTree, deleteReclaim)},
			want: VolumeAction{Phase: corev1.VolumeAvailable, SetFinalizers: true, Finalizers: []string{storage.FinalizerPVController}}},
		{name: "bound in-tree Delete volume gets it beside the protection finalizer",
			s:    VolumeState{Volume: boundPV(inTree, deleteReclaim, testobj.PVMeta(testobj.Finalizers("kubernetes.io/pv-protection"))), Claim: boundClaim},
			want: VolumeAction{Phase: corev1.VolumeBound, SetFinalizers: true, Finalizers: []string{"kubernetes.io/pv-protection", storage.FinalizerPVController}}},
		{name: "in-tree Delete volume that has it: nothing to write",
			s:    VolumeState{Volume: testobj.PV("pv-1", inTree, deleteReclaim, testobj.PVMeta(testobj.Finalizers(storage.FinalizerPVController)))},
			want: VolumeAction{Phase: corev1.VolumeAvailable}},
		{name: "in-tree Delete volume being deleted: no new finalizer (the apiserver refuses one)",
			s:    VolumeState{Volume: testobj.PV("pv-1", inTree, deleteReclaim, testobj.PVMeta(testobj.Deleting(), testobj.Finalizers("kubernetes.io/pv-protection")))},
			want: VolumeAction{Phase: corev1.VolumeAvailable}},
		{name: "in-tree volume turned Retain loses it",
			s:    VolumeState{Volume: testobj.PV("pv-1", inTree, testobj.PVMeta(testobj.Finalizers("kubernetes.io/pv-protection", storage.FinalizerPVController)))},
			want: VolumeAction{Phase: corev1.VolumeAvailable, SetFinalizers: true, Finalizers: []string{"kubernetes.io/pv-protection"}}},
		{name: "in-tree volume turned Recycle loses it",
			s:    VolumeState{Volume: testobj.PV("pv-1", inTree, testobj.Reclaim(corev1.PersistentVolumeReclaimRecycle), testobj.PVMeta(testobj.Finalizers(storage.FinalizerPVController)))},
			want: VolumeAction{Phase: corev1.VolumeAvailable, SetFinalizers: true, Finalizers: []string{}}},
		{name: "in-tree volume loses the external provisioner's finalizer (migration rolled back)",
			s:    VolumeState{Volume: testobj.PV("pv-1", inTree, deleteReclaim, testobj.PVMeta(testobj.Finalizers(storage.FinalizerExternalProvisioner)))},
			want: VolumeAction{Phase: corev1.VolumeAvailable, SetFinalizers: true, Finalizers: []string{storage.FinalizerPVController}}},
		{name: "volume of a plugin migrated to CSI loses the in-tree finalizer",
			s: VolumeState{Volume: testobj.PV("pv-1", deleteReclaim, testobj.PVMeta(testobj.Annotation(storage.AnnProvisionedBy, "kubernetes.io/gce-pd"),
				testobj.Finalizers(storage.FinalizerPVController, storage.FinalizerExternalProvisioner)))},
			want: VolumeAction{Phase: corev1.VolumeAvailable, SetFinalizers: true, Finalizers: []string{storage.FinalizerExternalProvisioner}}},
		{name: "CSI provisioned Delete volume: finalizers are its provisioner's business",
			s:    VolumeState{Volume: testobj.PV("pv-1", provisioned, deleteReclaim, testobj.PVMeta(testobj.Finalizers(storage.FinalizerPVController, storage.FinalizerExternalProvisioner)))},
			want: VolumeAction{Phase: corev1.VolumeAvailable}},
		{name: "static Delete volume gets no finalizer",
			s:    VolumeState{Volume: testobj.PV("pv-1", deleteReclaim)},
			want: VolumeAction{Phase: corev1.VolumeAvailable}},
		{name: "released in-tree Delete volume fails: pvguard has no in-tree deleter, the finalizer stays",
			s:    VolumeState{Volume: boundPV(released, inTree, deleteReclaim, testobj.PVMeta(testobj.Finalizers(storage.FinalizerPVController)))},
			want: VolumeAction{Phase: corev1.VolumeFailed}, wantReason: ReasonVolumeFailedDelete},
		{name: "released Delete volume of a migrated plugin is left to the CSI driver",
			s:    VolumeState{Volume: boundPV(released, deleteReclaim, testobj.PVMeta(testobj.Annotation(storage.AnnProvisionedBy, "kubernetes.io/aws-ebs")))},
			want: VolumeAction{}},
		{name: "claim to confirm first: the finalizer waits for the decision",
			s:    VolumeState{Volume: boundPV(inTree, deleteReclaim)},
			want: VolumeAction{NeedLiveClaim: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := DecideVolume(tc.s)
			reason := ""
			if a.Event != nil {
				reason = a.Event.Reason
			}
			if a.Phase != tc.want.Phase || a.Unbind != tc.want.Unbind || a.Reuse != tc.want.Reuse || a.NeedLiveClaim != tc.want.NeedLiveClaim ||
				a.EnqueueClaim != tc.want.EnqueueClaim || reason != tc.wantReason ||
				a.SetFinalizers != tc.want.SetFinalizers || !slices.Equal(a.Finalizers, tc.want.Finalizers) {
				t.Fatalf("got %+v (reason %q), want %+v (reason %q)", a, reason, tc.want, tc.wantReason)
			}
		})
	}
}
