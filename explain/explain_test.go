package explain_test

import (
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvguard/pvguard/binder"
	"github.com/pvguard/pvguard/clusterstate"
	"github.com/pvguard/pvguard/explain"
	"github.com/pvguard/pvguard/policy"
	. "github.com/pvguard/pvguard/test/testobj"
)

// objects are the objects of a test's cluster; state is their State, an explain.Input's.
type objects struct {
	Claims  []*corev1.PersistentVolumeClaim
	Volumes []*corev1.PersistentVolume
	Classes []*storagev1.StorageClass
	Nodes   []*corev1.Node
}

func (o objects) state() *clusterstate.State {
	return clusterstate.New(o.Claims, o.Volumes, o.Classes, o.Nodes)
}

func available(name string, mods ...PVMod) *corev1.PersistentVolume {
	return PV(name, append([]PVMod{Phase(corev1.VolumeAvailable)}, mods...)...)
}

func wffc(sc *storagev1.StorageClass) {
	m := storagev1.VolumeBindingWaitForFirstConsumer
	sc.VolumeBindingMode = &m
}

func TestClaimState(t *testing.T) {
	fast := StorageClass("fast", "csi.example.com")
	local := StorageClass("local", "kubernetes.io/no-provisioner", wffc)
	late := StorageClass("late", "csi.example.com", wffc)
	cases := map[string]struct {
		in          explain.Input
		waitingFor  string
		state       string // a part of State
		verdict     string // a part of Verdict.Text
		provisioner string
	}{
		"bound": {
			in: explain.Input{State: objects{
				Claims:  []*corev1.PersistentVolumeClaim{PVC("ns", "c", ClaimBoundTo("pv-1"))},
				Volumes: []*corev1.PersistentVolume{PV("pv-1", ClaimRef("ns", "c", "uid-ns-c"), Phase(corev1.VolumeBound))},
			}.state()},
			waitingFor: explain.WaitingForNothing, state: "bound to volume pv-1", verdict: "bound to pv-1",
		},
		"the binder takes a fitting volume": {
			in: explain.Input{State: objects{
				Claims:  []*corev1.PersistentVolumeClaim{PVC("ns", "c")},
				Volumes: []*corev1.PersistentVolume{available("pv-1")},
			}.state()},
			waitingFor: explain.WaitingForBinder, state: "bind it to volume pv-1", verdict: "the binder takes pv-1",
		},
		"no class and no volume": {
			in:         explain.Input{State: objects{Claims: []*corev1.PersistentVolumeClaim{PVC("ns", "c")}}.state()},
			waitingFor: explain.WaitingForNothing, state: "no storage class is set", verdict: "no volumes to consider",
		},
		"first consumer": {
			in: explain.Input{State: objects{
				Claims:  []*corev1.PersistentVolumeClaim{PVC("ns", "c", ClaimClass("local"))},
				Volumes: []*corev1.PersistentVolume{available("pv-1", Class("local"))},
				Classes: []*storagev1.StorageClass{local},
			}.state()},
			waitingFor: explain.WaitingForConsumer, state: "first consumer", verdict: "the scheduler may bind pv-1",
		},
		"selected node, provisioner": {
			in: explain.Input{State: objects{
				Claims:  []*corev1.PersistentVolumeClaim{PVC("ns", "c", ClaimClass("late"), ClaimMeta(Annotation("volume.kubernetes.io/selected-node", "n1")))},
				Classes: []*storagev1.StorageClass{late},
			}.state()},
			waitingFor: explain.WaitingForProvisioner, provisioner: "csi.example.com", state: "csi.example.com to create a volume on node n1",
		},
		"immediate, provisioner": {
			in: explain.Input{State: objects{
				Claims:  []*corev1.PersistentVolumeClaim{PVC("ns", "c", ClaimClass("fast"), Request("100Gi"))},
				Volumes: []*corev1.PersistentVolume{available("pv-7", Class("fast"), Capacity("50Gi"))},
				Classes: []*storagev1.StorageClass{fast},
			}.state()},
			waitingFor: explain.WaitingForProvisioner, provisioner: "csi.example.com",
			state: "external provisioner csi.example.com", verdict: "pv-7 fits if the claim asks for at most 50Gi",
		},
		"missing class": {
			in:         explain.Input{State: objects{Claims: []*corev1.PersistentVolumeClaim{PVC("ns", "c", ClaimClass("gone"))}}.state()},
			waitingFor: explain.WaitingForNothing, state: `"gone" not found`,
		},
		"named volume missing": {
			in:         explain.Input{State: objects{Claims: []*corev1.PersistentVolumeClaim{PVC("ns", "c", VolumeName("pv-9"))}}.state()},
			waitingFor: explain.WaitingForVolume, state: "pv-9",
		},
		"named volume too small": {
			in: explain.Input{State: objects{
				Claims:  []*corev1.PersistentVolumeClaim{PVC("ns", "c", VolumeName("pv-1"), Request("5Gi"))},
				Volumes: []*corev1.PersistentVolume{available("pv-0", Capacity("10Gi")), available("pv-1", Capacity("2Gi"))},
			}.state()},
			waitingFor: explain.WaitingForNothing, state: "VolumeMismatch", verdict: "names volume pv-1, which fits if the claim asks for at most 2Gi",
		},
		"every fitting volume taken": {
			in: explain.Input{State: objects{
				Claims:  []*corev1.PersistentVolumeClaim{PVC("ns", "a", Request("2Gi")), PVC("ns", "c", Request("2Gi"))},
				Volumes: []*corev1.PersistentVolume{available("pv-1", Capacity("2Gi"))},
			}.state()},
			waitingFor: explain.WaitingForNothing, verdict: "pv-1 to ns/a",
		},
		"pre-bound to another claim": {
			in: explain.Input{State: objects{
				Claims:  []*corev1.PersistentVolumeClaim{PVC("ns", "c")},
				Volumes: []*corev1.PersistentVolume{available("pv-1", ClaimRef("ns", "other", ""))},
			}.state()},
			waitingFor: explain.WaitingForNothing, verdict: "pv-1 fits if the volume is freed (it is pre-bound to ns/other)",
		},
		// A local volume whose node was deleted: every node listed (a live read), node-1 not among them.
		"named volume whose only node is gone": {
			in: explain.Input{NodesListed: true, State: objects{
				Claims:  []*corev1.PersistentVolumeClaim{PVC("ns", "c", ClaimClass("local"), VolumeName("pv-1"))},
				Volumes: []*corev1.PersistentVolume{available("pv-1", Class("local"), NodeAffinity(corev1.LabelHostname, "node-1"))},
				Classes: []*storagev1.StorageClass{local},
				Nodes:   []*corev1.Node{Node("node-2", nil)},
			}.state()},
			waitingFor: explain.WaitingForNode,
			state:      "stuck: it names volume pv-1 (spec.volumeName), which can be used only on node node-1, which no longer exists: no pod that uses the claim can be scheduled; to free it, delete the volume",
			verdict:    "pv-1 can be used only on nodes that no longer exist",
		},
		"the binder's volume whose only node is gone": {
			in: explain.Input{NodesListed: true, State: objects{
				Claims:  []*corev1.PersistentVolumeClaim{PVC("ns", "c")},
				Volumes: []*corev1.PersistentVolume{available("pv-1", NodeAffinity(corev1.LabelHostname, "node-1"))},
				Nodes:   []*corev1.Node{Node("node-2", nil)},
			}.state()},
			waitingFor: explain.WaitingForNode,
			state:      "the volume the binder's plan gives it, pv-1, which can be used only on node node-1, which no longer exists",
			verdict:    "pv-1 can be used only on nodes that no longer exist",
		},
		"bound to a volume whose only node is gone": {
			in: explain.Input{NodesListed: true, State: objects{
				Claims:  []*corev1.PersistentVolumeClaim{PVC("ns", "c", ClaimBoundTo("pv-1"), ClaimPhase(corev1.ClaimBound))},
				Volumes: []*corev1.PersistentVolume{PV("pv-1", ClaimRef("ns", "c", "uid-ns-c"), Phase(corev1.VolumeBound), NodeAffinity(corev1.LabelHostname, "node-1", "node-3"))},
				Nodes:   []*corev1.Node{Node("node-2", nil)},
			}.state()},
			waitingFor: explain.WaitingForNode,
			state:      "stuck: bound to volume pv-1, which can be used only on nodes node-1, node-3, which no longer exist: no pod that uses the claim can be scheduled; to free it, delete the claim (a StatefulSet re-creates it, and it gets a new volume), then the volume once it is Released",
			verdict:    "pv-1 can be used only on nodes that no longer exist",
		},
		"bound to a volume whose node exists": {
			in: explain.Input{NodesListed: true, State: objects{
				Claims:  []*corev1.PersistentVolumeClaim{PVC("ns", "c", ClaimBoundTo("pv-1"), ClaimPhase(corev1.ClaimBound))},
				Volumes: []*corev1.PersistentVolume{PV("pv-1", ClaimRef("ns", "c", "uid-ns-c"), Phase(corev1.VolumeBound), NodeAffinity(corev1.LabelHostname, "node-1"))},
				Nodes:   []*corev1.Node{Node("node-1", nil)},
			}.state()},
			waitingFor: explain.WaitingForNothing, state: "bound to volume pv-1", verdict: "bound to pv-1",
		},
		// A dump of volumes and claims, or a node cache that lists nothing: no node is known gone.
		"nodes not listed": {
			in: explain.Input{State: objects{
				Claims:  []*corev1.PersistentVolumeClaim{PVC("ns", "c")},
				Volumes: []*corev1.PersistentVolume{available("pv-1", NodeAffinity(corev1.LabelHostname, "node-1"))},
				Nodes:   []*corev1.Node{Node("node-2", nil)},
			}.state()},
			waitingFor: explain.WaitingForBinder, state: "bind it to volume pv-1", verdict: "the binder takes pv-1",
		},
		"no node listed": {
			in: explain.Input{NodesListed: true, State: objects{
				Claims:  []*corev1.PersistentVolumeClaim{PVC("ns", "c")},
				Volumes: []*corev1.PersistentVolume{available("pv-1", NodeAffinity(corev1.LabelHostname, "node-1"))},
			}.state()},
			waitingFor: explain.WaitingForBinder, state: "bind it to volume pv-1", verdict: "the binder takes pv-1",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e, err := explain.Claim(tc.in, "ns", "c")
			if err != nil {
				t.Fatal(err)
			}
			if e.WaitingFor != tc.waitingFor || e.Provisioner != tc.provisioner {
				t.Errorf("waiting for %q (%q), want %q (%q); state %q", e.WaitingFor, e.Provisioner, tc.waitingFor, tc.provisioner, e.State.String())
			}
			if !strings.Contains(e.State.String(), tc.state) {
				t.Errorf("state %q, want it to say %q", e.State.String(), tc.state)
			}
			if !strings.Contains(e.Verdict.Text.String(), tc.verdict) {
				t.Errorf("verdict %q, want it to say %q", e.Verdict.Text.String(), tc.verdict)
			}
		})
	}
}

func TestClaimWaitingForTheProvisionerSince(t *testing.T) {
	since := time.Date(2026, 11, 24, 5, 0, 0, 0, time.UTC)
	in := explain.Input{
		State: objects{
			Claims:  []*corev1.PersistentVolumeClaim{PVC("ns", "c", ClaimClass("fast"))},
			Classes: []*storagev1.StorageClass{StorageClass("fast", "csi.example.com")},
		}.state(),
		Events: []*corev1.Event{{Reason: "ExternalProvisioning", FirstTimestamp: metav1.Time{Time: since},
			LastTimestamp:  metav1.Time{Time: since.Add(time.Hour)},
			InvolvedObject: corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: "ns", Name: "c", UID: "uid-ns-c"}}},
	}
	e, err := explain.Claim(in, "ns", "c")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(e.State.String(), "(asked since 2026-11-24T05:00:00Z)") {
		t.Fatalf("state %q", e.State.String())
	}
}

func TestUnknownClaim(t *testing.T) {
	_, err := explain.Claim(explain.Input{}, "ns", "missing")
	if !errors.Is(err, explain.ErrUnknownClaim) || !strings.Contains(err.Error(), "ns/missing") {
		t.Fatalf("error %v, want ErrUnknownClaim naming ns/missing", err)
	}
}

// TestEachCheckFailsAlone breaks each check in turn on a fitting pair and expects exactly that
// column to fail, with the failing value.
func TestEachCheckFailsAlone(t *testing.T) {
	now := time.Now()
	node := Annotation("volume.kubernetes.io/selected-node", "n1")
	cases := map[explain.Check]struct {
		pv    []PVMod
		pvc   []PVCMod
		nodes []*corev1.Node
		in    func(*explain.Input)
		value string
	}{
		explain.CheckClass:           {pv: []PVMod{Class("slow")}, value: `slow != ""`},
		explain.CheckAttributesClass: {pv: []PVMod{VolumeAttributesClass("gold")}, value: `gold != ""`},
		explain.CheckAccessModes:     {pvc: []PVCMod{ClaimAccessModes(corev1.ReadWriteMany)}, value: "ReadWriteOnce lacks ReadWriteMany"},
		explain.CheckVolumeMode:      {pvc: []PVCMod{ClaimVolumeMode(corev1.PersistentVolumeBlock)}, value: "Filesystem != Block"},
		explain.CheckCapacity:        {pvc: []PVCMod{Request("5Gi")}, value: "1Gi < 5Gi"},
		explain.CheckSelector:        {pvc: []PVCMod{Selector(map[string]string{"tier": "db"})}, value: "labels do not match tier=db"},
		explain.CheckNodeAffinity: {pv: []PVMod{NodeAffinity("kubernetes.io/hostname", "n2")}, pvc: []PVCMod{ClaimMeta(node)},
			nodes: []*corev1.Node{Node("n1", nil)}, value: "does not reach node n1"},
		explain.CheckPhase:    {pv: []PVMod{Phase(corev1.VolumeReleased)}, value: "Released"},
		explain.CheckClaimRef: {pv: []PVMod{ClaimRef("ns", "other", "uid-other")}, value: "bound to ns/other"},
		explain.CheckReserved: {in: func(in *explain.Input) { in.InFlight.Reserved = map[string]types.UID{"pv-1": "uid-x"} }, value: "bind to a claim that is gone in flight"},
		explain.CheckPolicy: {in: func(in *explain.Input) {
			in.InFlight.At = now
			in.InFlight.Denied = map[types.UID]map[string]time.Time{"uid-ns-c": {"pv-1": now.Add(-time.Second)}}
		}, value: "denied at"},
	}
	if len(cases) != len(explain.Checks) {
		t.Fatalf("%d cases for %d checks", len(cases), len(explain.Checks))
	}
	run := func(t *testing.T, check explain.Check, pv []PVMod, pvc []PVCMod, nodes []*corev1.Node, mod func(*explain.Input), value string) {
		in := explain.Input{State: objects{
			Claims:  []*corev1.PersistentVolumeClaim{PVC("ns", "c", pvc...)},
			Volumes: []*corev1.PersistentVolume{available("pv-1", pv...)},
			Nodes:   nodes,
		}.state()}
		if mod != nil {
			mod(&in)
		}
		e, err := explain.Claim(in, "ns", "c")
		if err != nil {
			t.Fatal(err)
		}
		failed := e.Candidates[0].Failed()
		if len(failed) != 1 || failed[0].Check != check || !strings.Contains(failed[0].Value.String(), value) {
			t.Fatalf("failed %+v, want only %s with %q", failed, check, value)
		}
		if e.Verdict.Volume.String() != "" || e.Verdict.Closest.String() != "pv-1" || len(e.Verdict.Changes) != 1 {
			t.Errorf("verdict %+v, want pv-1 closest with one change", e.Verdict)
		}
	}
	for _, check := range explain.Checks {
		tc := cases[check]
		t.Run(string(check), func(t *testing.T) { run(t, check, tc.pv, tc.pvc, tc.nodes, tc.in, tc.value) })
	}
	// The policy column judges the pair with the engine, as the binder would before binding it
	// (binder.BindDenials): here binder-annotations set to deny refuses the binder's
	// bind-completed write, since its identity is not listed as a controller.
	t.Run("policy (a rule denies the pair)", func(t *testing.T) {
		cfg, err := policy.ParseConfig([]byte("rules:\n  binder-annotations: {action: deny}\n"))
		if err != nil {
			t.Fatal(err)
		}
		run(t, explain.CheckPolicy, nil, nil, nil, func(in *explain.Input) {
			in.Policy = policy.NewEngine(cfg)
			in.Identity = policy.UserInfo{Username: "system:serviceaccount:pvguard-system:pvguard"}
		}, "PVG013: system:serviceaccount:pvguard-system:pvguard added annotation pv.kubernetes.io/bind")
	})
	t.Run("none broken", func(t *testing.T) {
		e, err := explain.Claim(explain.Input{State: objects{Claims: []*corev1.PersistentVolumeClaim{PVC("ns", "c")},
			Volumes: []*corev1.PersistentVolume{available("pv-1")}}.state()}, "ns", "c")
		if err != nil {
			t.Fatal(err)
		}
		if !e.Candidates[0].Fits || e.Verdict.Volume.String() != "pv-1" {
			t.Fatalf("candidate %+v, verdict %+v; want pv-1 to fit and be taken", e.Candidates[0], e.Verdict)
		}
	})
}

// TestVerdictIsThePlan holds explanations to binder.Plan over generated pools: a claim the plan
// gives a volume is told that volume, and its row passes every check; a claim the plan leaves
// without one has no fitting volume that the plan does not give to another claim.
func TestVerdictIsThePlan(t *testing.T) {
	rng := rand.New(rand.NewSource(18))
	for round := 0; round < 200; round++ {
		in := generate(rng)
		plan := binder.Plan(binder.PlanInput{State: in.State, InFlight: in.InFlight})
		for _, c := range plan.Claims {
			e, err := explain.Claim(in, c.Namespace, c.Name)
			if err != nil {
				t.Fatal(err)
			}
			want := plan.Volumes[c.UID]
			if e.Verdict.Volume.String() != want {
				t.Fatalf("round %d, claim %s: verdict %+v, plan %q", round, e.Claim, e.Verdict, want)
			}
			for _, cand := range e.Candidates {
				switch {
				case cand.Volume == want && !cand.Fits:
					t.Fatalf("round %d, claim %s: planned %s fails %+v", round, e.Claim, want, cand.Failed())
				case want == "" && cand.Fits && cand.TakenBy.String() == "":
					t.Fatalf("round %d, claim %s: %s fits, is free, and the plan gives the claim nothing", round, e.Claim, cand.Volume)
				}
			}
		}
	}
}

// generate makes a small pool in which every check fails now and then.
func generate(rng *rand.Rand) explain.Input {
	pick := func(n int) bool { return rng.Intn(n) == 0 }
	var in explain.Input
	var claims []*corev1.PersistentVolumeClaim
	var volumes []*corev1.PersistentVolume
	in.InFlight = binder.InFlight{Reserved: map[string]types.UID{}, Denied: map[types.UID]map[string]time.Time{}, At: time.Now()}
	sizes := []string{"1Gi", "2Gi", "5Gi"}
	for i := 0; i < 2+rng.Intn(6); i++ {
		var mods []PVCMod
		mods = append(mods, Request(sizes[rng.Intn(3)]))
		if pick(4) {
			mods = append(mods, ClaimAccessModes(corev1.ReadWriteMany))
		}
		if pick(5) {
			mods = append(mods, ClaimVolumeMode(corev1.PersistentVolumeBlock))
		}
		if pick(5) {
			mods = append(mods, Selector(map[string]string{"tier": "db"}))
		}
		if pick(6) {
			mods = append(mods, ClaimVolumeAttributesClass("gold"))
		}
		if pick(4) {
			mods = append(mods, ClaimMeta(Annotation("volume.kubernetes.io/selected-node", fmt.Sprintf("n%d", 1+rng.Intn(3)))))
		}
		claims = append(claims, PVC("ns", fmt.Sprintf("c%d", i), mods...))
	}
	for i := 0; i < 2+rng.Intn(8); i++ {
		name := fmt.Sprintf("pv-%d", i)
		mods := []PVMod{Capacity(sizes[rng.Intn(3)])}
		if pick(3) {
			mods = append(mods, AccessModes(corev1.ReadWriteOnce, corev1.ReadWriteMany))
		}
		if pick(5) {
			mods = append(mods, VolumeMode(corev1.PersistentVolumeBlock))
		}
		if pick(3) {
			mods = append(mods, PVMeta(Label("tier", "db")))
		}
		if pick(6) {
			mods = append(mods, VolumeAttributesClass("gold"))
		}
		if pick(3) {
			mods = append(mods, NodeAffinity("kubernetes.io/hostname", fmt.Sprintf("n%d", 1+rng.Intn(2))))
		}
		if pick(6) {
			mods = append(mods, Class("other"))
		}
		switch rng.Intn(8) {
		case 0:
			mods = append(mods, Phase(corev1.VolumeReleased), ClaimRef("ns", "gone", "uid-gone"))
		case 1:
			mods = append(mods, ClaimRef("ns", fmt.Sprintf("c%d", rng.Intn(4)), ""))
		case 2:
			mods = append(mods, PVMeta(func(m *metav1.ObjectMeta) { m.DeletionTimestamp = &metav1.Time{Time: time.Now()} }))
		}
		if pick(8) {
			in.InFlight.Reserved[name] = types.UID(fmt.Sprintf("uid-ns-c%d", rng.Intn(4)))
		}
		if pick(8) {
			uid := types.UID(fmt.Sprintf("uid-ns-c%d", rng.Intn(4)))
			if in.InFlight.Denied[uid] == nil {
				in.InFlight.Denied[uid] = map[string]time.Time{}
			}
			in.InFlight.Denied[uid][name] = time.Now()
		}
		volumes = append(volumes, available(name, mods...))
	}
	in.State = objects{Claims: claims, Volumes: volumes, Nodes: []*corev1.Node{Node("n1", nil), Node("n2", nil)}}.state()
	return in
}

func TestClaimWaitingForTheScheduler(t *testing.T) {
	local := StorageClass("local", "kubernetes.io/no-provisioner", wffc)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-0", UID: "pod-uid"},
		Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}}}}}
	event := func(msg string, at time.Time) *corev1.Event {
		return &corev1.Event{Reason: "FailedScheduling", Message: msg, LastTimestamp: metav1.Time{Time: at},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "web-0", UID: "pod-uid"}}
	}
	now := time.Now()
	in := explain.Input{
		State: objects{
			Claims:  []*corev1.PersistentVolumeClaim{PVC("ns", "c", ClaimClass("local"))},
			Classes: []*storagev1.StorageClass{local},
		}.state(),
		Pods: []*corev1.Pod{pod},
		Events: []*corev1.Event{event("0/3 nodes are available: old.", now.Add(-time.Minute)),
			event("0/3 nodes are available: 3 node(s) didn't find available persistent volumes to bind.", now)},
	}
	e, err := explain.Claim(in, "ns", "c")
	if err != nil {
		t.Fatal(err)
	}
	if e.WaitingFor != explain.WaitingForScheduler || len(e.Pods) != 1 || e.Pods[0] != "ns/web-0" ||
		!strings.Contains(e.State.String(), "pod web-0") || !strings.Contains(e.State.String(), "didn't find available persistent volumes") {
		t.Fatalf("waiting for %q, pods %v, state %q", e.WaitingFor, e.Pods, e.State.String())
	}
	// On a node, and the claim has no selected node: the pod was placed without the scheduler,
	// which selects the claim's node before it binds the pod. Nothing will bind the claim.
	pod.Spec.NodeName = "n1"
	e, _ = explain.Claim(in, "ns", "c")
	if e.WaitingFor != explain.WaitingForNothing || !strings.Contains(e.State.String(), "pod web-0 uses the claim and is on node n1") ||
		!strings.Contains(e.State.String(), "placed without the scheduler") {
		t.Fatalf("a pod placed with spec.nodeName: waiting for %q, state %q", e.WaitingFor, e.State.String())
	}
}

// podOn is a pod of namespace ns that uses claim and is on node (scheduled, or placed with
// spec.nodeName; "" for neither).
func podOn(name, claim, node string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{NodeName: node, Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}}}
}

// TestNodeAffinityAgainstThePodsNode: without a selected node, each volume's node affinity is
// judged against the node of a pod that uses the claim, and the state says so; a
// WaitForFirstConsumer claim whose pod was placed with spec.nodeName (bypassing the scheduler,
// which would have selected a node for the claim first) is stuck, and the state says why.
func TestNodeAffinityAgainstThePodsNode(t *testing.T) {
	nodes := []*corev1.Node{Node("n1", map[string]string{"kubernetes.io/hostname": "n1"}), Node("n2", map[string]string{"kubernetes.io/hostname": "n2"})}
	volumes := []*corev1.PersistentVolume{
		available("pv-n1", NodeAffinity("kubernetes.io/hostname", "n1")),
		available("pv-n2", NodeAffinity("kubernetes.io/hostname", "n2")),
	}
	cell := func(e *explain.Explanation, volume string) explain.Result {
		for _, cand := range e.Candidates {
			if cand.Volume == volume {
				return cand.Checks[6]
			}
		}
		t.Fatalf("no row for %s", volume)
		return explain.Result{}
	}
	t.Run("immediate, pod on n1", func(t *testing.T) {
		in := explain.Input{
			State: objects{Claims: []*corev1.PersistentVolumeClaim{PVC("ns", "c")}, Volumes: volumes, Nodes: nodes}.state(),
			Pods:  []*corev1.Pod{podOn("web-0", "c", "n1"), podOn("other", "x", "n2")},
		}
		e, err := explain.Claim(in, "ns", "c")
		if err != nil {
			t.Fatal(err)
		}
		if r := cell(e, "pv-n1"); !r.Pass {
			t.Errorf("pv-n1 reaches n1: %+v", r)
		}
		if r := cell(e, "pv-n2"); r.Pass || r.Value.String() != "does not reach node n1, where pod web-0 is" {
			t.Errorf("pv-n2 against web-0's node: %+v", r)
		}
		if !strings.Contains(e.State.String(), "node affinity is judged against node n1 (pod web-0)") {
			t.Errorf("state %q does not say which node volumes are judged against", e.State.String())
		}
		// The binder plans without pods: if it takes pv-n2, the verdict says the pod cannot use it.
		if e.Verdict.Volume.String() == "pv-n2" && !strings.Contains(e.Verdict.Text.String(), "that pod cannot use it") {
			t.Errorf("verdict %q", e.Verdict.Text.String())
		}
	})
	t.Run("immediate, the binder takes a volume the pod's node lacks", func(t *testing.T) {
		in := explain.Input{
			State: objects{Claims: []*corev1.PersistentVolumeClaim{PVC("ns", "c")}, Volumes: volumes[1:], Nodes: nodes}.state(),
			Pods:  []*corev1.Pod{podOn("web-0", "c", "n1")},
		}
		e, err := explain.Claim(in, "ns", "c")
		if err != nil {
			t.Fatal(err)
		}
		if want := "the binder takes pv-n2, but it does not reach node n1, where pod web-0 is: that pod cannot use it"; e.Verdict.Text.String() != want {
			t.Errorf("verdict %q, want %q (the binder plans without pods)", e.Verdict.Text.String(), want)
		}
	})
	t.Run("the selected node wins over the pod's", func(t *testing.T) {
		in := explain.Input{
			State: objects{Claims: []*corev1.PersistentVolumeClaim{PVC("ns", "c", ClaimMeta(Annotation("volume.kubernetes.io/selected-node", "n2")))},
				Volumes: volumes, Nodes: nodes}.state(),
			Pods: []*corev1.Pod{podOn("web-0", "c", "n1")},
		}
		e, err := explain.Claim(in, "ns", "c")
		if err != nil {
			t.Fatal(err)
		}
		if r := cell(e, "pv-n1"); r.Value.String() != "does not reach node n2" {
			t.Errorf("pv-n1 against the selected node: %+v", r)
		}
	})
	t.Run("first consumer, pod placed with spec.nodeName", func(t *testing.T) {
		in := explain.Input{
			State: objects{Claims: []*corev1.PersistentVolumeClaim{PVC("ns", "c", ClaimClass("local"))},
				Classes: []*storagev1.StorageClass{StorageClass("local", "kubernetes.io/no-provisioner", wffc)},
				Volumes: []*corev1.PersistentVolume{available("pv-n1", Class("local"), NodeAffinity("kubernetes.io/hostname", "n1")),
					available("pv-n2", Class("local"), NodeAffinity("kubernetes.io/hostname", "n2"))},
				Nodes: nodes}.state(),
			Pods: []*corev1.Pod{podOn("web-0", "c", "n1")},
		}
		e, err := explain.Claim(in, "ns", "c")
		if err != nil {
			t.Fatal(err)
		}
		if e.WaitingFor != explain.WaitingForNothing || !strings.Contains(e.State.String(), "placed without the scheduler") {
			t.Errorf("waiting for %q, state %q", e.WaitingFor, e.State.String())
		}
		if r := cell(e, "pv-n2"); r.Pass {
			t.Errorf("pv-n2 does not reach web-0's node n1: %+v", r)
		}
		if want := "pv-n1 fit, but nothing binds the claim while pod web-0 that uses it bypasses the scheduler"; e.Verdict.Text.String() != want {
			t.Errorf("verdict %q, want %q", e.Verdict.Text.String(), want)
		}
	})
	t.Run("bound, the volume's node affinity no longer admits the pod's node", func(t *testing.T) {
		claims := []*corev1.PersistentVolumeClaim{PVC("ns", "c", ClaimBoundTo("pv-n2"))}
		bound := []*corev1.PersistentVolume{PV("pv-n2", ClaimRef("ns", "c", "uid-ns-c"), Phase(corev1.VolumeBound), NodeAffinity("kubernetes.io/hostname", "n2"))}
		for _, tc := range []struct {
			node, want string
		}{
			{"n1", "; but pod web-0 is on node n1, which the node affinity of volume pv-n2 does not admit: the volume cannot be mounted there, so the pod cannot run (delete the pod so that it is scheduled where the volume is, or, where the MutablePVNodeAffinity gate is on, widen the volume's node affinity to admit node n1)"},
			{"n2", ""},
			{"", ""},
		} {
			in := explain.Input{State: objects{Claims: claims, Volumes: bound, Nodes: nodes}.state(), Pods: []*corev1.Pod{podOn("web-0", "c", tc.node)}}
			e, err := explain.Claim(in, "ns", "c")
			if err != nil {
				t.Fatal(err)
			}
			got := e.State.String()
			if !strings.HasPrefix(got, "bound to volume pv-n2") || tc.want != "" && !strings.Contains(got, tc.want) || tc.want == "" && strings.Contains(got, "does not admit") {
				t.Errorf("pod on node %q: state %q, want it bound and saying %q", tc.node, got, tc.want)
			}
		}
	})
	t.Run("pod on a node that does not exist", func(t *testing.T) {
		in := explain.Input{
			State: objects{Claims: []*corev1.PersistentVolumeClaim{PVC("ns", "c")}, Volumes: volumes, Nodes: nodes}.state(),
			Pods:  []*corev1.Pod{podOn("web-0", "c", "gone")},
		}
		e, err := explain.Claim(in, "ns", "c")
		if err != nil {
			t.Fatal(err)
		}
		if r := cell(e, "pv-n1"); r.Value.String() != "node gone of pod web-0 not found" {
			t.Errorf("pv-n1: %+v", r)
		}
	})
}

// TestVerdictWhenTheNearVolumeIsPlannedForAnother: the only volume near the claim goes to
// another claim in the binder's plan; the verdict names it, says so, and suggests another volume
// like it (reported from the kubectl plugin's tests: it said "there are no volumes to consider"
// with the volume in the table).
func TestVerdictWhenTheNearVolumeIsPlannedForAnother(t *testing.T) {
	cases := map[string]struct {
		in      explain.Input
		text    string
		changes []string
	}{
		"too small for the claim, fits the other": {
			in: explain.Input{State: objects{
				Claims:  []*corev1.PersistentVolumeClaim{PVC("ns", "a", Request("2Gi")), PVC("ns", "c", Request("5Gi"))},
				Volumes: []*corev1.PersistentVolume{available("pv-1", Capacity("2Gi"))},
			}.state()},
			text:    "no volume fits: the closest, pv-1, goes to ns/a in the binder's plan; another volume like pv-1 fits if the claim asks for at most 2Gi",
			changes: []string{"another volume like pv-1", "the claim asks for at most 2Gi"},
		},
		"pre-bound to the other": {
			in: explain.Input{State: objects{
				Claims:  []*corev1.PersistentVolumeClaim{PVC("ns", "a"), PVC("ns", "c")},
				Volumes: []*corev1.PersistentVolume{available("pv-1", ClaimRef("ns", "a", ""))},
			}.state()},
			text:    "no volume fits: the closest, pv-1, goes to ns/a in the binder's plan; another volume like pv-1 would fit",
			changes: []string{"another volume like pv-1"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e, err := explain.Claim(tc.in, "ns", "c")
			if err != nil {
				t.Fatal(err)
			}
			if len(e.Candidates) != 1 || e.Candidates[0].TakenBy.String() != "ns/a" {
				t.Fatalf("candidates %+v, want pv-1 planned for ns/a", e.Candidates)
			}
			v := e.Verdict
			if v.Text.String() != tc.text || v.Closest.String() != "pv-1" || strings.Join(texts(v.Changes), "|") != strings.Join(tc.changes, "|") {
				t.Fatalf("verdict %+v, want %q with changes %q", v, tc.text, tc.changes)
			}
		})
	}
}

// TestClosestPrefersTheClaimsClassOnATie: a volume of another class that fails only the class
// check is as close as one of the claim's class that fails one other check; the one of the
// claim's class comes first (it is in the table the text shows), whatever the names.
func TestClosestPrefersTheClaimsClassOnATie(t *testing.T) {
	in := explain.Input{State: objects{
		Claims: []*corev1.PersistentVolumeClaim{PVC("ns", "c", ClaimClass("fast"), ClaimVolumeMode(corev1.PersistentVolumeBlock))},
		Volumes: []*corev1.PersistentVolume{
			available("a-other", Class("slow"), VolumeMode(corev1.PersistentVolumeBlock)),
			available("z-same", Class("fast")),
		},
	}.state()}
	e, err := explain.Claim(in, "ns", "c")
	if err != nil {
		t.Fatal(err)
	}
	if len(e.Candidates) != 2 || e.Candidates[0].Volume != "z-same" || e.Verdict.Closest.String() != "z-same" {
		t.Fatalf("candidates %+v, verdict %+v: want z-same (the claim's class) first and closest", e.Candidates, e.Verdict)
	}
}

// TestReleasedVolumeOfAnEarlierClaimSaysReleased: a claim deleted and created again under its name
// finds its old volume Released, still linked to the old uid. Both PHASE and CLAIMREF fail, and
// the verdict asks for one change: freeing the volume (the binder then makes it Available).
func TestReleasedVolumeOfAnEarlierClaimSaysReleased(t *testing.T) {
	in := explain.Input{State: objects{
		Claims:  []*corev1.PersistentVolumeClaim{PVC("ns", "c", ClaimUID("uid-new"))},
		Volumes: []*corev1.PersistentVolume{available("pv-1", ClaimRef("ns", "c", "uid-old"), Phase(corev1.VolumeReleased))},
	}.state()}
	e, err := explain.Claim(in, "ns", "c")
	if err != nil {
		t.Fatal(err)
	}
	failed := map[explain.Check]string{}
	for _, r := range e.Candidates[0].Failed() {
		failed[r.Check] = r.Value.String()
	}
	if len(failed) != 2 || failed[explain.CheckPhase] != "Released" || !strings.Contains(failed[explain.CheckClaimRef], "an earlier claim of that name") {
		t.Fatalf("failed checks %v, want PHASE Released and CLAIMREF naming the earlier claim", failed)
	}
	if v := e.Verdict; len(v.Changes) != 1 || !strings.HasPrefix(v.Changes[0].String(), "the volume is freed (it is Released, bound to ns/c") {
		t.Fatalf("verdict %+v, want one change: freeing the Released volume", v)
	}
}

// texts renders each for everyone.
func texts(ts []policy.Text) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.String()
	}
	return out
}

// TestVerdictNamesAFewVolumesAndCountsTheRest: a verdict names at most five of the volumes that
// fit and counts the rest, so its length does not grow with the pool.
func TestVerdictNamesAFewVolumesAndCountsTheRest(t *testing.T) {
	for _, tc := range []struct {
		fitting int
		named   int
		more    string
	}{
		{fitting: 1, named: 1},
		{fitting: 5, named: 5},
		{fitting: 6, named: 5, more: " or one of 1 more once"},
		{fitting: 40, named: 5, more: " or one of 35 more once"},
	} {
		var volumes []*corev1.PersistentVolume
		for i := range tc.fitting {
			volumes = append(volumes, available(fmt.Sprintf("pv-%02d", i), Class("local")))
		}
		in := explain.Input{State: objects{
			Claims:  []*corev1.PersistentVolumeClaim{PVC("ns", "c", ClaimClass("local"))},
			Classes: []*storagev1.StorageClass{StorageClass("local", "kubernetes.io/no-provisioner", wffc)},
			Volumes: volumes}.state()}
		e, err := explain.Claim(in, "ns", "c")
		if err != nil {
			t.Fatal(err)
		}
		text := e.Verdict.Text.String()
		if got := strings.Count(text, "pv-"); got != tc.named {
			t.Errorf("%d fitting: the verdict names %d volumes, want %d: %q", tc.fitting, got, tc.named, text)
		}
		if tc.more != "" && !strings.Contains(text, tc.more) || tc.more == "" && strings.Contains(text, "more") {
			t.Errorf("%d fitting: verdict %q, want the rest counted as %q", tc.fitting, text, tc.more)
		}
	}
}
