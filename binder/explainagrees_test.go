package binder_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/pvguard/pvguard/binder"
	"github.com/pvguard/pvguard/explain"
	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/storage"
	"github.com/pvguard/pvguard/test/testobj"
)

// clusterView is a policy view of the fake cluster's objects as they are now, as the webhook's
// view reads the informer cache.
func clusterView(t *testing.T, c client.Client) *testobj.View {
	t.Helper()
	ctx := context.Background()
	var pvs corev1.PersistentVolumeList
	var pvcs corev1.PersistentVolumeClaimList
	var scs storagev1.StorageClassList
	for _, l := range []client.ObjectList{&pvs, &pvcs, &scs} {
		if err := c.List(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	var all []runtime.Object
	for i := range pvs.Items {
		all = append(all, &pvs.Items[i])
	}
	for i := range pvcs.Items {
		all = append(all, &pvcs.Items[i])
	}
	for i := range scs.Items {
		all = append(all, &scs.Items[i])
	}
	return testobj.NewView(all...)
}

// bindersDecision names what the binder decides for a claim, in the words explainedDecision uses.
func bindersDecision(a binder.ClaimAction, claim *corev1.PersistentVolumeClaim) string {
	switch {
	case a.NeedPlan:
		return "plan"
	case a.Bind != nil:
		return "bind " + a.Bind.Name
	case a.SetClass != "":
		return "class " + a.SetClass
	case a.Phase == corev1.ClaimLost:
		return "lost: " + a.Event.Message
	case a.Event == nil:
		return "pending"
	case a.Event.Reason == binder.ReasonExternalProvisioning:
		p := a.Provisioner
		if p == "" {
			p = claim.Annotations[storage.AnnStorageProvisioner]
		}
		return "provisioner " + p
	case a.Event.Reason == binder.ReasonWaitForFirstConsumer:
		return "consumer"
	}
	return "event " + a.Event.Reason + ": " + a.Event.Message
}

// explainedDecision names what an explanation says the binder decides for the claim.
func explainedDecision(e *explain.Explanation) string {
	state, volume := e.State.String(), e.Verdict.Volume.String()
	switch {
	case volume != "" && (e.WaitingFor == explain.WaitingForBinder || strings.HasPrefix(state, "bound to ")):
		return "bind " + volume
	case e.WaitingFor == explain.WaitingForBinder:
		const giveClass = "the binder is to give it the default class "
		if strings.HasPrefix(state, giveClass) {
			return "class " + strings.TrimPrefix(state, giveClass)
		}
	case e.WaitingFor == explain.WaitingForProvisioner:
		return "provisioner " + e.Provisioner
	case e.WaitingFor == explain.WaitingForConsumer:
		return "consumer"
	case e.WaitingFor == explain.WaitingForVolume || state == "Pending":
		return "pending"
	case strings.HasPrefix(state, "Lost: "):
		return "lost: " + strings.TrimPrefix(state, "Lost: ")
	}
	return "event " + state
}

// TestExplanationsSayWhatTheBinderDecides: for each kind of claim situation, the binder (its
// cache, its ledger, its installed plan; the real claim sync's reading, decideClaim) and the
// explanation of the same objects, read with the binder's in-flight state as the server reads
// it, decide the same for the claim. Both build the claim's state with binder.ClaimStateOf; this
// holds together what each reads it from (the binder's cacheFacts, explain's planFacts).
func TestExplanationsSayWhatTheBinderDecides(t *testing.T) {
	mode := func(m storagev1.VolumeBindingMode) func(*storagev1.StorageClass) {
		return func(sc *storagev1.StorageClass) { sc.VolumeBindingMode = &m }
	}
	fast := testobj.StorageClass("fast", "csi.example.com", mode(storagev1.VolumeBindingImmediate))
	manual := testobj.StorageClass("manual", storage.NoProvisioner, mode(storagev1.VolumeBindingImmediate))
	local := testobj.StorageClass("local", storage.NoProvisioner, mode(storagev1.VolumeBindingWaitForFirstConsumer))
	def := testobj.StorageClass("standard", "csi.example.com", testobj.DefaultClass)
	free := func(name, class string, mods ...testobj.PVMod) *corev1.PersistentVolume {
		return testobj.PV(name, append([]testobj.PVMod{testobj.Class(class), testobj.Phase(corev1.VolumeAvailable)}, mods...)...)
	}
	bound := testobj.PVC("ns", "c", testobj.ClaimClass("fast"), testobj.ClaimBoundTo("pv-1"))

	for _, tc := range []struct {
		name string
		objs []client.Object
		// change, when set, is made after the binder's first plan: the plan goes stale.
		change func(ctx context.Context, c client.Client) error
		want   string
	}{
		{name: "a free volume fits", want: "bind pv-1",
			objs: []client.Object{fast, testobj.PVC("ns", "c", testobj.ClaimClass("fast")), free("pv-1", "fast")}},
		{name: "a free volume no binder has synced yet (Pending)", want: "bind pv-1",
			objs: []client.Object{fast, testobj.PVC("ns", "c", testobj.ClaimClass("fast")), testobj.PV("pv-1", testobj.Class("fast"))}},
		{name: "the plan's pick of two", want: "bind pv-small",
			objs: []client.Object{fast, testobj.PVC("ns", "c", testobj.ClaimClass("fast")),
				free("pv-big", "fast", testobj.Capacity("5Gi")), free("pv-small", "fast")}},
		{name: "another claim takes the one volume", want: "provisioner csi.example.com",
			objs: []client.Object{fast, testobj.PVC("ns", "c", testobj.ClaimClass("fast"), testobj.Request("1Gi")),
				testobj.PVC("ns", "a", testobj.ClaimClass("fast"), testobj.Request("1Gi")), free("pv-1", "fast")}},
		{name: "the planned volume was taken since", want: "provisioner csi.example.com",
			objs: []client.Object{fast, testobj.PVC("ns", "c", testobj.ClaimClass("fast")), free("pv-1", "fast")},
			change: func(ctx context.Context, c client.Client) error {
				pv := &corev1.PersistentVolume{}
				if err := c.Get(ctx, client.ObjectKey{Name: "pv-1"}, pv); err != nil {
					return err
				}
				testobj.ClaimRef("other", "claim", "uid-other")(pv)
				return c.Update(ctx, pv)
			}},
		{name: "no class, a default class", want: "class standard",
			objs: []client.Object{def, fast, testobj.PVC("ns", "c", testobj.ClaimNoClass), free("pv-1", "fast")}},
		{name: "no class, no default class", want: "event FailedBinding: no persistent volumes available for this claim and no storage class is set",
			objs: []client.Object{fast, testobj.PVC("ns", "c"), free("pv-1", "fast")}},
		{name: "the class does not exist", want: `event ProvisioningFailed: storageclass.storage.k8s.io "gone" not found`,
			objs: []client.Object{def, testobj.PVC("ns", "c", testobj.ClaimClass("gone")), free("pv-1", "fast")}},
		{name: "a class without provisioner, no volume fits", want: `event FailedBinding: no persistent volumes available for this claim and storage class "manual" cannot provision one`,
			objs: []client.Object{manual, testobj.PVC("ns", "c", testobj.ClaimClass("manual"), testobj.Request("5Gi")), free("pv-1", "manual")}},
		{name: "delay binding, no volume pre-bound", want: "consumer",
			objs: []client.Object{local, testobj.PVC("ns", "c", testobj.ClaimClass("local")), free("pv-local", "local")}},
		{name: "delay binding, a volume pre-bound to the claim", want: "bind pv-pre",
			objs: []client.Object{local, testobj.PVC("ns", "c", testobj.ClaimClass("local")), free("pv-local", "local"),
				free("pv-pre", "local", testobj.ClaimRef("ns", "c", ""))}},
		{name: "the claim names a free volume", want: "bind pv-1",
			objs: []client.Object{fast, testobj.PVC("ns", "c", testobj.ClaimClass("fast"), testobj.VolumeName("pv-1")), free("pv-1", "fast")}},
		{name: "the claim names a volume that does not exist", want: "pending",
			objs: []client.Object{fast, testobj.PVC("ns", "c", testobj.ClaimClass("fast"), testobj.VolumeName("pv-1")), free("pv-2", "fast")}},
		{name: "the claim names a volume bound elsewhere", want: `event FailedBinding: volume "pv-1" already bound to a different claim.`,
			objs: []client.Object{fast, testobj.PVC("ns", "c", testobj.ClaimClass("fast"), testobj.VolumeName("pv-1")),
				free("pv-1", "fast", testobj.ClaimRef("ns", "other", "uid-other"))}},
		{name: "a bound claim", want: "bind pv-1",
			objs: []client.Object{fast, bound, free("pv-1", "fast", testobj.BoundTo(bound))}},
		{name: "a bound claim whose volume is gone", want: "lost: Bound claim has lost its PersistentVolume. Data on the volume is lost!",
			objs: []client.Object{fast, bound, free("pv-2", "fast")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			c := fake.NewClientBuilder().WithObjects(tc.objs...).
				WithStatusSubresource(&corev1.PersistentVolume{}, &corev1.PersistentVolumeClaim{}).Build()
			b, err := binder.New(binder.Options{
				Mode: binder.ModeActive, Engine: func() *policy.Engine { return policy.NewEngine(nil) },
				Views:    func(context.Context) policy.View { return clusterView(t, c) },
				Recorder: record.NewFakeRecorder(100), Cache: c, Live: c, Writer: c,
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := b.PlanNow(ctx); err != nil {
				t.Fatal(err)
			}
			if tc.change != nil {
				if err := tc.change(ctx, c); err != nil {
					t.Fatal(err)
				}
			}
			claim := &corev1.PersistentVolumeClaim{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "c"}, claim); err != nil {
				t.Fatal(err)
			}
			a, err := b.DecideClaimNow(ctx, "ns", "c")
			if err != nil {
				t.Fatal(err)
			}
			stale := a.NeedPlan
			if stale {
				// As the binder's loop does: a claim whose plan went stale asks for the next.
				if err := b.PlanNow(ctx); err != nil {
					t.Fatal(err)
				}
				if a, err = b.DecideClaimNow(ctx, "ns", "c"); err != nil {
					t.Fatal(err)
				}
			}
			if stale != (tc.change != nil) {
				t.Errorf("the binder's first plan went stale: %v, want %v", stale, tc.change != nil)
			}
			in := explain.Input{State: clusterView(t, c).State}
			in.PendingFree, in.InFlight = b.PlanState(time.Now())
			e, err := explain.Claim(in, "ns", "c")
			if err != nil {
				t.Fatal(err)
			}
			got, explained := bindersDecision(a, claim), explainedDecision(e)
			if got != explained {
				t.Errorf("the binder decides %q, the explanation says %q (state %q)", got, explained, e.State.String())
			}
			if got != tc.want {
				t.Errorf("the binder decides %q, want %q", got, tc.want)
			}
		})
	}
}
