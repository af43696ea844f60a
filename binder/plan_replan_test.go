package binder

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/clusterstate"
	"github.com/pvguard/pvguard/storage"
)

// TestReplanClaimIsTheWholePlan: on generated clusters (oracleCluster, with binds in flight and
// denials: oracleState), a claim given more denied pairs (of volumes of any class, recent and
// aged out) is re-planned by ReplanClaim from the plan without them into exactly the plan Plan
// makes of the whole input with them, entry for entry and claim for claim. Some inputs give a
// claim's uid to a second claim of another class (as a dump may), so that several classes are
// planned again, or a class planned again shares a uid with one that is not.
func TestReplanClaimIsTheWholePlan(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(21, 21))
	var changed, otherClasses, shared int
	for i := range 1000 {
		objs := oracleCluster(rng)
		b := scalePlanner(t, objs...)
		if i%2 == 1 {
			b.o.Mode = ModeShadow
		}
		oracleState(rng, b, objs)
		in, err := b.planInput(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if rng.IntN(3) == 0 {
			in.State = withUIDSharedAcrossClasses(rng, in)
		}
		base := Plan(in)
		claim := types.UID("uid-of-no-claim")
		if claims := in.State.Claims(); len(claims) > 0 && rng.IntN(10) > 0 {
			claim = claims[rng.IntN(len(claims))].UID
		}
		denied := withMoreDenials(rng, in, base, claim)
		want, got := Plan(denied), ReplanClaim(denied, base, claim)
		if !maps.Equal(got.Volumes, want.Volumes) {
			for uid, v := range want.Volumes {
				if gv, ok := got.Volumes[uid]; !ok || gv != v {
					t.Errorf("claim %s: re-planned %q (present %v), the whole plan %q", uid, gv, ok, v)
				}
			}
			t.Fatalf("cluster %d, denials for %s: re-plan %v, whole plan %v", i, claim, got.Volumes, want.Volumes)
		}
		if !slices.Equal(got.Claims, want.Claims) {
			t.Fatalf("cluster %d: re-plan considers %d claims, the whole plan %d", i, len(got.Claims), len(want.Claims))
		}
		if !maps.Equal(want.Volumes, base.Volumes) {
			changed++
			if plannedClasses(want) > 1 {
				otherClasses++
			}
		}
		if sharesUID(in) {
			shared++
		}
	}
	// The denials must change plans, of pools with other classes, and uids must be shared.
	if changed < 50 || otherClasses < 25 || shared < 100 {
		t.Fatalf("%d plans changed by the denials, %d with other classes planned; %d inputs share a uid", changed, otherClasses, shared)
	}
	t.Logf("%d plans changed by the denials, %d with other classes planned; %d inputs share a uid", changed, otherClasses, shared)
}

// withMoreDenials is in with pairs of claim to a few of its volumes denied, mostly the one base
// gives it: most at the snapshot's moment, some long enough before it that they no longer count.
func withMoreDenials(rng *rand.Rand, in PlanInput, base PoolPlan, claim types.UID) PlanInput {
	volumes := in.State.Volumes()
	f := in.InFlight
	denied := make(map[types.UID]map[string]time.Time, len(f.Denied)+1)
	for uid, m := range f.Denied {
		denied[uid] = m
	}
	mine := maps.Clone(f.Denied[claim])
	if mine == nil {
		mine = map[string]time.Time{}
	}
	for range 1 + rng.IntN(4) {
		if len(volumes) == 0 {
			break
		}
		at := f.At
		if rng.IntN(5) == 0 {
			at = at.Add(-2 * forbidTTL)
		}
		mine[volumes[rng.IntN(len(volumes))].Name] = at
	}
	if v := base.Volumes[claim]; v != "" && rng.IntN(4) > 0 {
		mine[v] = f.At
	}
	denied[claim] = mine
	f.Denied = denied
	in.InFlight = f
	return in
}

// withUIDSharedAcrossClasses is in's state with a copy of one of its claims, under another name
// and in another Immediate class, carrying the same uid.
func withUIDSharedAcrossClasses(rng *rand.Rand, in PlanInput) *clusterstate.State {
	claims := in.State.Claims()
	if len(claims) == 0 {
		return in.State
	}
	c := claims[rng.IntN(len(claims))].DeepCopy()
	c.Name += "-twin"
	class := "a"
	if storage.ClaimClass(c) == "a" {
		class = "b"
	}
	c.Spec.StorageClassName = &class
	delete(c.Annotations, storage.AnnBetaStorageClass)
	return in.State.WithClaims(append(slices.Clone(claims), c))
}

// sharesUID reports whether two claims of in's state share a uid.
func sharesUID(in PlanInput) bool {
	seen := map[types.UID]bool{}
	for _, c := range in.State.Claims() {
		if seen[c.UID] {
			return true
		}
		seen[c.UID] = true
	}
	return false
}

// plannedClasses counts the classes of the claims a plan considered.
func plannedClasses(p PoolPlan) int {
	classes := map[string]bool{}
	for _, c := range p.Claims {
		classes[storage.ClaimClass(c)] = true
	}
	return len(classes)
}

// BenchmarkReplanClaim times the plan without one pair of a claim (the volume the plan gives it),
// made by Plan of the whole input and by ReplanClaim from the plan with the pair, on
// scaleCluster's 10,000 pending claims over 10,000 volumes, with the pending claims and free
// volumes of the Immediate class spread over 1 or 8 Immediate classes. Results are in
// docs/benchmarks.md ("One explanation").
func BenchmarkReplanClaim(b *testing.B) {
	ctx := context.Background()
	for _, classes := range []int{1, 8} {
		bd := scalePlanner(b, spreadOverClasses(scaleCluster(10_000, 10_000), classes)...)
		in, err := bd.planInput(ctx)
		if err != nil {
			b.Fatal(err)
		}
		base := Plan(in)
		var claim types.UID
		for _, c := range base.Claims {
			if base.Volumes[c.UID] != "" {
				claim = c.UID
				break
			}
		}
		denied := in
		denied.InFlight.Denied = maps.Clone(in.InFlight.Denied)
		denied.InFlight.Denied[claim] = map[string]time.Time{base.Volumes[claim]: in.InFlight.At}
		b.Run(fmt.Sprintf("classes=%d/Plan", classes), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Plan(denied)
			}
		})
		b.Run(fmt.Sprintf("classes=%d/ReplanClaim", classes), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ReplanClaim(denied, base, claim)
			}
		})
	}
}

// spreadOverClasses gives the pending claims and free volumes of scaleCluster's objs, in turn,
// the Immediate classes "standard", "standard-1", ... (n of them), and adds those classes.
func spreadOverClasses(objs []client.Object, n int) []client.Object {
	var claims, volumes int
	name := func(i int) string {
		if i%n == 0 {
			return "standard"
		}
		return fmt.Sprintf("standard-%d", i%n)
	}
	for _, o := range objs {
		switch o := o.(type) {
		case *corev1.PersistentVolume:
			if strings.HasPrefix(o.Name, "pv-free-") {
				o.Spec.StorageClassName = name(volumes)
				volumes++
			}
		case *corev1.PersistentVolumeClaim:
			if strings.HasPrefix(o.Name, "pending-") {
				cls := name(claims)
				o.Spec.StorageClassName = &cls
				claims++
			}
		}
	}
	for k := 1; k < n; k++ {
		objs = append(objs, class(fmt.Sprintf("standard-%d", k), "csi.example.com", storagev1.VolumeBindingImmediate))
	}
	return objs
}
