package binder

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// assignPV builds a volume offering size ("" leaves capacity nil) with the given modifiers.
func assignPV(name, size string, opts ...func(*corev1.PersistentVolume)) *corev1.PersistentVolume {
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}}
	pv.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	if size != "" {
		pv.Spec.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}
	}
	for _, o := range opts {
		o(pv)
	}
	return pv
}

// assignPVC builds a claim "namespace/name" (or "name" in default), of uid "namespace/name",
// requesting size ("" leaves requests nil).
func assignPVC(nsName, size string, opts ...func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
	ns, name, found := strings.Cut(nsName, "/")
	if !found {
		ns, name = "default", nsName
	}
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "/" + name)}}
	pvc.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	if size != "" {
		pvc.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}
	}
	for _, o := range opts {
		o(pvc)
	}
	return pvc
}

func assignLabel(key, value string) func(*corev1.PersistentVolume) {
	return func(pv *corev1.PersistentVolume) {
		if pv.Labels == nil {
			pv.Labels = map[string]string{}
		}
		pv.Labels[key] = value
	}
}

func assignModes(modes ...corev1.PersistentVolumeAccessMode) func(*corev1.PersistentVolume) {
	return func(pv *corev1.PersistentVolume) { pv.Spec.AccessModes = modes }
}

func assignSelector(key, value string) func(*corev1.PersistentVolumeClaim) {
	return func(pvc *corev1.PersistentVolumeClaim) {
		pvc.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{key: value}}
	}
}

// assignSizeFits is what the planner asks of a pair, reduced to what the tests vary: capacity,
// selector and access modes.
func assignSizeFits(claims []*corev1.PersistentVolumeClaim, volumes []*corev1.PersistentVolume) func(c, v int) bool {
	return func(c, v int) bool {
		claim, volume := claims[c], volumes[v]
		request := claim.Spec.Resources.Requests[corev1.ResourceStorage]
		capacity := volume.Spec.Capacity[corev1.ResourceStorage]
		if capacity.Cmp(request) < 0 {
			return false
		}
		if claim.Spec.Selector != nil {
			sel, err := metav1.LabelSelectorAsSelector(claim.Spec.Selector)
			if err != nil || !sel.Matches(labels.Set(volume.Labels)) {
				return false
			}
		}
		for _, m := range claim.Spec.AccessModes {
			found := false
			for _, have := range volume.Spec.AccessModes {
				found = found || have == m
			}
			if !found {
				return false
			}
		}
		return true
	}
}

// assignDense runs the matching the planner runs (assignLists) over a dense relation: each claim
// its own list of the volumes fits says it may take, in preference order (assignVolumeOrder),
// fits asked once per pair.
func assignDense(claims []*corev1.PersistentVolumeClaim, volumes []*corev1.PersistentVolume, fits func(c, v int) bool) map[int]int {
	order := assignVolumeOrder(volumes)
	lists := make([][]int32, len(claims))
	listOf := make([]int32, len(claims))
	row := make([]int32, 0, len(order))
	for c := range claims {
		listOf[c] = int32(c)
		row = row[:0]
		for _, v := range order {
			if fits(c, int(v)) {
				row = append(row, v)
			}
		}
		lists[c] = slices.Clone(row)
	}
	return assignLists(claims, len(volumes), lists, listOf)
}

// planPool runs the planner's pass over a pool (poolPlanner.planPool: the lists of poolLists,
// matched by assignLists) for claims of one class over its free volumes, and returns for each
// claim index that gets a volume the volume's index. Volumes without a phase count as free (as
// Pending ones do in active mode).
func planPool(claims []*corev1.PersistentVolumeClaim, volumes []*corev1.PersistentVolume) map[int]int {
	pl := &poolPlanner{pendingFree: true, fits: newFitCache()}
	pend := make([]pending, len(claims))
	for i, c := range claims {
		pend[i] = pending{claim: c}
	}
	plan := map[types.UID]string{}
	pl.planPool(pend, volumes, plan)
	index := map[string]int{}
	for v, vol := range volumes {
		index[vol.Name] = v
	}
	out := map[int]int{}
	for c, claim := range claims {
		if name, ok := plan[claim.UID]; ok {
			out[c] = index[name]
		}
	}
	return out
}

// assignCheckMatching fails t unless got pairs in-range claims with distinct volumes they fit.
func assignCheckMatching(t *testing.T, got map[int]int, nClaims, nVolumes int, fits func(c, v int) bool) {
	t.Helper()
	if got == nil {
		t.Fatal("the matching is a nil map")
	}
	usedBy := map[int]int{}
	for c, v := range got {
		if c < 0 || c >= nClaims || v < 0 || v >= nVolumes {
			t.Fatalf("pair %d->%d out of range (%d claims, %d volumes)", c, v, nClaims, nVolumes)
		}
		if other, dup := usedBy[v]; dup {
			t.Errorf("volume %d assigned to claims %d and %d", v, other, c)
		}
		usedBy[v] = c
		if !fits(c, v) {
			t.Errorf("claim %d assigned volume %d it does not fit", c, v)
		}
	}
}

// assignBruteMax is the size of a maximum matching by exhaustive search over claims and subsets
// of used volumes, for up to ~10 volumes.
func assignBruteMax(nClaims, nVolumes int, fits func(c, v int) bool) int {
	memo := make([]int, (nClaims+1)<<nVolumes)
	for c := nClaims - 1; c >= 0; c-- {
		for used := range 1 << nVolumes {
			best := memo[(c+1)<<nVolumes|used]
			for v := range nVolumes {
				if used&(1<<v) == 0 && fits(c, v) {
					best = max(best, 1+memo[(c+1)<<nVolumes|used|1<<v])
				}
			}
			memo[c<<nVolumes|used] = best
		}
	}
	return memo[0]
}

// TestPlanPool: the planner's pass over a pool of free volumes gives every claim that some
// assignment can satisfy a volume, leaning towards small and plain volumes as upstream does.
func TestPlanPool(t *testing.T) {
	rwo, rox, rwx := corev1.ReadWriteOnce, corev1.ReadOnlyMany, corev1.ReadWriteMany
	tests := map[string]struct {
		claims  []*corev1.PersistentVolumeClaim
		volumes []*corev1.PersistentVolume
		want    map[string]string // claim name -> volume name
	}{
		"upstream strands the selector claim; the planner does not": {
			claims: []*corev1.PersistentVolumeClaim{
				assignPVC("c1", "1Gi"),
				assignPVC("c2", "5Gi", assignSelector("tier", "fast")),
			},
			volumes: []*corev1.PersistentVolume{
				assignPV("v1", "5Gi", assignLabel("tier", "fast")),
				assignPV("v2", "10Gi"),
			},
			want: map[string]string{"c1": "v2", "c2": "v1"},
		},
		"larger claim moved along an augmenting path": {
			// Largest first, c1 takes v1 as its smallest fit; only moving it frees v1 for c2.
			claims: []*corev1.PersistentVolumeClaim{
				assignPVC("c1", "4Gi"),
				assignPVC("c2", "2Gi", assignSelector("tier", "fast")),
			},
			volumes: []*corev1.PersistentVolume{
				assignPV("v1", "5Gi", assignLabel("tier", "fast")),
				assignPV("v2", "10Gi"),
			},
			want: map[string]string{"c1": "v2", "c2": "v1"},
		},
		"smallest fitting volume when there is slack": {
			claims: []*corev1.PersistentVolumeClaim{assignPVC("c", "1Gi")},
			volumes: []*corev1.PersistentVolume{
				assignPV("big", "10Gi"), assignPV("exact", "1Gi"), assignPV("mid", "2Gi"),
			},
			want: map[string]string{"c": "exact"},
		},
		"fewer access modes outrank capacity, as upstream's access-mode groups do": {
			claims: []*corev1.PersistentVolumeClaim{assignPVC("c", "1Gi")},
			volumes: []*corev1.PersistentVolume{
				assignPV("a", "10Gi"), assignPV("b", "5Gi", assignModes(rwo, rox, rwx)),
			},
			want: map[string]string{"c": "a"},
		},
		"smallest capacity within the fewest-modes group": {
			claims: []*corev1.PersistentVolumeClaim{assignPVC("c", "1Gi")},
			volumes: []*corev1.PersistentVolume{
				assignPV("a", "10Gi"), assignPV("b", "2Gi"), assignPV("wide", "1Gi", assignModes(rwo, rwx)),
			},
			want: map[string]string{"c": "b"},
		},
		"fewest access modes breaks a capacity tie": {
			claims: []*corev1.PersistentVolumeClaim{assignPVC("c", "1Gi")},
			volumes: []*corev1.PersistentVolume{
				assignPV("a", "5Gi", assignModes(rwo, rox, rwx)),
				assignPV("b", "5Gi", assignModes(rwo, rwx)),
				assignPV("c", "5Gi"),
			},
			want: map[string]string{"c": "c"},
		},
		"name breaks a full tie": {
			claims: []*corev1.PersistentVolumeClaim{assignPVC("c", "1Gi")},
			volumes: []*corev1.PersistentVolume{
				assignPV("pv-b", "5Gi"), assignPV("pv-c", "5Gi"), assignPV("pv-a", "5Gi"),
			},
			want: map[string]string{"c": "pv-a"},
		},
		"equal requests go first by namespace then name": {
			claims: []*corev1.PersistentVolumeClaim{
				assignPVC("ns-b/a", "3Gi"), assignPVC("ns-a/z", "3Gi"), assignPVC("ns-a/y", "3Gi"),
			},
			volumes: []*corev1.PersistentVolume{
				assignPV("large", "20Gi"), assignPV("medium", "10Gi"), assignPV("small", "5Gi"),
			},
			want: map[string]string{"y": "small", "z": "medium", "a": "large"},
		},
		"claim that fits nothing is left out": {
			claims:  []*corev1.PersistentVolumeClaim{assignPVC("huge", "20Gi"), assignPVC("ok", "1Gi")},
			volumes: []*corev1.PersistentVolume{assignPV("v", "10Gi")},
			want:    map[string]string{"ok": "v"},
		},
		"fewer volumes than claims gets the maximum": {
			claims: []*corev1.PersistentVolumeClaim{
				assignPVC("c1", "15Gi"),
				assignPVC("c2", "1Gi"),
				assignPVC("c3", "5Gi", assignSelector("tier", "fast")),
				assignPVC("c4", "1Gi", assignSelector("tier", "fast")),
				assignPVC("c5", "30Gi"),
			},
			volumes: []*corev1.PersistentVolume{
				assignPV("v1", "5Gi", assignLabel("tier", "fast")),
				assignPV("v2", "10Gi"),
				assignPV("v3", "20Gi"),
			},
			want: map[string]string{"c1": "v3", "c2": "v2", "c3": "v1"},
		},
		"missing request and capacity count as zero": {
			claims:  []*corev1.PersistentVolumeClaim{assignPVC("c", "")},
			volumes: []*corev1.PersistentVolume{assignPV("a-one", "1Gi"), assignPV("z-none", "")},
			want:    map[string]string{"c": "z-none"},
		},
		"no claims": {
			volumes: []*corev1.PersistentVolume{assignPV("v", "1Gi")},
			want:    map[string]string{},
		},
		"no volumes": {
			claims: []*corev1.PersistentVolumeClaim{assignPVC("c", "1Gi")},
			want:   map[string]string{},
		},
		"nothing at all": {want: map[string]string{}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			fits := assignSizeFits(tt.claims, tt.volumes)
			got := planPool(tt.claims, tt.volumes)
			assignCheckMatching(t, got, len(tt.claims), len(tt.volumes), fits)
			named := map[string]string{}
			for c, v := range got {
				named[tt.claims[c].Name] = tt.volumes[v].Name
			}
			if !maps.Equal(named, tt.want) {
				t.Errorf("plan %v, want %v", named, tt.want)
			}
			if want := assignBruteMax(len(tt.claims), len(tt.volumes), fits); len(got) != want {
				t.Errorf("assigned %d claims, maximum is %d", len(got), want)
			}
		})
	}
}

func TestPlanPoolExactPairs(t *testing.T) {
	const n = 200
	claims := make([]*corev1.PersistentVolumeClaim, n)
	volumes := make([]*corev1.PersistentVolume, n)
	for i := range n {
		size := fmt.Sprintf("%dGi", i+1)
		claims[i] = assignPVC(fmt.Sprintf("c%d", i+1), size)
		volumes[i] = assignPV(fmt.Sprintf("v%d", i+1), size)
	}
	// Shuffled input order checks that the result maps input indices, not preference ranks.
	rng := rand.New(rand.NewPCG(7, 7))
	rng.Shuffle(n, func(i, j int) { claims[i], claims[j] = claims[j], claims[i] })
	rng.Shuffle(n, func(i, j int) { volumes[i], volumes[j] = volumes[j], volumes[i] })

	fits := assignSizeFits(claims, volumes)
	got := planPool(claims, volumes)
	assignCheckMatching(t, got, n, n, fits)
	if len(got) != n {
		t.Fatalf("assigned %d of %d claims", len(got), n)
	}
	for c, v := range got {
		request := claims[c].Spec.Resources.Requests[corev1.ResourceStorage]
		capacity := volumes[v].Spec.Capacity[corev1.ResourceStorage]
		if request.Cmp(capacity) != 0 {
			t.Errorf("claim %s (%s) got volume %s (%s), want its exact size",
				claims[c].Name, request.String(), volumes[v].Name, capacity.String())
		}
	}
}

// TestAssignLongChain forces one augmenting path through every claim: claim i fits volumes i-1
// and i, the greedy start hands each claim i its preferred volume i-1, and claim 0, taken last,
// fits only volume 0. A recursive search would be 5,000 frames deep.
func TestAssignLongChain(t *testing.T) {
	const n = 5000
	claims := make([]*corev1.PersistentVolumeClaim, n)
	volumes := make([]*corev1.PersistentVolume, n)
	for i := range n {
		// Requests decrease with i from claim 1 on; claim 0 requests the least and goes last.
		claims[i] = assignPVC(fmt.Sprintf("c%05d", i), fmt.Sprintf("%dMi", (n-i)%n))
		volumes[i] = assignPV(fmt.Sprintf("v%05d", i), fmt.Sprintf("%dGi", i+1))
	}
	fits := func(c, v int) bool { return v == c || v == c-1 }
	got := assignDense(claims, volumes, fits)
	assignCheckMatching(t, got, n, n, fits)
	for c := range n {
		if v, ok := got[c]; !ok || v != c {
			t.Fatalf("claim %d got volume %d (assigned %v), want %d", c, v, ok, c)
		}
	}
}

// TestAssignRandomMaximum compares the matching with exhaustive search on small random instances.
func TestAssignRandomMaximum(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 300 {
		nc, nv := rng.IntN(8), rng.IntN(8)
		claims := make([]*corev1.PersistentVolumeClaim, nc)
		volumes := make([]*corev1.PersistentVolume, nv)
		for c := range claims {
			claims[c] = assignPVC(fmt.Sprintf("ns%d/c%d", rng.IntN(2), rng.IntN(4)), fmt.Sprintf("%dGi", rng.IntN(4)))
		}
		for v := range volumes {
			volumes[v] = assignPV(fmt.Sprintf("v%d", rng.IntN(4)), fmt.Sprintf("%dGi", rng.IntN(4)))
		}
		density := rng.Float64()
		fitsMatrix := make([][]bool, nc)
		for c := range fitsMatrix {
			fitsMatrix[c] = make([]bool, nv)
			for v := range fitsMatrix[c] {
				fitsMatrix[c][v] = rng.Float64() < density
			}
		}
		truth := func(c, v int) bool { return fitsMatrix[c][v] }

		t.Run(fmt.Sprintf("instance %d (%dx%d)", i, nc, nv), func(t *testing.T) {
			got := assignDense(claims, volumes, truth)
			assignCheckMatching(t, got, nc, nv, truth)
			if want := assignBruteMax(nc, nv, truth); len(got) != want {
				t.Errorf("assigned %d claims, maximum is %d; got %v", len(got), want, got)
			}
			if again := assignDense(claims, volumes, truth); !maps.Equal(got, again) {
				t.Errorf("second run gave %v, first %v", again, got)
			}
		})
	}
}

// TestAssignExhaustive4x4 tries every fits relation between four claims and four volumes. Unlike
// random instances it reliably catches searches that wrongly skip volumes visited by an earlier,
// successful augmentation, which needs a specific shape of at least 4 x 4 to show.
func TestAssignExhaustive4x4(t *testing.T) {
	const n = 4
	claims := make([]*corev1.PersistentVolumeClaim, n)
	volumes := make([]*corev1.PersistentVolume, n)
	for i := range n {
		claims[i] = assignPVC(fmt.Sprintf("c%d", i), "1Gi")
		volumes[i] = assignPV(fmt.Sprintf("v%d", i), "1Gi")
	}
	for relation := range 1 << (n * n) {
		fits := func(c, v int) bool { return relation>>(c*n+v)&1 == 1 }
		got := assignDense(claims, volumes, fits)
		if want := assignBruteMax(n, n, fits); len(got) != want {
			t.Fatalf("relation %016b: assigned %d claims %v, maximum is %d", relation, len(got), got, want)
		}
		assignCheckMatching(t, got, n, n, fits)
	}
}

func BenchmarkAssign1000(b *testing.B) {
	const n = 1000
	claims := make([]*corev1.PersistentVolumeClaim, n)
	volumes := make([]*corev1.PersistentVolume, n)
	for i := range n {
		claims[i] = assignPVC(fmt.Sprintf("c%d", i), fmt.Sprintf("%dGi", 1+i*37%100))
		volumes[i] = assignPV(fmt.Sprintf("v%d", i), fmt.Sprintf("%dGi", 1+i*53%200))
	}
	fits := func(c, v int) bool { return true }
	b.ReportAllocs()
	for b.Loop() {
		if got := assignDense(claims, volumes, fits); len(got) != n {
			b.Fatalf("assigned %d of %d", len(got), n)
		}
	}
}

func BenchmarkAssignSparse5000(b *testing.B) {
	const n = 5000
	claims := make([]*corev1.PersistentVolumeClaim, n)
	volumes := make([]*corev1.PersistentVolume, n)
	for i := range n {
		claims[i] = assignPVC(fmt.Sprintf("c%d", i), fmt.Sprintf("%dGi", 1+i*37%100))
		volumes[i] = assignPV(fmt.Sprintf("v%d", i), fmt.Sprintf("%dGi", 1+i*53%200))
	}
	// A cheap hash keeps about one pair in 500 fitting: ~10 volumes per claim, spread at random.
	fits := func(c, v int) bool {
		x := uint64(c)*n + uint64(v) + 0x9e3779b97f4a7c15
		x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
		x = (x ^ x>>27) * 0x94d049bb133111eb
		return (x^x>>31)%500 == 0
	}
	b.ReportAllocs()
	for b.Loop() {
		assignDense(claims, volumes, fits)
	}
}

// TestAssignSharedListsAgree: claims that share one adjacency list (assignLists, as the planner
// passes them) get exactly what the dense relation gives them in the straightforward matching (oracleAssign),
// on random instances where many claims are of a few kinds, some pairs are taken out for single
// claims (as binds in flight and denied pairs are), and requests tie.
func TestAssignSharedListsAgree(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 16))
	for i := range 500 {
		nc, nv, nk := rng.IntN(60), rng.IntN(40), 1+rng.IntN(6)
		claims := make([]*corev1.PersistentVolumeClaim, nc)
		volumes := make([]*corev1.PersistentVolume, nv)
		kindOf := make([]int, nc)
		for c := range claims {
			kindOf[c] = rng.IntN(nk)
			claims[c] = assignPVC(fmt.Sprintf("ns%d/c%03d", rng.IntN(2), c), fmt.Sprintf("%dGi", 1+kindOf[c]%3))
		}
		for v := range volumes {
			volumes[v] = assignPV(fmt.Sprintf("v%03d", v), fmt.Sprintf("%dGi", 1+rng.IntN(4)),
				assignModes([]corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce, corev1.ReadWriteMany}[:1+rng.IntN(2)]...))
		}
		density := rng.Float64()
		kindFits := make([][]bool, nk)
		for k := range kindFits {
			kindFits[k] = make([]bool, nv)
			for v := range kindFits[k] {
				kindFits[k][v] = rng.Float64() < density
			}
		}
		// A few claims have lists of their own: their kind's less some volumes.
		own := map[int][]bool{}
		for c := range claims {
			if rng.IntN(10) == 0 {
				own[c] = slices.Clone(kindFits[kindOf[c]])
				for v := range own[c] {
					own[c][v] = own[c][v] && rng.IntN(3) > 0
				}
			}
		}
		fits := func(c, v int) bool {
			if o, ok := own[c]; ok {
				return o[v]
			}
			return kindFits[kindOf[c]][v]
		}
		order := assignVolumeOrder(volumes)
		listFor := func(fits func(v int) bool) []int32 {
			var l []int32
			for _, v := range order {
				if fits(int(v)) {
					l = append(l, v)
				}
			}
			return l
		}
		var lists [][]int32
		kindList := map[int]int32{}
		listOf := make([]int32, nc)
		for c := range claims {
			if o, ok := own[c]; ok {
				lists = append(lists, listFor(func(v int) bool { return o[v] }))
				listOf[c] = int32(len(lists) - 1)
				continue
			}
			l, ok := kindList[kindOf[c]]
			if !ok {
				lists = append(lists, listFor(func(v int) bool { return kindFits[kindOf[c]][v] }))
				l = int32(len(lists) - 1)
				kindList[kindOf[c]] = l
			}
			listOf[c] = l
		}
		got := assignLists(claims, nv, lists, listOf)
		if want := oracleAssign(claims, volumes, fits); !maps.Equal(got, want) {
			t.Fatalf("instance %d (%d claims of %d kinds, %d volumes): shared lists give %v, the dense relation %v", i, nc, nk, nv, got, want)
		}
	}
}
