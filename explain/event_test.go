package explain_test

import (
	"math/rand"
	"strings"
	"testing"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/pvguard/pvguard/binder"
	"github.com/pvguard/pvguard/explain"
	"github.com/pvguard/pvguard/policy"
	. "github.com/pvguard/pvguard/test/testobj"
)

// noVolumeFits asks explain.NoVolumeFits about the claim ns/c over in, with the plan the binder
// would make of it, as the binder does after each plan.
func noVolumeFits(t *testing.T, in explain.Input) (string, bool) {
	t.Helper()
	pin := binder.PlanInput{State: in.State, PendingFree: in.PendingFree, InFlight: in.InFlight}
	for _, c := range in.State.Claims() {
		if c.Namespace == "ns" && c.Name == "c" {
			return explain.NoVolumeFits(pin, binder.Plan(pin))(c)
		}
	}
	t.Fatal("no claim ns/c in the input")
	return "", false
}

// TestNoVolumeFits: which claims get the binder's NoVolumeFits event, and what it says.
func TestNoVolumeFits(t *testing.T) {
	local := StorageClass("local", "kubernetes.io/no-provisioner")
	lateLocal := StorageClass("late-local", "kubernetes.io/no-provisioner", wffc)
	fast := StorageClass("fast", "csi.example.com")
	block := ClaimVolumeMode(corev1.PersistentVolumeBlock)
	cases := map[string]struct {
		claim   *corev1.PersistentVolumeClaim
		others  []*corev1.PersistentVolumeClaim
		volumes []*corev1.PersistentVolume
		// want is a part of the message; "" means no event.
		want string
	}{
		"no-provisioner class, the only volume is Filesystem": {
			claim:   PVC("ns", "c", ClaimClass("local"), block),
			volumes: []*corev1.PersistentVolume{available("pv-1", Class("local"))},
			want:    "no volume fits: closest volume a volume you cannot read: volumeMode Filesystem != Block; it fits if the claim asks for volumeMode Filesystem",
		},
		"no-provisioner class, two checks fail": {
			claim:   PVC("ns", "c", ClaimClass("local"), block, Request("100Gi")),
			volumes: []*corev1.PersistentVolume{available("pv-7", Class("local"), Capacity("50Gi"))},
			want:    "closest volume a volume you cannot read: volumeMode Filesystem != Block, capacity 50Gi < 100Gi",
		},
		"the closest volume is granted to the namespace: named": {
			claim:   PVC("ns", "c", ClaimClass("local"), block, Request("100Gi")),
			volumes: []*corev1.PersistentVolume{available("pv-7", Class("local"), Capacity("50Gi"), PVMeta(Annotation(policy.DefaultGrantAnnotation, "ns,other")))},
			want:    "closest volume pv-7: volumeMode Filesystem != Block, capacity 50Gi < 100Gi",
		},
		"the closest volume is bound to a claim in another namespace: neither named": {
			claim:   PVC("ns", "c", ClaimClass("local")),
			volumes: []*corev1.PersistentVolume{PV("pv-b", Class("local"), ClaimRef("team-b", "x", "uid-x"), Phase(corev1.VolumeBound))},
			want:    "closest volume a volume you cannot read: phase Bound, claimRef bound to a claim in another namespace; it fits if the volume is freed",
		},
		"closest first": {
			claim: PVC("ns", "c", ClaimClass("local"), Request("100Gi")),
			volumes: []*corev1.PersistentVolume{
				available("pv-a", Class("local"), Capacity("50Gi"), AccessModes(corev1.ReadOnlyMany)),
				available("pv-b", Class("local"), Capacity("50Gi")),
			},
			want: "closest volume a volume you cannot read: capacity 50Gi < 100Gi",
		},
		"the only fitting volume is bound to another claim": {
			claim:   PVC("ns", "c", ClaimClass("local")),
			volumes: []*corev1.PersistentVolume{PV("pv-1", Class("local"), ClaimRef("ns", "other", "uid-other"), Phase(corev1.VolumeBound))},
			want:    "closest volume pv-1: phase Bound, claimRef bound to ns/other; it fits if the volume is freed",
		},
		"no class and no volume": {
			claim: PVC("ns", "c"),
			want:  "no volume fits, and there are no volumes to consider",
		},
		"a class that does not exist": {
			claim:   PVC("ns", "c", ClaimClass("gone")),
			volumes: []*corev1.PersistentVolume{available("pv-1", Class("local"))},
			want:    "closest volume a volume you cannot read: class local != gone",
		},
		"names a volume that does not fit": {
			claim:   PVC("ns", "c", block, VolumeName("pv-1")),
			volumes: []*corev1.PersistentVolume{available("pv-1")},
			want:    "volume pv-1, which spec.volumeName names, does not fit: volumeMode Filesystem != Block",
		},
		"names a volume that does not exist": {
			claim: PVC("ns", "c", VolumeName("pv-1")),
		},
		"a fitting volume: the binder takes it": {
			claim:   PVC("ns", "c", ClaimClass("local")),
			volumes: []*corev1.PersistentVolume{available("pv-1", Class("local"))},
		},
		"the only fitting volume is planned for another claim": {
			claim:   PVC("ns", "c", ClaimClass("local")),
			others:  []*corev1.PersistentVolumeClaim{PVC("ns", "a", ClaimClass("local"))},
			volumes: []*corev1.PersistentVolume{available("pv-1", Class("local"))},
		},
		"an external provisioner is to create one": {
			claim:   PVC("ns", "c", ClaimClass("fast"), block),
			volumes: []*corev1.PersistentVolume{available("pv-1", Class("fast"))},
		},
		"waiting for the first consumer": {
			claim:   PVC("ns", "c", ClaimClass("late-local"), block),
			volumes: []*corev1.PersistentVolume{available("pv-1", Class("late-local"))},
		},
		"bound": {
			claim:   PVC("ns", "c", ClaimClass("local"), ClaimBoundTo("pv-1"), ClaimPhase(corev1.ClaimBound)),
			volumes: []*corev1.PersistentVolume{PV("pv-1", Class("local"), ClaimRef("ns", "c", "uid-ns-c"), Phase(corev1.VolumeBound))},
		},
		"Lost": {
			claim: PVC("ns", "c", ClaimClass("local"), ClaimBoundTo("pv-1"), ClaimPhase(corev1.ClaimLost)),
		},
		"being deleted": {
			claim: PVC("ns", "c", ClaimClass("local"), block, ClaimMeta(Deleting())),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := explain.Input{State: objects{
				Claims:  append([]*corev1.PersistentVolumeClaim{tc.claim}, tc.others...),
				Volumes: tc.volumes,
				Classes: []*storagev1.StorageClass{local, lateLocal, fast},
			}.state()}
			msg, ok := noVolumeFits(t, in)
			switch {
			case tc.want == "" && ok:
				t.Fatalf("NoVolumeFits %q, want none", msg)
			case tc.want != "" && !ok:
				t.Fatalf("no NoVolumeFits, want one saying %q", tc.want)
			case !strings.Contains(msg, tc.want):
				t.Fatalf("NoVolumeFits %q, want it to say %q", msg, tc.want)
			}
		})
	}
}

// TestNoVolumeFitsNamesNoSecret: a CSI volume's attributes and secret references never reach the
// message, whatever check fails.
func TestNoVolumeFitsNamesNoSecret(t *testing.T) {
	secretive := func(pv *corev1.PersistentVolume) {
		CSI("csi.example.com", "handle-canary", map[string]string{"password": "attr-canary"})(pv)
		ref := &corev1.SecretReference{Namespace: "secret-ns-canary", Name: "secret-name-canary"}
		pv.Spec.CSI.NodePublishSecretRef, pv.Spec.CSI.NodeStageSecretRef, pv.Spec.CSI.ControllerPublishSecretRef = ref, ref, ref
	}
	for _, claim := range []*corev1.PersistentVolumeClaim{
		PVC("ns", "c", ClaimVolumeMode(corev1.PersistentVolumeBlock), Request("5Gi"), ClaimAccessModes(corev1.ReadWriteMany),
			Selector(map[string]string{"tier": "db"})),
		PVC("ns", "c", ClaimVolumeMode(corev1.PersistentVolumeBlock), VolumeName("pv-1")),
	} {
		msg, ok := noVolumeFits(t, explain.Input{State: objects{Claims: []*corev1.PersistentVolumeClaim{claim},
			Volumes: []*corev1.PersistentVolume{available("pv-1", secretive)}}.state()})
		if !ok {
			t.Fatal("no NoVolumeFits")
		}
		if strings.Contains(msg, "canary") {
			t.Errorf("NoVolumeFits %q names a volume attribute or secret reference", msg)
		}
	}
}

// TestNoVolumeFitsIsBounded: a selector too long for an event's note is cut, not refused.
func TestNoVolumeFitsIsBounded(t *testing.T) {
	msg, ok := noVolumeFits(t, explain.Input{State: objects{
		Claims:  []*corev1.PersistentVolumeClaim{PVC("ns", "c", Selector(map[string]string{"k": strings.Repeat("é", 600)}))},
		Volumes: []*corev1.PersistentVolume{available("pv-1")},
	}.state()})
	if !ok || len(msg) > 1024 || !strings.HasSuffix(msg, "...") || !utf8.ValidString(msg) {
		t.Fatalf("NoVolumeFits (ok %v) of %d bytes: %q; want at most 1024, cut with ...", ok, len(msg), msg)
	}
}

// TestNoVolumeFitsIsTheExplanation holds the event to `pvguard explain pvc` over generated
// pools: a claim gets one only if its explanation waits for nothing, no volume fits it, and the
// message names the verdict's closest volume.
func TestNoVolumeFitsIsTheExplanation(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	posted := 0
	for round := 0; round < 200; round++ {
		in := generate(rng)
		pin := binder.PlanInput{State: in.State, InFlight: in.InFlight}
		why := explain.NoVolumeFits(pin, binder.Plan(pin))
		for _, c := range in.State.Claims() {
			msg, ok := why(c)
			if !ok {
				continue
			}
			posted++
			e, err := explain.Claim(in, c.Namespace, c.Name)
			if err != nil {
				t.Fatal(err)
			}
			if e.WaitingFor != explain.WaitingForNothing || e.Verdict.Volume.String() != "" {
				t.Fatalf("round %d, claim %s: NoVolumeFits %q, but it waits for %s (verdict %+v)", round, e.Claim, msg, e.WaitingFor, e.Verdict)
			}
			for _, cand := range e.Candidates {
				if cand.Fits && c.Spec.VolumeName == "" {
					t.Fatalf("round %d, claim %s: NoVolumeFits %q, but %s fits", round, e.Claim, msg, cand.Volume)
				}
			}
			// The event is for the claim's namespace: it names the closest volume only when
			// that volume is the namespace's.
			closest := e.Verdict.Closest.For(policy.NamespaceReaders(c.Namespace, in.State, nil))
			if closest != "" && !strings.Contains(msg, "volume "+closest) {
				t.Fatalf("round %d, claim %s: NoVolumeFits %q does not name the closest volume as %q", round, e.Claim, msg, closest)
			}
		}
	}
	if posted == 0 {
		t.Fatal("no generated claim got NoVolumeFits: the pools test nothing")
	}
}
