package binder

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/storage"
	"github.com/pvguard/pvguard/test/testobj"
)

// TestDeniedJudgesTheBindersOwnChoiceAfterItsVolumeWrite: with volume-grab set to deny, a
// binding the binder chose (the claim names no volume) is allowed, since the binder's first
// write pre-binds the volume to the claim before the claim names it; a claim that named a volume
// it was not granted is still refused. Found by test/e2echaos: the binder bound no unbound claim
// at all under that config.
func TestDeniedJudgesTheBindersOwnChoiceAfterItsVolumeWrite(t *testing.T) {
	cfg, err := policy.ParseConfig([]byte("rules:\n  volume-grab: {action: deny}\n"))
	if err != nil {
		t.Fatal(err)
	}
	engine := policy.NewEngine(cfg)
	free := testobj.PV("free", testobj.Phase(corev1.VolumeAvailable))
	granted := testobj.PV("granted", testobj.Phase(corev1.VolumeAvailable), testobj.PVMeta(testobj.Annotation(policy.DefaultGrantAnnotation, "ns")))
	for _, tc := range []struct {
		name   string
		volume *corev1.PersistentVolume
		claim  *corev1.PersistentVolumeClaim
		denied bool
	}{
		{name: "binder's choice for an unbound claim", volume: free, claim: testobj.PVC("ns", "c")},
		{name: "claim named a volume not granted to it", volume: free, claim: testobj.PVC("ns", "c", testobj.VolumeName("free")), denied: true},
		{name: "claim named a volume granted to its namespace", volume: granted, claim: testobj.PVC("ns", "c", testobj.VolumeName("granted"))},
		{name: "claim named a volume pre-bound to it", volume: testobj.PVWith(free, testobj.ClaimRef("ns", "c", "")), claim: testobj.PVC("ns", "c", testobj.VolumeName("free"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			view := testobj.NewView(tc.volume, tc.claim)
			c := fake.NewClientBuilder().Build()
			b, err := New(Options{
				Mode: ModeActive, Engine: func() *policy.Engine { return engine },
				Views:    func(context.Context) policy.View { return view },
				Recorder: record.NewFakeRecorder(10), Cache: c, Live: c, Writer: c,
			})
			if err != nil {
				t.Fatal(err)
			}
			got, err := b.denied(context.Background(), tc.volume, tc.claim)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.denied {
				t.Fatalf("denied = %v, want %v", got, tc.denied)
			}
		})
	}
}

// TestBindDenialsTakesAPopulatorsHandOff: after a populator pointed the volume it filled at the
// claim it filled it for, the binder completes the binding as upstream does: the volume's link
// was judged when the populator wrote it, and judging it again from nothing would find the
// populator's claim still bound to the volume (PVG002). A volume linked to a claim that did not
// get it that way is still judged.
func TestBindDenialsTakesAPopulatorsHandOff(t *testing.T) {
	const uid = "0f5c3f5e-6b0a-4c47-9d43-7c2f2b1e9a10"
	target := testobj.PVC("team-a", "db", testobj.ClaimUID(uid), testobj.DataSourceRef("example.io", "Hello", "hello"))
	prime := testobj.PVC("populators", "prime-"+uid, testobj.ClaimBoundTo("pv-1"))
	handed := testobj.PV("pv-1", testobj.BoundTo(target))
	engine := policy.NewEngine(nil)
	binderUser := policy.UserInfo{Username: "system:serviceaccount:pvguard-system:pvguard"}

	denials, err := BindDenials(engine, binderUser, testobj.NewView(target, prime, handed), handed, target)
	if err != nil || len(denials) != 0 {
		t.Errorf("binding the target to the volume handed to it: denials %v, err %v", denials, err)
	}
	// Control: a volume the populator's claim completed its binding to, not linked to the target.
	stillPrimes := testobj.PV("pv-1", testobj.BoundTo(prime))
	denials, err = BindDenials(engine, binderUser, testobj.NewView(target, prime, stillPrimes), stillPrimes, target)
	if err != nil || len(denials) == 0 {
		t.Errorf("binding the target to the populator's own bound volume: denials %v, err %v, want PVG002", denials, err)
	}
}

// TestBindDenialsLeavesItsObjectsAlone: the pair's reviews are made of shallow copies with the
// bind's fields replaced, so neither the volume nor the claim (a cached object, its annotation
// map shared with the reviews') is changed.
func TestBindDenialsLeavesItsObjectsAlone(t *testing.T) {
	engine := policy.NewEngine(nil)
	binderUser := policy.UserInfo{Username: "system:serviceaccount:pvguard-system:pvguard"}
	for _, tc := range []struct {
		name   string
		volume *corev1.PersistentVolume
		claim  *corev1.PersistentVolumeClaim
	}{
		{name: "free volume, claim without annotations", volume: testobj.PV("free", testobj.Phase(corev1.VolumeAvailable)), claim: testobj.PVC("ns", "c")},
		{name: "free volume, annotated claim", volume: testobj.PV("free", testobj.Phase(corev1.VolumeAvailable)),
			claim: testobj.PVC("ns", "c", testobj.ClaimMeta(testobj.Annotation("team", "a")))},
		{name: "volume pre-bound, claim marked bound", volume: testobj.PVWith(testobj.PV("pre"), testobj.ClaimRef("ns", "c", "")),
			claim: testobj.PVC("ns", "c", testobj.ClaimMeta(testobj.Annotation(storage.AnnBindCompleted, "yes")))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, c := tc.volume.DeepCopy(), tc.claim.DeepCopy()
			if _, err := BindDenials(engine, binderUser, testobj.NewView(tc.volume, tc.claim), tc.volume, tc.claim); err != nil {
				t.Fatal(err)
			}
			if !equality.Semantic.DeepEqual(v, tc.volume) {
				t.Errorf("volume changed:\n%#v\nwas\n%#v", tc.volume, v)
			}
			if !equality.Semantic.DeepEqual(c, tc.claim) {
				t.Errorf("claim changed:\n%#v\nwas\n%#v", tc.claim, c)
			}
		})
	}
}

// TestBindJudgeJudgesEachVolumeAsAlone: one judge asked about volume after volume, on the copies
// it overwrites, finds what BindDenials finds of each volume alone, and what it found of the
// first volumes still reads the same after the later ones were judged.
func TestBindJudgeJudgesEachVolumeAsAlone(t *testing.T) {
	cfg, err := policy.ParseConfig([]byte("rules:\n  volume-grab: {action: deny}\n"))
	if err != nil {
		t.Fatal(err)
	}
	binderUser := policy.UserInfo{Username: "system:serviceaccount:pvguard-system:pvguard"}
	claim := testobj.PVC("ns", "c", testobj.ClaimUID("uid-c"), testobj.VolumeName("named"), testobj.ClaimMeta(testobj.Annotation("team", "a")))
	other := testobj.PVC("ns", "other", testobj.ClaimUID("uid-o"))
	volumes := []*corev1.PersistentVolume{
		testobj.PV("named", testobj.Phase(corev1.VolumeAvailable)),
		testobj.PV("free", testobj.Phase(corev1.VolumeAvailable)),
		testobj.PV("granted", testobj.Phase(corev1.VolumeAvailable), testobj.PVMeta(testobj.Annotation(policy.DefaultGrantAnnotation, "ns"))),
		testobj.PV("linked", testobj.BoundTo(claim)),
		testobj.PV("elsewhere", testobj.BoundTo(other)),
		testobj.PVWith(testobj.PV("pre"), testobj.ClaimRef("ns", "c", "")),
	}
	for _, engine := range []*policy.Engine{policy.NewEngine(nil), policy.NewEngine(cfg)} {
		view := testobj.NewView(append([]runtime.Object{claim, other}, asObjects(volumes)...)...)
		j := NewBindJudge(engine, binderUser, view, claim)
		var got [][]policy.Finding
		for _, v := range volumes {
			d, err := j.Denials(v)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, d)
		}
		denied := 0
		for i, v := range volumes {
			want, err := BindDenials(engine, binderUser, view, v, claim)
			if err != nil {
				t.Fatal(err)
			}
			if g, w := rendered(got[i]), rendered(want); !slices.Equal(g, w) {
				t.Errorf("volume %s: the judge found %q, alone %q", v.Name, g, w)
			}
			denied += len(want)
		}
		if denied == 0 {
			t.Errorf("no volume denied: the test compares nothing")
		}
	}
}

func rendered(fs []policy.Finding) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.String()
	}
	return out
}

func asObjects(vs []*corev1.PersistentVolume) []runtime.Object {
	out := make([]runtime.Object, len(vs))
	for i, v := range vs {
		out[i] = v
	}
	return out
}
