package explain

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/pvguard/pvguard/clusterstate"
	"github.com/pvguard/pvguard/storage"
	. "github.com/pvguard/pvguard/test/testobj"
)

// synthetic is a generated cluster of pairs bound pairs and pending Pending claims (of an
// Immediate default class "standard" and a WaitForFirstConsumer class "local"), with pending/2
// free volumes of mixed sizes, access modes, labels and node affinity, one in twenty volumes
// Released, some free volumes pre-bound to a pending claim; seed makes it.
func synthetic(seed uint64, pairs, pending int) *clusterstate.State {
	return syntheticClasses(seed, pairs, pending, 1)
}

// syntheticClasses is synthetic with the Immediate claims and volumes spread evenly over
// immediate Immediate classes ("standard" and "standard-1", ...), so that the plan has that many
// pools to plan; with one it is synthetic's state.
func syntheticClasses(seed uint64, pairs, pending, immediate int) *clusterstate.State {
	rng := rand.New(rand.NewPCG(seed, uint64(pairs)))
	standard := StorageClass("standard", "csi.example.com", DefaultClass)
	local := StorageClass("local", storage.NoProvisioner, func(sc *storagev1.StorageClass) {
		m := storagev1.VolumeBindingWaitForFirstConsumer
		sc.VolumeBindingMode = &m
	})
	classes := []*storagev1.StorageClass{standard, local}
	for k := 1; k < immediate; k++ {
		classes = append(classes, StorageClass(fmt.Sprintf("standard-%d", k), "csi.example.com"))
	}
	nodes := make([]*corev1.Node, 8)
	for i := range nodes {
		nodes[i] = Node(fmt.Sprintf("node-%d", i), map[string]string{"topology.kubernetes.io/zone": fmt.Sprintf("zone-%d", i%3)})
	}
	size := func() string { return fmt.Sprintf("%dGi", 1+rng.IntN(100)) }
	modes := []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce, corev1.ReadWriteMany, corev1.ReadOnlyMany}
	classOf := func() string {
		if rng.IntN(10) == 0 {
			return "local"
		}
		if immediate > 1 {
			if k := rng.IntN(immediate); k > 0 {
				return fmt.Sprintf("standard-%d", k)
			}
		}
		return "standard"
	}
	var claims []*corev1.PersistentVolumeClaim
	var volumes []*corev1.PersistentVolume
	for i := range pairs {
		ns, name, pv := fmt.Sprintf("ns-%02d", i%50), fmt.Sprintf("data-%06d", i), fmt.Sprintf("pv-bound-%06d", i)
		s, cls := size(), classOf()
		c := PVC(ns, name, ClaimClass(cls), Request(s), ClaimUID(fmt.Sprintf("uid-%s-%s", ns, name)), ClaimBoundTo(pv),
			ClaimMeta(Annotation(storage.AnnBindCompleted, "yes")))
		claims = append(claims, c)
		phase := corev1.VolumeBound
		if i%20 == 0 {
			phase = corev1.VolumeReleased
		}
		volumes = append(volumes, PV(pv, Class(cls), Capacity(s), BoundTo(c), Phase(phase)))
	}
	pendingName := func(j int) (string, string) { return fmt.Sprintf("ns-%02d", j%50), fmt.Sprintf("pending-%05d", j) }
	for j := range pending {
		ns, name := pendingName(j)
		mods := []PVCMod{ClaimClass(classOf()), Request(size()), ClaimAccessModes(modes[rng.IntN(len(modes))]),
			ClaimUID(fmt.Sprintf("uid-%s-%s", ns, name)), ClaimPhase(corev1.ClaimPending)}
		switch rng.IntN(20) {
		case 0:
			mods = append(mods, Selector(map[string]string{"tier": []string{"gold", "silver"}[rng.IntN(2)]}))
		case 1:
			mods = append(mods, ClaimMeta(Annotation(storage.AnnSelectedNode, nodes[rng.IntN(len(nodes))].Name)))
		case 2:
			mods = append(mods, ClaimVolumeMode(corev1.PersistentVolumeBlock))
		}
		claims = append(claims, PVC(ns, name, mods...))
	}
	for k := range pending / 2 {
		mods := []PVMod{Class(classOf()), Capacity(size()), Phase(corev1.VolumeAvailable),
			AccessModes(modes[:1+rng.IntN(len(modes))]...), PVMeta(Label("tier", []string{"gold", "silver", "bronze"}[rng.IntN(3)]))}
		switch rng.IntN(12) {
		case 0:
			mods = append(mods, NodeAffinity("kubernetes.io/hostname", nodes[rng.IntN(len(nodes))].Name))
		case 1:
			ns, name := pendingName(rng.IntN(pending))
			uid := ""
			if rng.IntN(2) == 0 {
				uid = fmt.Sprintf("uid-%s-%s", ns, name)
			}
			mods = append(mods, ClaimRef(ns, name, uid))
		case 2:
			mods = append(mods, VolumeMode(corev1.PersistentVolumeBlock))
		case 3:
			mods = append(mods, Phase(corev1.VolumePending))
		}
		volumes = append(volumes, PV(fmt.Sprintf("pv-free-%06d", k), mods...))
	}
	rng.Shuffle(len(volumes), func(i, j int) { volumes[i], volumes[j] = volumes[j], volumes[i] })
	return clusterstate.New(claims, volumes, classes, nodes)
}

// pendingClaims are the uids and keys of the state's claims that are not bound.
func pendingClaims(s *clusterstate.State) []*corev1.PersistentVolumeClaim {
	var out []*corev1.PersistentVolumeClaim
	for _, c := range s.Claims() {
		if c.Status.Phase != corev1.ClaimBound {
			out = append(out, c)
		}
	}
	return out
}

// benchmarkReference is one explanation as it was made before the server kept a plan and a
// table (referenceClaim: a plan of the pool and every volume's row, per question), encoded as
// the API sent it: the anchor of benchmarkServed, on the same state.
func benchmarkReference(b *testing.B, pairs int) {
	in := Input{State: synthetic(1, pairs, pairs/10), NodesListed: true}
	in.State = withUIDs(in.state())
	measureAnswers(b, pendingClaims(in.State), func(c *corev1.PersistentVolumeClaim) any { return referenceClaim(in, c) })
}

// measureAnswers times answer over the pending claims in turn, each encoded as the API sends
// it, and reports the largest answer's bytes and the CPU per answer.
func measureAnswers(b *testing.B, pend []*corev1.PersistentVolumeClaim, answer func(*corev1.PersistentVolumeClaim) any) {
	size := 0
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	for i := range b.N {
		data, err := json.MarshalIndent(answer(pend[i%len(pend)]), "", "  ")
		if err != nil {
			b.Fatal(err)
		}
		size = max(size, len(data))
	}
	b.ReportMetric(float64(size), "max-answer-bytes")
	reportCPU(b, cpu0)
}

func BenchmarkReference10k(b *testing.B)  { benchmarkReference(b, 10000) }
func BenchmarkReference100k(b *testing.B) { benchmarkReference(b, 100000) }

// benchmarkServed is one explanation as the server answers it: of a Pending claim (each in
// turn), from the one plan of the pool the server keeps (made and indexed once, before the
// timer), its table's memory reused by the next question (table.release), its
// closest candidates listed and the rest counted, encoded as the API sends it. It reports the
// answer's bytes.
func benchmarkServed(b *testing.B, pairs int, scatter bool) {
	in := Input{State: synthetic(1, pairs, pairs/10), NodesListed: true}
	in.State = withUIDs(in.state())
	if scatter {
		in.State = scattered(in.State)
	}
	x := indexInput(in)
	p := snapshotOf(x, planPool(x, in.InFlight), 0, nil).p // indexed as the server's plan is
	measureAnswers(b, pendingClaims(in.State), func(c *corev1.PersistentVolumeClaim) any {
		e, t := explainTable(x, p, c, shownClosest)
		listed(e, t, audience{}, CandidatePage{})
		t.release()
		return e
	})
}

func BenchmarkServed10k(b *testing.B)  { benchmarkServed(b, 10000, false) }
func BenchmarkServed100k(b *testing.B) { benchmarkServed(b, 100000, false) }

// BenchmarkServed100kScattered is BenchmarkServed100k on objects laid out in the heap as a
// server's informers leave them, in no relation to the state's order: each volume read in the
// state's order is then a cache miss, as in the server, rather than the next object in memory.
func BenchmarkServed100kScattered(b *testing.B) { benchmarkServed(b, 100000, true) }

// scattered is s with its claims and volumes copied in a random order, kept in s's order, each
// with strings of its own, as a decoder leaves them (the synthetic objects share their
// literals).
func scattered(s *clusterstate.State) *clusterstate.State {
	rng := rand.New(rand.NewPCG(7, 7))
	own := func(p *string) { *p = strings.Clone(*p) }
	claims := slices.Clone(s.Claims())
	for _, i := range rng.Perm(len(claims)) {
		c := claims[i].DeepCopy()
		own(&c.Namespace)
		own(&c.Name)
		if c.Spec.StorageClassName != nil {
			own(c.Spec.StorageClassName)
		}
		claims[i] = c
	}
	volumes := slices.Clone(s.Volumes())
	for _, i := range rng.Perm(len(volumes)) {
		v := volumes[i].DeepCopy()
		own(&v.Name)
		own(&v.Spec.StorageClassName)
		if v.Spec.VolumeMode != nil {
			m := corev1.PersistentVolumeMode(strings.Clone(string(*v.Spec.VolumeMode)))
			v.Spec.VolumeMode = &m
		}
		if ref := v.Spec.ClaimRef; ref != nil {
			own(&ref.Namespace)
			own(&ref.Name)
		}
		volumes[i] = v
	}
	return clusterstate.New(claims, volumes, s.Classes(), s.Nodes())
}

// BenchmarkPlanPool100k is the plan the server makes as objects change (once a second at most),
// which each explanation made before.
func BenchmarkPlanPool100k(b *testing.B) {
	in := Input{State: synthetic(1, 100000, 10000), NodesListed: true}
	in.State = withUIDs(in.state())
	x := indexInput(in)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		planPool(x, in.InFlight)
	}
}

// cpuTime is the CPU time the process has used (user and system): on a shared machine a
// benchmark's wall time is mostly the other tenants', its CPU time (cpu-ns/op) its own.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func reportCPU(b *testing.B, since time.Duration) {
	b.ReportMetric(float64(cpuTime()-since)/float64(b.N), "cpu-ns/op")
}

// BenchmarkFirstQuestionAfterAPlan100k is the first question after a new plan of a new read of
// the cluster (its State's lookups not yet used): the claim found by name, and its table. The
// plan (snapshotOf) builds the lookups the question reads, so that the question does not, nor
// does every question that arrives while it would.
func BenchmarkFirstQuestionAfterAPlan100k(b *testing.B) {
	in := Input{State: synthetic(1, 100000, 10000), NodesListed: true}
	in.State = withUIDs(in.state())
	p := planPool(indexInput(in), in.InFlight)
	c := pendingClaims(in.State)[0]
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		in.State = clusterstate.New(in.State.Claims(), in.State.Volumes(), in.State.Classes(), in.State.Nodes())
		snap := snapshotOf(indexInput(in), p, 0, nil)
		b.StartTimer()
		asked, err := findClaim(snap.in.State, c.Namespace, c.Name)
		if err != nil {
			b.Fatal(err)
		}
		_, t := explainTable(snap.x, snap.p, asked, shownClosest)
		t.release()
	}
}

// BenchmarkTakeBindersPlan100k is what the server spends on each plan of the binder it takes
// (at most once a second, while the binder plans in the process): the input indexed and every
// volume's facts read, beside the plan the binder made (BenchmarkPlanPool100k), which it no
// longer makes again.
func BenchmarkTakeBindersPlan100k(b *testing.B) {
	in := Input{State: synthetic(1, 100000, 10000), NodesListed: true}
	in.State = withUIDs(in.state())
	p := planPool(indexInput(in), in.InFlight)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		// A new State per plan, as the binder reads one: its indexes are built anew.
		in.State = clusterstate.New(in.State.Claims(), in.State.Volumes(), in.State.Classes(), in.State.Nodes())
		snapshotOf(indexInput(in), p, 0, nil)
	}
}
