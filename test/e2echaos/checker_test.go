package e2echaos

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvguard/pvguard/test/testobj"
)

// The checker must be able to fail: each case below breaks one invariant in an otherwise sound
// state and expects exactly that invariant reported.

// pair builds both halves of a completed binding as the binder leaves them; byController says
// which halves the binder chose (bound-by-controller).
func pair(claim, uid, pv string, volumeByController, claimByController bool) (*corev1.PersistentVolume, *corev1.PersistentVolumeClaim) {
	c := testobj.PVC("ns", claim, testobj.ClaimUID(uid), testobj.ClaimClass("gold"), testobj.ClaimBoundTo(pv),
		testobj.ClaimMeta(testobj.Finalizers(finalizerPVC)))
	c.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
	c.Status.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	v := testobj.PV(pv, testobj.Class("gold"), testobj.BoundTo(c), testobj.PVMeta(testobj.Finalizers(finalizerPV)))
	if volumeByController {
		testobj.PVMeta(testobj.Annotation(annBoundByController, "yes"))(v)
	}
	if claimByController {
		testobj.ClaimMeta(testobj.Annotation(annBoundByController, "yes"))(c)
	}
	return v, c
}

type world0 struct {
	s  State
	in Intent
}

// sound is a state with nothing wrong: a pair the binder chose, one whose volume the creator
// pre-bound (of another class, which upstream tolerates), one whose claim named a volume granted
// to it, a claim no free volume fits, and a free volume.
func sound() world0 {
	a, ca := pair("a", "ua", "pv-a", true, true)
	p, cp := pair("p", "up", "pv-p", false, true)
	p.Spec.StorageClassName = "silver"
	n, cn := pair("n", "un", "pv-n", true, false)
	testobj.PVMeta(testobj.Annotation(grantAnnotation, "ns"))(n)
	u := testobj.PVC("ns", "u", testobj.ClaimUID("uu"), testobj.ClaimClass("gold"), testobj.Request("5Gi"),
		testobj.ClaimPhase(corev1.ClaimPending), testobj.ClaimMeta(testobj.Finalizers(finalizerPVC)))
	f := testobj.PV("pv-f", testobj.Class("gold"), testobj.Phase(corev1.VolumeAvailable), testobj.PVMeta(testobj.Finalizers(finalizerPV)))
	w := world0{
		s: State{
			PVs:   []corev1.PersistentVolume{*a, *p, *n, *f},
			PVCs:  []corev1.PersistentVolumeClaim{*ca, *cp, *cn, *u},
			Nodes: []corev1.Node{*testobj.Node("n1", nil), *testobj.Node("n2", nil)},
		},
		in: Intent{
			PreboundVolumes:      map[string]ClaimKey{"pv-p": {"ns", "p"}},
			NamedVolumes:         map[ClaimKey]string{{"ns", "n"}: "pv-n"},
			Volumes:              map[string]bool{"pv-a": true, "pv-p": true, "pv-n": true, "pv-f": true},
			Claims:               map[ClaimKey]bool{{"ns", "a"}: true, {"ns", "p"}: true, {"ns", "n"}: true, {"ns", "u"}: true},
			Finalizers:           map[string][]string{},
			ProtectionFinalizers: true,
			GrabDenied:           true,
			GrantAnnotation:      grantAnnotation,
		},
	}
	return w
}

func (w *world0) pv(name string) *corev1.PersistentVolume {
	for i := range w.s.PVs {
		if w.s.PVs[i].Name == name {
			return &w.s.PVs[i]
		}
	}
	panic("no volume " + name)
}

func (w *world0) pvc(name string) *corev1.PersistentVolumeClaim {
	for i := range w.s.PVCs {
		if w.s.PVCs[i].Name == name {
			return &w.s.PVCs[i]
		}
	}
	panic("no claim " + name)
}

func TestCheckerSoundStateHasNoViolation(t *testing.T) {
	w := sound()
	if v := Check(w.s, w.in); len(v) != 0 {
		t.Fatalf("violations in a sound state: %v", v)
	}
	if got := Bindable(w.s, w.in); got != 3 {
		t.Fatalf("Bindable = %d, want 3 (a, p and n; u fits nothing)", got)
	}
}

func TestCheckerDetectsEachViolation(t *testing.T) {
	for _, tc := range []struct {
		name   string
		break_ func(w *world0)
		want   string // invariant
		about  string // substring of the violation's object
	}{
		{name: "two claims completed a binding to one volume", want: InvDoubleClaim, about: "pv/pv-a", break_: func(w *world0) {
			b := testobj.PVC("ns", "b", testobj.ClaimUID("ub"), testobj.ClaimClass("gold"), testobj.ClaimBoundTo("pv-a"), testobj.ClaimMeta(testobj.Finalizers(finalizerPVC)))
			w.s.PVCs = append(w.s.PVCs, *b)
		}},
		{name: "one claim held by two volumes", want: InvDoubleClaim, about: "pvc/ns/a", break_: func(w *world0) {
			testobj.BoundTo(w.pvc("a"))(w.pv("pv-f"))
		}},
		{name: "volume mode mismatch bound", want: InvDeniedPair, about: "pvc/ns/a", break_: func(w *world0) {
			testobj.VolumeMode(corev1.PersistentVolumeBlock)(w.pv("pv-a"))
		}},
		{name: "volume too small bound", want: InvDeniedPair, about: "pvc/ns/a", break_: func(w *world0) {
			testobj.Request("2Gi")(w.pvc("a"))
		}},
		{name: "access mode missing", want: InvDeniedPair, about: "pvc/ns/a", break_: func(w *world0) {
			testobj.ClaimAccessModes(corev1.ReadWriteMany)(w.pvc("a"))
		}},
		{name: "class mismatch on a volume the binder chose", want: InvDeniedPair, about: "pvc/ns/a", break_: func(w *world0) {
			testobj.Class("silver")(w.pv("pv-a"))
		}},
		{name: "node affinity excludes the selected node", want: InvDeniedPair, about: "pvc/ns/a", break_: func(w *world0) {
			testobj.ClaimMeta(testobj.Annotation(annSelectedNode, "n1"))(w.pvc("a"))
			testobj.NodeAffinity("kubernetes.io/hostname", "n2")(w.pv("pv-a"))
		}},
		{name: "volume grab", want: InvDeniedPair, about: "pvc/ns/n", break_: func(w *world0) {
			delete(w.pv("pv-n").Annotations, grantAnnotation)
		}},
		{name: "volume pre-bound to another claim", want: InvDeniedPair, about: "pvc/ns/a", break_: func(w *world0) {
			w.in.PreboundVolumes["pv-a"] = ClaimKey{"other", "x"}
		}},
		{name: "denied half-binding (volume holds the claim only)", want: InvDeniedPair, about: "pvc/ns/u", break_: func(w *world0) {
			testobj.BoundTo(w.pvc("u"))(w.pv("pv-f")) // 1Gi for a 5Gi claim
		}},
		{name: "satisfiable claim left unbound", want: InvUnbound, about: "pvc/ns/u", break_: func(w *world0) {
			w.pv("pv-f").Spec.Capacity[corev1.ResourceStorage] = resource.MustParse("5Gi")
		}},
		{name: "volume Released under a live claim", want: InvReleased, about: "pv/pv-a", break_: func(w *world0) {
			w.pv("pv-a").Status.Phase = corev1.VolumeReleased
		}},
		{name: "claim Lost", want: InvLost, about: "pvc/ns/a", break_: func(w *world0) {
			w.pvc("a").Status.Phase = corev1.ClaimLost
		}},
		{name: "bound claim's volume gone", want: InvDeleted, about: "pv/pv-a", break_: func(w *world0) {
			w.s.PVs = slices.DeleteFunc(w.s.PVs, func(pv corev1.PersistentVolume) bool { return pv.Name == "pv-a" })
		}},
		{name: "protection finalizer missing", want: InvFinalizer, about: "pv/pv-a", break_: func(w *world0) {
			w.pv("pv-a").Finalizers = nil
		}},
		{name: "test's finalizer missing", want: InvFinalizer, about: "pvc/ns/u", break_: func(w *world0) {
			w.in.Finalizers["pvc/ns/u"] = []string{holdFinalizer}
		}},
		{name: "bound-by-controller missing on a volume the binder chose", want: InvInconsistent, about: "pv-a", break_: func(w *world0) {
			delete(w.pv("pv-a").Annotations, annBoundByController)
		}},
		{name: "bound-by-controller on a volume the creator pre-bound", want: InvInconsistent, about: "pv-p", break_: func(w *world0) {
			testobj.PVMeta(testobj.Annotation(annBoundByController, "yes"))(w.pv("pv-p"))
		}},
		{name: "bound-by-controller on a claim that named its volume", want: InvInconsistent, about: "pvc/ns/n", break_: func(w *world0) {
			testobj.ClaimMeta(testobj.Annotation(annBoundByController, "yes"))(w.pvc("n"))
		}},
		{name: "half bound", want: InvInconsistent, about: "pvc/ns/a", break_: func(w *world0) {
			c := w.pvc("a")
			c.Spec.VolumeName, c.Status.Phase = "", corev1.ClaimPending
			delete(c.Annotations, annBindCompleted)
			delete(c.Annotations, annBoundByController)
		}},
		{name: "claim phase Bound, volume Available", want: InvInconsistent, about: "pv-a", break_: func(w *world0) {
			w.pv("pv-a").Status.Phase = corev1.VolumeAvailable
		}},
		{name: "free volume marked Bound", want: InvInconsistent, about: "pv/pv-f", break_: func(w *world0) {
			w.pv("pv-f").Status.Phase = corev1.VolumeBound
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := sound()
			tc.break_(&w)
			got := Check(w.s, w.in)
			found := false
			for _, v := range got {
				if v.Invariant == tc.want && strings.Contains(v.Object, tc.about) {
					found = true
				}
			}
			if !found {
				t.Fatalf("want a %s violation about %s; got %v", tc.want, tc.about, got)
			}
		})
	}
}

// TestCheckerCountsVolumesAsAMatching: two unbound claims and one free volume that fits both
// make one violation, not two; two free volumes make two.
func TestCheckerCountsVolumesAsAMatching(t *testing.T) {
	w := sound()
	w.pv("pv-f").Spec.Capacity[corev1.ResourceStorage] = resource.MustParse("5Gi")
	u2 := w.pvc("u").DeepCopy()
	u2.Name, u2.UID = "u2", types.UID("uu2")
	w.s.PVCs = append(w.s.PVCs, *u2)
	count := func() int {
		n := 0
		for _, v := range Check(w.s, w.in) {
			if v.Invariant == InvUnbound {
				n++
			}
		}
		return n
	}
	if got := count(); got != 1 {
		t.Fatalf("%d unbound-satisfiable violations with one free volume, want 1", got)
	}
	g := w.pv("pv-f").DeepCopy()
	g.Name = "pv-g"
	w.s.PVs = append(w.s.PVs, *g)
	if got := count(); got != 2 {
		t.Fatalf("%d unbound-satisfiable violations with two free volumes, want 2", got)
	}
}

// TestShortfallFindsTheAugmentingPath: claim a (1Gi) holds the 5Gi volume, the only one claim u
// (5Gi) fits, while 1Gi volumes that would do for a are free: Bindable counts u, the state has
// no violation (no free volume fits u), and Shortfall names the path u -> pv-a -> a -> a free
// volume.
func TestShortfallFindsTheAugmentingPath(t *testing.T) {
	w := sound()
	if got := Shortfall(w.s, w.in); len(got) != 0 {
		t.Fatalf("Shortfall of a state that binds the ideal: %v", got)
	}
	w.pv("pv-a").Spec.Capacity[corev1.ResourceStorage] = resource.MustParse("5Gi")
	w.pvc("a").Status.Capacity[corev1.ResourceStorage] = resource.MustParse("5Gi")
	// The ideal gives pv-f to claim p (of another class than its own pre-bound volume); a second
	// free volume is the one a could move to.
	g := w.pv("pv-f").DeepCopy()
	g.Name = "pv-g"
	w.s.PVs = append(w.s.PVs, *g)
	w.in.Volumes["pv-g"] = true
	if v := Check(w.s, w.in); len(v) != 0 {
		t.Fatalf("violations: %v", v)
	}
	if got := Bindable(w.s, w.in); got != 4 {
		t.Fatalf("Bindable = %d, want 4", got)
	}
	got := Shortfall(w.s, w.in)
	if len(got) != 1 {
		t.Fatalf("Shortfall: %v, want one path", got)
	}
	var names []string
	for _, part := range strings.Split(got[0], " -> ") {
		names = append(names, strings.Fields(part)[1])
	}
	if want := []string{"ns/u", "pv-a", "ns/a", "pv-f"}; !slices.Equal(names, want) && !slices.Equal(names, append(want[:3:3], "pv-g")) {
		t.Fatalf("path %q, want through %v", got[0], want)
	}
}

func TestMonitor(t *testing.T) {
	live := map[string]*corev1.PersistentVolumeClaim{}
	newMonitor := func() *Monitor {
		return &Monitor{
			Lookup:  func(ns, name string) (*corev1.PersistentVolumeClaim, error) { return live[ns+"/"+name], nil },
			InScope: func(ns, name string) bool { return ns == "ns" || strings.HasPrefix(name, "pv-") },
		}
	}
	bound, claim := pair("a", "ua", "pv-a", true, true)
	released := bound.DeepCopy()
	released.Status.Phase = corev1.VolumeReleased
	unbound := bound.DeepCopy()
	unbound.Spec.ClaimRef, unbound.Status.Phase = nil, corev1.VolumeAvailable

	for _, tc := range []struct {
		name      string
		claimLive bool
		feed      func(m *Monitor)
		want      string // invariant, "" for none
		released  int
		unbinds   int
	}{
		{name: "Released while the claim lives", claimLive: true, feed: func(m *Monitor) { m.VolumeChanged(bound, released) }, want: InvReleased},
		{name: "Released after the claim is gone", feed: func(m *Monitor) { m.VolumeChanged(bound, released) }, released: 1},
		{name: "claimRef cleared while the claim wants the volume", claimLive: true, feed: func(m *Monitor) { m.VolumeChanged(bound, unbound) }, want: InvReleased},
		{name: "claimRef cleared after the claim went elsewhere", claimLive: true, feed: func(m *Monitor) {
			live["ns/a"] = testobj.PVCWith(claim, testobj.VolumeName("pv-other"))
			m.VolumeChanged(bound, unbound)
		}, unbinds: 1},
		{name: "deleted while the claim lives", claimLive: true, feed: func(m *Monitor) { m.VolumeDeleted(bound) }, want: InvDeleted},
		{name: "claim Lost", feed: func(m *Monitor) {
			m.ClaimChanged(claim, testobj.PVCWith(claim, testobj.ClaimPhase(corev1.ClaimLost)))
		}, want: InvLost},
		{name: "volumeName changed after bind-completed", feed: func(m *Monitor) {
			m.ClaimChanged(claim, testobj.PVCWith(claim, testobj.VolumeName("pv-other")))
		}, want: InvLost},
		{name: "out of scope", claimLive: true, feed: func(m *Monitor) {
			m.VolumeChanged(testobj.PVWith(bound, func(pv *corev1.PersistentVolume) { pv.Name = "other" }),
				testobj.PVWith(released, func(pv *corev1.PersistentVolume) { pv.Name = "other" }))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clear(live)
			if tc.claimLive {
				live["ns/a"] = claim
			}
			m := newMonitor()
			tc.feed(m)
			got := m.Violations()
			switch {
			case tc.want == "" && len(got) > 0:
				t.Fatalf("unexpected violations %v", got)
			case tc.want != "" && (len(got) != 1 || got[0].Invariant != tc.want):
				t.Fatalf("violations %v, want one %s", got, tc.want)
			}
			if len(m.Released()) != tc.released || len(m.Unbinds()) != tc.unbinds {
				t.Fatalf("released %v, unbinds %v; want %d and %d", m.Released(), m.Unbinds(), tc.released, tc.unbinds)
			}
		})
	}
}

// TestLinkViolations: the watch's rules, each case one state; the rollback states a binder passes
// through must not count.
func TestLinkViolations(t *testing.T) {
	a, ca := pair("a", "ua", "pv-a", true, true)
	for _, tc := range []struct {
		name  string
		state func() ([]*corev1.PersistentVolume, []*corev1.PersistentVolumeClaim)
		want  []string // "invariant object"
	}{
		{name: "a sound pair", state: func() ([]*corev1.PersistentVolume, []*corev1.PersistentVolumeClaim) {
			return []*corev1.PersistentVolume{a.DeepCopy()}, []*corev1.PersistentVolumeClaim{ca.DeepCopy()}
		}},
		{name: "a second volume holds the claim's uid, not Bound (first bind write, or a rollback)", state: func() ([]*corev1.PersistentVolume, []*corev1.PersistentVolumeClaim) {
			w := testobj.PV("pv-w", testobj.ClaimRef("ns", "a", "ua"), testobj.Phase(corev1.VolumeAvailable))
			return []*corev1.PersistentVolume{a.DeepCopy(), w}, []*corev1.PersistentVolumeClaim{ca.DeepCopy()}
		}},
		{name: "a second volume Bound with the claim's uid", want: []string{InvDoubleClaim + " pvc/ns/a"}, state: func() ([]*corev1.PersistentVolume, []*corev1.PersistentVolumeClaim) {
			w := testobj.PV("pv-w", testobj.BoundTo(ca))
			return []*corev1.PersistentVolume{a.DeepCopy(), w}, []*corev1.PersistentVolumeClaim{ca.DeepCopy()}
		}},
		{name: "the claim names a volume that does not hold it, another Bound volume does", want: []string{InvDoubleClaim + " pvc/ns/a"}, state: func() ([]*corev1.PersistentVolume, []*corev1.PersistentVolumeClaim) {
			v := testobj.PV("pv-a", testobj.Phase(corev1.VolumeAvailable))
			w := testobj.PV("pv-w", testobj.BoundTo(ca))
			return []*corev1.PersistentVolume{v, w}, []*corev1.PersistentVolumeClaim{ca.DeepCopy()}
		}},
		{name: "two Bound volumes hold a claim that names neither yet", want: []string{InvDoubleClaim + " pvc/ns/u"}, state: func() ([]*corev1.PersistentVolume, []*corev1.PersistentVolumeClaim) {
			u := testobj.PVC("ns", "u", testobj.ClaimUID("uu"), testobj.ClaimPhase(corev1.ClaimPending))
			return []*corev1.PersistentVolume{testobj.PV("pv-1", testobj.BoundTo(u)), testobj.PV("pv-2", testobj.BoundTo(u))}, []*corev1.PersistentVolumeClaim{u}
		}},
		{name: "a volume Bound to a claim of the same name but another uid", state: func() ([]*corev1.PersistentVolume, []*corev1.PersistentVolumeClaim) {
			w := testobj.PV("pv-w", testobj.ClaimRef("ns", "a", "old-uid"), testobj.Phase(corev1.VolumeBound))
			return []*corev1.PersistentVolume{a.DeepCopy(), w}, []*corev1.PersistentVolumeClaim{ca.DeepCopy()}
		}},
		{name: "two claims completed a binding to one volume", want: []string{InvDoubleClaim + " pv/pv-a"}, state: func() ([]*corev1.PersistentVolume, []*corev1.PersistentVolumeClaim) {
			b := testobj.PVC("ns", "b", testobj.ClaimUID("ub"), testobj.ClaimBoundTo("pv-a"))
			return []*corev1.PersistentVolume{a.DeepCopy()}, []*corev1.PersistentVolumeClaim{ca.DeepCopy(), b}
		}},
		{name: "a claim naming a volume without bind-completed (the claim's own choice)", state: func() ([]*corev1.PersistentVolume, []*corev1.PersistentVolumeClaim) {
			b := testobj.PVC("ns", "b", testobj.ClaimUID("ub"), testobj.VolumeName("pv-a"))
			return []*corev1.PersistentVolume{a.DeepCopy()}, []*corev1.PersistentVolumeClaim{ca.DeepCopy(), b}
		}},
		{name: "a claim Lost", want: []string{InvLost + " pvc/ns/a"}, state: func() ([]*corev1.PersistentVolume, []*corev1.PersistentVolumeClaim) {
			c := ca.DeepCopy()
			c.Status.Phase = corev1.ClaimLost
			return []*corev1.PersistentVolume{a.DeepCopy()}, []*corev1.PersistentVolumeClaim{c}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, v := range LinkViolations(tc.state()) {
				got = append(got, v.Invariant+" "+v.Object)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	var w LinkWatch
	w.InScope = func(string, string) bool { return true }
	w.Volume(a.DeepCopy(), false)
	w.Claim(ca.DeepCopy(), false)
	w.Volume(testobj.PV("pv-w", testobj.BoundTo(ca)), false)
	w.Volume(testobj.PV("pv-w", testobj.Phase(corev1.VolumeAvailable)), false)
	s, events := w.Sightings()
	if events != 4 || len(s) != 1 || s[0].Invariant != InvDoubleClaim || s[0].Cleared.IsZero() {
		t.Errorf("the watch saw %d events and %v; want 4 events and one double claim, cleared", events, s)
	}
}
