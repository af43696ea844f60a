package binder

import (
	"cmp"
	"math"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// assignLists chooses volumes for pending claims all at once: claims[c] may take the volumes
// lists[listOf[c]], most preferred first (assignVolumeOrder; the planner's poolLists builds them,
// from checks of class, VolumeAttributesClass, access modes, volume mode, capacity, selector, node
// affinity and policy). It returns, for each claim index that gets a volume, the volume index.
//
// Upstream binds one claim at a time to its smallest fitting volume, so a small claim can take the
// only volume a later claim could use and leave that claim Pending for good. assignLists instead
// returns a maximum matching: every claim that some assignment can satisfy gets a volume. Among
// maximum matchings it leans towards small volumes without minimising anything (that would take a
// weighted matching): it starts from an upstream-like greedy choice, each claim taking its most
// preferred free volume, and rearranges that only along augmenting paths, which keep every matched
// claim matched. So where the greedy choice strands nobody it is the answer, unchanged. Volumes
// are preferred with the fewest access modes first, then the smallest capacity (upstream's order:
// access-mode groups, then size), then by name, so that big and versatile volumes stay free for
// the claims that need them.
//
// Claims that fit the same volumes may share a list, which changes nothing in the result: the
// planner's pools have thousands of claims asking alike, and sharing lets it build each list
// once, the greedy start and each phase's breadth-first search scan it once, and the relation take
// the memory of its distinct lists rather than of all its pairs. Missing storage requests and
// capacities count as zero. The result depends only on the inputs, never on map iteration order,
// and is never nil.
func assignLists(claims []*corev1.PersistentVolumeClaim, volumes int, lists [][]int32, listOf []int32) map[int]int {
	g := &assignGraph{
		adj:      make([][]int32, len(claims)),
		listOf:   listOf,
		scanned:  make([]bool, len(lists)),
		volumeOf: make([]int32, len(claims)),
		claimOf:  make([]int32, volumes),
		depth:    make([]int32, len(claims)),
		next:     make([]int, len(claims)),
	}
	for c := range claims {
		g.volumeOf[c] = -1
		g.adj[c] = lists[listOf[c]]
	}
	for v := range g.claimOf {
		g.claimOf[v] = -1
	}
	order := assignClaimOrder(claims)
	// Volumes are only taken during the greedy start, so a claim's first free volume is never
	// before the one the last claim with the same list took: each list keeps where that was.
	start := make([]int, len(lists))
	for _, c := range order {
		g.takeFirstFree(c, start)
	}
	// Hopcroft-Karp: each phase flips a maximal set of shortest augmenting paths, so at most
	// O(sqrt(claims)) phases of O(pairs) each. Plain one-path-at-a-time search (Kuhn) is cubic on
	// dense pools where the greedy start strands many claims.
	for g.layer(order) {
		clear(g.next)
		for _, c := range order {
			if g.volumeOf[c] < 0 {
				g.augment(c)
			}
		}
	}
	return g.result()
}

// assignUnreached marks a claim outside the current phase's layered graph.
const assignUnreached = math.MaxInt32

// assignGraph is the fits relation computed once: adj[c] lists the volumes claim c fits, most
// preferred first, and is lists[listOf[c]] of assignLists. Volume indices are int32 to halve the
// memory of dense instances (a million pairs for 1,000 x 1,000).
type assignGraph struct {
	adj      [][]int32
	listOf   []int32
	volumeOf []int32 // claim -> matched volume, or -1
	claimOf  []int32 // volume -> matched claim, or -1

	// Per phase: depth[c] is the length, in claims, of the shortest alternating path from an
	// unmatched claim to c, and limit the depth at which a free volume is first reachable.
	// next[c] is where c resumes its scan of adj[c]; it only moves forward within a phase, which
	// bounds a phase by one pass over all lists. scanned[l] records that the breadth-first
	// search has scanned list l.
	depth   []int32
	limit   int32
	next    []int
	scanned []bool
	queue   []int32
	stack   []int32
}

// takeFirstFree gives claim c its most preferred free volume, scanning its list from start.
func (g *assignGraph) takeFirstFree(c int32, start []int) {
	l := g.listOf[c]
	adj := g.adj[c]
	for i := start[l]; i < len(adj); i++ {
		if v := adj[i]; g.claimOf[v] < 0 {
			g.claimOf[v] = c
			g.volumeOf[c] = v
			start[l] = i + 1
			return
		}
	}
	start[l] = len(adj)
}

// layer computes depth by breadth-first search from all unmatched claims and reports whether any
// free volume is reachable, that is whether the matching can still grow.
func (g *assignGraph) layer(order []int32) bool {
	queue := g.queue[:0]
	for _, c := range order {
		g.depth[c] = assignUnreached
		if g.volumeOf[c] < 0 {
			g.depth[c] = 0
			queue = append(queue, c)
		}
	}
	g.limit = assignUnreached
	clear(g.scanned)
	for i := 0; i < len(queue) && g.depth[queue[i]] <= g.limit; i++ {
		c := queue[i]
		// A list scanned before, at this depth or a smaller one, has given every owner in it
		// a depth and found any free volume in it: scanning it again would change nothing.
		if g.scanned[g.listOf[c]] {
			continue
		}
		g.scanned[g.listOf[c]] = true
		for _, v := range g.adj[c] {
			owner := g.claimOf[v]
			switch {
			case owner < 0:
				g.limit = g.depth[c]
			case g.depth[owner] == assignUnreached:
				g.depth[owner] = g.depth[c] + 1
				queue = append(queue, owner)
			}
		}
	}
	g.queue = queue
	return g.limit != assignUnreached
}

// augment searches depth first, volumes in preference order, for a shortest alternating path from
// the unmatched claim root to a free volume, and flips it if found. It keeps its own stack so that
// paths through thousands of claims cannot overflow the goroutine stack. A claim from which no
// path leads on is dropped from the phase so that no later search repeats the work.
func (g *assignGraph) augment(root int32) {
	stack := append(g.stack[:0], root)
	defer func() { g.stack = stack[:0] }()
	for len(stack) > 0 {
		c := stack[len(stack)-1]
		descended := false
		for !descended && g.next[c] < len(g.adj[c]) {
			v := g.adj[c][g.next[c]]
			g.next[c]++
			owner := g.claimOf[v]
			switch {
			case owner < 0 && g.depth[c] == g.limit:
				g.flip(stack, v)
				return
			case owner >= 0 && g.depth[owner] == g.depth[c]+1:
				stack = append(stack, owner)
				descended = true
			}
		}
		if !descended {
			g.depth[c] = assignUnreached
			stack = stack[:len(stack)-1]
		}
	}
}

// flip gives the last claim on path the free volume v and every earlier claim the volume its
// successor held, which is the volume through which the search reached that successor.
func (g *assignGraph) flip(path []int32, v int32) {
	for i := len(path) - 1; i >= 0; i-- {
		c := path[i]
		held := g.volumeOf[c]
		g.volumeOf[c] = v
		g.claimOf[v] = c
		v = held
	}
}

func (g *assignGraph) result() map[int]int {
	out := make(map[int]int)
	for c, v := range g.volumeOf {
		if v >= 0 {
			out[c] = int(v)
		}
	}
	return out
}

// assignClaimOrder lists the claims largest request first: when capacity is all that
// limits the fit, a larger claim fits fewer volumes, and letting it choose first makes the greedy
// start already maximum. Namespace, name and index break ties so the result is reproducible.
func assignClaimOrder(claims []*corev1.PersistentVolumeClaim) []int32 {
	type key struct {
		request         resource.Quantity
		namespace, name string
		index           int32
	}
	keys := make([]key, 0, len(claims))
	for c, claim := range claims {
		keys = append(keys, key{
			request:   claim.Spec.Resources.Requests[corev1.ResourceStorage],
			namespace: claim.Namespace,
			name:      claim.Name,
			index:     int32(c),
		})
	}
	slices.SortFunc(keys, func(a, b key) int {
		if d := b.request.Cmp(a.request); d != 0 {
			return d
		}
		return cmp.Or(
			cmp.Compare(a.namespace, b.namespace),
			cmp.Compare(a.name, b.name),
			cmp.Compare(a.index, b.index),
		)
	})
	order := make([]int32, len(keys))
	for i, k := range keys {
		order[i] = k.index
	}
	return order
}

// assignVolumeOrder lists the volumes most preferred first: fewest access modes (upstream
// searches its access-mode groups in that order, so a plain RWO volume is used before a
// multi-mode one), then smallest capacity, then name, then index.
func assignVolumeOrder(volumes []*corev1.PersistentVolume) []int32 {
	type key struct {
		capacity resource.Quantity
		modes    int
		name     string
		index    int32
	}
	keys := make([]key, 0, len(volumes))
	for v, volume := range volumes {
		keys = append(keys, key{
			capacity: volume.Spec.Capacity[corev1.ResourceStorage],
			modes:    len(volume.Spec.AccessModes),
			name:     volume.Name,
			index:    int32(v),
		})
	}
	slices.SortFunc(keys, func(a, b key) int {
		if d := cmp.Compare(a.modes, b.modes); d != 0 {
			return d
		}
		if d := a.capacity.Cmp(b.capacity); d != 0 {
			return d
		}
		return cmp.Or(
			cmp.Compare(a.name, b.name),
			cmp.Compare(a.index, b.index),
		)
	})
	order := make([]int32, len(keys))
	for i, k := range keys {
		order[i] = k.index
	}
	return order
}
