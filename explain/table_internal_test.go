package explain

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvguard/pvguard/binder"
	"github.com/pvguard/pvguard/clusterstate"
	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/storage"
	. "github.com/pvguard/pvguard/test/testobj"
)

// referenceClaim is the explanation as it was made before the table (explainClaim): every
// volume's row made in full and sorted, over a plan of the whole pool made for the question.
func referenceClaim(in Input, c *corev1.PersistentVolumeClaim) *Explanation {
	x := indexInput(in)
	return explainClaim(x, planPool(x, in.InFlight), c, false)
}

// randomState is a small cluster drawn from rng, with something of everything the checks and the
// planner look at: classes of each binding mode (one default), volumes of every phase, bound,
// pre-bound (with and without uid) and free, with node affinity, labels, modes and sizes, some
// being deleted; claims pending, bound, naming volumes, with selectors and selected nodes; and
// binds in flight and denials.
func randomState(rng *rand.Rand) Input {
	pick := func(s ...string) string { return s[rng.IntN(len(s))] }
	wffc := func(sc *storagev1.StorageClass) {
		m := storagev1.VolumeBindingWaitForFirstConsumer
		sc.VolumeBindingMode = &m
	}
	classes := []*storagev1.StorageClass{StorageClass("fast", "csi.example.com", DefaultClass),
		StorageClass("local", storage.NoProvisioner, wffc), StorageClass("late", "csi.example.com", wffc),
		StorageClass("static", storage.NoProvisioner)}
	nodes := []*corev1.Node{Node("n1", map[string]string{"zone": "a"}), Node("n2", map[string]string{"zone": "b"})}
	nClaims, nVolumes := 1+rng.IntN(12), rng.IntN(25)
	modes := []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce, corev1.ReadWriteMany, corev1.ReadOnlyMany}
	var claims []*corev1.PersistentVolumeClaim
	key := func(i int) (string, string) { return pick("a", "b"), fmt.Sprintf("c%d", i) }
	for i := range nClaims {
		ns, name := key(i)
		mods := []PVCMod{Request(size(rng)), ClaimAccessModes(modes[rng.IntN(3)], modes[rng.IntN(3)]),
			ClaimUID(fmt.Sprintf("uid-%s-%d", ns, i)), ClaimPhase(corev1.ClaimPending)}
		switch r := rng.IntN(6); r {
		case 0:
			mods = append(mods, ClaimNoClass)
		case 1, 2, 3, 4:
			mods = append(mods, ClaimClass(pick("fast", "local", "late", "static", "gone")))
		}
		if rng.IntN(5) == 0 {
			mods = append(mods, Selector(map[string]string{"tier": pick("gold", "silver")}))
		}
		if rng.IntN(5) == 0 {
			mods = append(mods, ClaimMeta(Annotation(storage.AnnSelectedNode, pick("n1", "n2", "n3"))))
		}
		if rng.IntN(6) == 0 {
			mods = append(mods, VolumeName(fmt.Sprintf("pv%d", rng.IntN(nVolumes+2))))
		}
		if rng.IntN(8) == 0 {
			mods = append(mods, ClaimVolumeMode(corev1.PersistentVolumeBlock))
		}
		if rng.IntN(10) == 0 {
			mods = append(mods, ClaimVolumeAttributesClass("gold"))
		}
		if rng.IntN(12) == 0 {
			mods = append(mods, ClaimMeta(Deleting()))
		}
		claims = append(claims, PVC(ns, name, mods...))
	}
	var volumes []*corev1.PersistentVolume
	for i := range nVolumes {
		mods := []PVMod{Capacity(size(rng)), AccessModes(someModes(rng)...),
			Phase([]corev1.PersistentVolumePhase{corev1.VolumeAvailable, corev1.VolumeAvailable, corev1.VolumeBound,
				corev1.VolumeReleased, corev1.VolumePending, ""}[rng.IntN(6)]),
			PVMeta(Label("tier", pick("gold", "silver", "bronze")))}
		if rng.IntN(6) > 0 {
			mods = append(mods, Class(pick("fast", "local", "late", "static", "")))
		} else {
			mods = append(mods, Class(""))
		}
		switch rng.IntN(5) {
		case 0:
			c := claims[rng.IntN(len(claims))]
			uid := string(c.UID)
			if rng.IntN(3) == 0 {
				uid = ""
			}
			mods = append(mods, ClaimRef(c.Namespace, c.Name, uid))
		case 1:
			mods = append(mods, ClaimRef("b", "gone", "uid-gone"))
		}
		if rng.IntN(4) == 0 {
			mods = append(mods, NodeAffinity("kubernetes.io/hostname", pick("n1", "n2", "n3")))
		}
		if rng.IntN(8) == 0 {
			mods = append(mods, VolumeMode(corev1.PersistentVolumeBlock))
		}
		if rng.IntN(10) == 0 {
			mods = append(mods, VolumeAttributesClass("gold"))
		}
		if rng.IntN(15) == 0 {
			mods = append(mods, PVMeta(Deleting(), Finalizers("kubernetes.io/pv-protection")))
		}
		volumes = append(volumes, PV(fmt.Sprintf("pv%d", i), mods...))
	}
	// A crowded pool, one state in three: most volumes free in the default class and most
	// claims asking for it, so that many volumes fit and the plan gives most of them out.
	if rng.IntN(3) == 0 {
		for i, v := range volumes {
			if rng.IntN(5) > 0 {
				volumes[i] = PVWith(v, Class("fast"), Phase(corev1.VolumeAvailable), NoClaimRef)
			}
		}
		for i, c := range claims {
			if rng.IntN(4) > 0 {
				claims[i] = PVCWith(c, ClaimClass("fast"))
			}
		}
	}
	// Some volumes granted to a namespace (the grant annotation), read by its tenants.
	for i, v := range volumes {
		if i%5 == 2 {
			volumes[i] = PVWith(v, PVMeta(Annotation(policy.DefaultGrantAnnotation, []string{"a", "b", " a*, c", ""}[i%4])))
		}
	}
	// A dump may hold a name twice: here, one state in four, a second volume of an earlier one's
	// name, granted to namespace a, which a lookup by that name finds.
	if len(volumes) > 1 && nClaims%4 == 1 {
		volumes = append(volumes, PVWith(volumes[1], NoClaimRef, PVMeta(Annotation(policy.DefaultGrantAnnotation, "a"))))
	}
	// Some claims bound to a volume that names them.
	for _, v := range volumes {
		if ref := v.Spec.ClaimRef; ref != nil && ref.UID != "" && rng.IntN(2) == 0 {
			for i, c := range claims {
				if c.Namespace == ref.Namespace && c.Name == ref.Name && c.Spec.VolumeName == "" {
					claims[i] = PVCWith(c, ClaimBoundTo(v.Name), ClaimMeta(Annotation(storage.AnnBindCompleted, "yes")))
				}
			}
		}
	}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	in := Input{State: clusterstate.New(claims, volumes, classes, nodes), NodesListed: rng.IntN(2) == 0, PendingFree: rng.IntN(2) == 0}
	in.InFlight = binder.InFlight{Reserved: map[string]types.UID{}, Denied: map[types.UID]map[string]time.Time{}, At: now}
	for _, v := range volumes {
		switch rng.IntN(10) {
		case 0:
			in.InFlight.Reserved[v.Name] = claims[rng.IntN(len(claims))].UID
		case 1:
			c := claims[rng.IntN(len(claims))]
			if in.InFlight.Denied[c.UID] == nil {
				in.InFlight.Denied[c.UID] = map[string]time.Time{}
			}
			in.InFlight.Denied[c.UID][v.Name] = now.Add(-time.Duration(rng.IntN(120)) * time.Second)
		}
	}
	return in
}

// size is a random size of 1 to 8Gi, one in six half a byte more or less (not a whole number of
// bytes, which the facts compare as the volume's and the claim's quantities).
func size(rng *rand.Rand) string {
	gi := int64(1 + rng.IntN(8))
	if rng.IntN(6) == 0 {
		return fmt.Sprintf("%dm", gi<<30*1000+[]int64{-500, 500}[rng.IntN(2)])
	}
	return fmt.Sprintf("%dGi", gi)
}

// someModes is a random non-empty set of access modes.
func someModes(rng *rand.Rand) []corev1.PersistentVolumeAccessMode {
	var out []corev1.PersistentVolumeAccessMode
	for _, m := range []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce, corev1.ReadWriteMany, corev1.ReadOnlyMany} {
		if rng.IntN(2) == 0 {
			out = append(out, m)
		}
	}
	if len(out) == 0 {
		out = append(out, corev1.ReadWriteOnce)
	}
	return out
}

// TestTableExplainsAsTheFullPool: over random states, the explanation made with the table (the
// server's and the CLI's) has the verdict, the state, what the claim waits for and the closest
// candidates of the explanation made with every row over a plan of the question's own
// (referenceClaim), and its table's rows are the full table's, in its order.
func TestTableExplainsAsTheFullPool(t *testing.T) {
	cfg, err := policy.ParseConfig([]byte("rules:\n  binder-annotations: {action: deny}\n"))
	if err != nil {
		t.Fatal(err)
	}
	denyAll := policy.NewEngine(cfg)
	seeds := 400
	if testing.Short() {
		seeds = 100
	}
	// The plans made again without a claim's denied pairs (withoutDenied) that differ from the
	// shared plan, and those of them made over a pool of several classes planned at once, of
	// which only the claim's is planned again (binder.ReplanClaim).
	var replanned, replannedBeside int
	for seed := range seeds {
		rng := rand.New(rand.NewPCG(uint64(seed), 7))
		in := randomState(rng)
		switch rng.IntN(4) {
		case 0:
			in.Policy, in.Identity = denyAll, policy.UserInfo{Username: "system:serviceaccount:pvguard-system:pvguard"}
		case 1:
			in.Policy, in.Identity = denyAll, policy.UserInfo{Username: binder.UpstreamBinderIdentity.Username}
		}
		in.State = withUIDs(in.state())
		x := indexInput(in)
		shared := planPool(x, in.InFlight) // planned once for every claim, as the server keeps it
		for _, c := range in.State.Claims() {
			want := referenceClaim(in, c)
			clear(x.replans.m)
			got, tab := explainTable(x, shared, c, []int{0, 1, shownClosest}[rng.IntN(3)]) // rows made in full: any head
			where := fmt.Sprintf("seed %d, claim %s/%s", seed, c.Namespace, c.Name)
			for _, r := range x.replans.m {
				if !maps.Equal(r.p.plan.Volumes, shared.plan.Volumes) {
					replanned++
					if classesOf(shared.plan) > 1 {
						replannedBeside++
					}
				}
			}
			if !reflect.DeepEqual(got.Verdict, want.Verdict) {
				t.Fatalf("%s: verdict\n%+v\nwant\n%+v", where, got.Verdict, want.Verdict)
			}
			if got.WaitingFor != want.WaitingFor || got.State.String() != want.State.String() || got.Provisioner != want.Provisioner {
				t.Fatalf("%s: waiting for %s (%s), want %s (%s)", where, got.WaitingFor, got.State, want.WaitingFor, want.State)
			}
			if len(tab.entries) != len(want.Candidates) {
				t.Fatalf("%s: %d rows, want %d", where, len(tab.entries), len(want.Candidates))
			}
			for i := range tab.entries {
				if row := tab.row(tab.order.at(i)); !reflect.DeepEqual(row, want.Candidates[i]) {
					t.Fatalf("%s: row %d\n%+v\nwant\n%+v", where, i, row, want.Candidates[i])
				}
			}
			var e Explanation
			listed(&e, tab, audience{}, CandidatePage{})
			closest := want.Candidates[:min(shownClosest, len(want.Candidates))]
			if !reflect.DeepEqual(e.Candidates, closest) && !(len(closest) == 0 && len(e.Candidates) == 0) {
				t.Fatalf("%s: closest\n%+v\nwant\n%+v", where, e.Candidates, closest)
			}
			if others := othersOf(want.Candidates); !reflect.DeepEqual(e.Others, others) || e.CandidatesTotal != len(want.Candidates) {
				t.Fatalf("%s: %d candidates, others %+v\nwant %d, %+v", where, e.CandidatesTotal, e.Others, len(want.Candidates), others)
			}
			// For a reader who may read some volumes only: the closest they may read, the others
			// counted as forAudience counts them, and every reference rendered for them. The
			// readers: one who may read the volumes of odd-length names, and a tenant who may
			// read namespace a's claims and the volumes linked to or granting it (a volume
			// judged as the table holds it: policy.Readers.ReadsVolume).
			// The tenant is asked of twice: once without the key of their rights, once with it
			// (the volumes they read judged once per state, by the first claim asked, and kept).
			tenant := policy.Readers{Claims: func(ns string) bool { return ns == "a" }, View: in.State, Namespaces: []string{"a"}}
			for k, aud := range []audience{{Audience: someVolumes{}}, {Audience: tenant}, {Audience: tenant, rights: "a"}} {
				want, got := referenceClaim(in, c), got
				if k > 0 {
					tab.release()
					got, tab = explainTable(x, shared, c, shownClosest)
				}
				forAudience(aud.Audience, want)
				listed(got, tab, aud, CandidatePage{})
				policy.Redact(got, aud.Audience)
				closest = want.Candidates[:min(shownClosest, len(want.Candidates))]
				if !reflect.DeepEqual(got.Candidates, closest) && !(len(closest) == 0 && len(got.Candidates) == 0) {
					t.Fatalf("%s: the closest %T (%q) may read\n%+v\nwant\n%+v", where, aud.Audience, aud.rights, got.Candidates, closest)
				}
				if others := othersOf(want.Candidates); !reflect.DeepEqual(got.Others, others) || got.CandidatesTotal != len(want.Candidates) {
					t.Fatalf("%s: for %T (%q): %d candidates, others %+v\nwant %d, %+v", where, aud.Audience, aud.rights, got.CandidatesTotal, got.Others, len(want.Candidates), others)
				}
				if !reflect.DeepEqual(got.Hidden, want.Hidden) || !reflect.DeepEqual(got.Verdict, want.Verdict) || got.State.String() != want.State.String() {
					t.Fatalf("%s: for %T (%q): hidden %+v verdict %+v\nwant hidden %+v verdict %+v", where, aud.Audience, aud.rights, got.Hidden, got.Verdict, want.Hidden, want.Verdict)
				}
			}
			tab.release() // the next question reuses its memory, as the server's do
		}
	}
	if replanned < seeds/8 || replannedBeside < seeds/16 {
		t.Fatalf("%d plans made again without denied pairs, %d beside other classes' claims", replanned, replannedBeside)
	}
	t.Logf("%d plans made again without denied pairs, %d beside other classes' claims", replanned, replannedBeside)
}

// classesOf counts the classes of the claims a plan considered.
func classesOf(p binder.PoolPlan) int {
	classes := map[string]bool{}
	for _, c := range p.Claims {
		classes[storage.ClaimClass(c)] = true
	}
	return len(classes)
}

// othersOf is Explanation.Others of a reader who may read the rows (in order, every row of the
// full table they may read): those past the closest counted by the first check each fails,
// claimRef before the others (a volume bound elsewhere), "fits" for none, in the order of Checks.
func othersOf(rows []Candidate) []CandidateGroup {
	counts := map[string]int{}
	for _, r := range rows[min(shownClosest, len(rows)):] {
		why := "fits"
		if failed := r.Failed(); len(failed) > 0 {
			why = string(failed[0].Check)
			if !r.passes(CheckClaimRef) {
				why = string(CheckClaimRef)
			}
		}
		counts[why]++
	}
	var out []CandidateGroup
	for _, c := range append(slices.Clone(Checks), "fits") {
		if n := counts[string(c)]; n > 0 {
			out = append(out, CandidateGroup{Failing: string(c), Count: n})
		}
	}
	return out
}

func TestCheckCount(t *testing.T) {
	if checkCount != len(Checks) {
		t.Fatalf("checkCount is %d, len(Checks) %d", checkCount, len(Checks))
	}
}

// someVolumes is a reader who may read the volumes whose name has an odd length (pv0..pv9, not
// pv10..), every claim of namespace a, and nothing else.
type someVolumes struct{}

func (someVolumes) Names(o policy.ObjectRef) bool { return someVolumes{}.Reads(o) }
func (someVolumes) Reads(o policy.ObjectRef) bool {
	switch o.Kind {
	case policy.KindPersistentVolume:
		return len(o.Name)%2 == 1
	case policy.KindPersistentVolumeClaim:
		return o.Namespace == "a"
	}
	return true
}
func (someVolumes) UID(o policy.ObjectRef, _ types.UID) bool { return someVolumes{}.Reads(o) }

// TestDeniedPairsArePlannedOncePerPlan: the questions about a claim whose pairs policy denies
// read one plan of the pool without those pairs, made by the first of them, not one each; and a
// plan that left the pairs out already (the binder met the denials) is not made again.
func TestDeniedPairsArePlannedOncePerPlan(t *testing.T) {
	cfg, err := policy.ParseConfig([]byte("rules:\n  binder-annotations: {action: deny}\n"))
	if err != nil {
		t.Fatal(err)
	}
	c := PVC("ns", "c", ClaimClass("fast"), Request("1Gi"), ClaimUID("uid-c"))
	in := Input{State: clusterstate.New([]*corev1.PersistentVolumeClaim{c},
		[]*corev1.PersistentVolume{PV("pv-1", Class("fast"), Capacity("1Gi"), Phase(corev1.VolumeAvailable))},
		[]*storagev1.StorageClass{StorageClass("fast", "csi.example.com")}, nil),
		Policy: policy.NewEngine(cfg), Identity: policy.UserInfo{Username: "system:serviceaccount:pvguard-system:pvguard"}}
	x := indexInput(in)
	shared := planPool(x, in.InFlight)
	first, _ := explainTable(x, shared, c, shownClosest)
	if len(x.replans.m) != 1 {
		t.Fatalf("%d plans without the denied pairs, want 1", len(x.replans.m))
	}
	var once *replan
	for _, r := range x.replans.m {
		once = r
	}
	for range 3 {
		again, tab := explainTable(x, shared, c, shownClosest)
		if !reflect.DeepEqual(again.Verdict, first.Verdict) || len(x.replans.m) != 1 {
			t.Fatalf("verdict %+v, want %+v; %d plans", again.Verdict, first.Verdict, len(x.replans.m))
		}
		if reflect.ValueOf(tab.p.plan.Volumes).Pointer() != reflect.ValueOf(once.p.plan.Volumes).Pointer() {
			t.Fatal("a question planned the pool again")
		}
	}
	// The binder met the denial: its plan leaves the pair out, and no question plans again.
	in.InFlight = binder.InFlight{Denied: map[types.UID]map[string]time.Time{"uid-c": {"pv-1": time.Now()}}, At: time.Now()}
	x = indexInput(in)
	shared = planPool(x, in.InFlight)
	if _, tab := explainTable(x, shared, c, shownClosest); len(x.replans.m) != 0 || reflect.ValueOf(tab.p.plan.Volumes).Pointer() != reflect.ValueOf(shared.plan.Volumes).Pointer() {
		t.Fatalf("%d plans made for a denial the plan already holds", len(x.replans.m))
	}
}
