package binder

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvguard/pvguard/storage"
)

// A straightforward planner, kept as the oracle that the planner (runPlan) must agree with: it
// deep-copies its lists, searches the pre-bound volumes of every claim through every volume of
// the class, asks fitsUnbound (parsing afresh) about every (claim, free volume) pair and hands
// Assign the dense relation. It reads the binds in flight and the denied pairs from a snapshot
// of the binder's ledger.

// oraclePlan returns the plan the straightforward planner makes, without recording it.
func oraclePlan(ctx context.Context, b *Binder) (map[types.UID]string, error) {
	var pvcs corev1.PersistentVolumeClaimList
	var pvs corev1.PersistentVolumeList
	if err := b.o.Cache.List(ctx, &pvcs); err != nil {
		return nil, fmt.Errorf("listing claims: %w", err)
	}
	if err := b.o.Cache.List(ctx, &pvs); err != nil {
		return nil, fmt.Errorf("listing volumes: %w", err)
	}
	classes, err := b.classes(ctx)
	if err != nil {
		return nil, err
	}
	byName := map[string]int{}
	for i, sc := range classes {
		byName[sc.Name] = i
	}

	type pending struct {
		claim     *corev1.PersistentVolumeClaim
		node      *corev1.Node
		scheduled bool
	}
	claimsByClass := map[string][]pending{}
	for i := range pvcs.Items {
		c := &pvcs.Items[i]
		if _, done := c.Annotations[storage.AnnBindCompleted]; done || c.Spec.VolumeName != "" || c.DeletionTimestamp != nil {
			continue
		}
		if i, ok := byName[storage.ClaimClass(c)]; ok && isDelayBinding(c, classes[i]) {
			continue
		}
		p := pending{claim: c}
		if nodeName, ok := c.Annotations[storage.AnnSelectedNode]; ok {
			p.scheduled = true
			if p.node, err = b.node(ctx, nodeName); err != nil {
				return nil, err
			}
		}
		claimsByClass[storage.ClaimClass(c)] = append(claimsByClass[storage.ClaimClass(c)], p)
	}
	volumesByClass := map[string][]*corev1.PersistentVolume{}
	for i := range pvs.Items {
		v := &pvs.Items[i]
		if v.DeletionTimestamp != nil {
			continue
		}
		volumesByClass[storage.VolumeClass(v)] = append(volumesByClass[storage.VolumeClass(v)], v)
	}

	plan := map[types.UID]string{}
	inFlight := b.ledger.snapshot(time.Now())
	for _, class := range sortedKeys(claimsByClass) {
		claims := claimsByClass[class]
		sort.Slice(claims, func(i, j int) bool {
			return claims[i].claim.Namespace+"/"+claims[i].claim.Name < claims[j].claim.Namespace+"/"+claims[j].claim.Name
		})
		volumes := volumesByClass[class]
		usable := func(c *corev1.PersistentVolumeClaim, v *corev1.PersistentVolume) bool {
			uid, reserved := inFlight.Reserved[v.Name]
			at, denied := inFlight.Denied[c.UID][v.Name]
			return (!reserved || uid == c.UID) && !(denied && time.Since(at) < forbidTTL)
		}
		used := map[string]bool{}
		var poolClaims []pending
		for _, p := range claims {
			plan[p.claim.UID] = ""
			for _, withUID := range []bool{true, false} {
				for _, v := range volumes {
					if plan[p.claim.UID] == "" && !used[v.Name] && storage.ClaimRefNames(v, p.claim) && (v.Spec.ClaimRef.UID != "") == withUID &&
						usable(p.claim, v) && fitsUnbound(p.claim, v, p.node, p.scheduled, b.pendingFree()) {
						plan[p.claim.UID], used[v.Name] = v.Name, true
					}
				}
			}
			if plan[p.claim.UID] == "" {
				poolClaims = append(poolClaims, p)
			}
		}
		var poolVolumes []*corev1.PersistentVolume
		for _, v := range volumes {
			if !used[v.Name] && v.Spec.ClaimRef == nil {
				poolVolumes = append(poolVolumes, v)
			}
		}
		claimObjs := make([]*corev1.PersistentVolumeClaim, len(poolClaims))
		for i, p := range poolClaims {
			claimObjs[i] = p.claim
		}
		for ci, vi := range oracleAssign(claimObjs, poolVolumes, func(ci, vi int) bool {
			p, v := poolClaims[ci], poolVolumes[vi]
			return usable(p.claim, v) && fitsUnbound(p.claim, v, p.node, p.scheduled, b.pendingFree())
		}) {
			plan[poolClaims[ci].claim.UID] = poolVolumes[vi].Name
		}
	}
	return plan, nil
}

func oracleAssign(claims []*corev1.PersistentVolumeClaim, volumes []*corev1.PersistentVolume, fits func(c, v int) bool) map[int]int {
	g := oracleNewGraph(claims, volumes, fits)
	order := oracleClaimOrder(claims)
	for _, c := range order {
		g.takeFirstFree(c)
	}
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

const oracleUnreached = math.MaxInt32

type oracleGraph struct {
	adj      [][]int32
	volumeOf []int32 // claim -> matched volume, or -1
	claimOf  []int32 // volume -> matched claim, or -1

	depth []int32
	limit int32
	next  []int
	queue []int32
	stack []int32
}

func oracleNewGraph(claims []*corev1.PersistentVolumeClaim, volumes []*corev1.PersistentVolume, fits func(c, v int) bool) *oracleGraph {
	volOrder := oracleVolumeOrder(volumes)
	g := &oracleGraph{
		adj:      make([][]int32, len(claims)),
		volumeOf: make([]int32, len(claims)),
		claimOf:  make([]int32, len(volumes)),
		depth:    make([]int32, len(claims)),
		next:     make([]int, len(claims)),
	}
	row := make([]int32, 0, len(volOrder))
	for c, claim := range claims {
		g.volumeOf[c] = -1
		if claim == nil {
			continue
		}
		row = row[:0]
		for _, v := range volOrder {
			if fits(c, int(v)) {
				row = append(row, v)
			}
		}
		g.adj[c] = slices.Clone(row)
	}
	for v := range g.claimOf {
		g.claimOf[v] = -1
	}
	return g
}

func (g *oracleGraph) takeFirstFree(c int32) {
	for _, v := range g.adj[c] {
		if g.claimOf[v] < 0 {
			g.claimOf[v] = c
			g.volumeOf[c] = v
			return
		}
	}
}

func (g *oracleGraph) layer(order []int32) bool {
	queue := g.queue[:0]
	for _, c := range order {
		g.depth[c] = oracleUnreached
		if g.volumeOf[c] < 0 {
			g.depth[c] = 0
			queue = append(queue, c)
		}
	}
	g.limit = oracleUnreached
	for i := 0; i < len(queue) && g.depth[queue[i]] <= g.limit; i++ {
		c := queue[i]
		for _, v := range g.adj[c] {
			owner := g.claimOf[v]
			switch {
			case owner < 0:
				g.limit = g.depth[c]
			case g.depth[owner] == oracleUnreached:
				g.depth[owner] = g.depth[c] + 1
				queue = append(queue, owner)
			}
		}
	}
	g.queue = queue
	return g.limit != oracleUnreached
}

func (g *oracleGraph) augment(root int32) {
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
			g.depth[c] = oracleUnreached
			stack = stack[:len(stack)-1]
		}
	}
}

func (g *oracleGraph) flip(path []int32, v int32) {
	for i := len(path) - 1; i >= 0; i-- {
		c := path[i]
		held := g.volumeOf[c]
		g.volumeOf[c] = v
		g.claimOf[v] = c
		v = held
	}
}

func (g *oracleGraph) result() map[int]int {
	out := make(map[int]int)
	for c, v := range g.volumeOf {
		if v >= 0 {
			out[c] = int(v)
		}
	}
	return out
}

func oracleClaimOrder(claims []*corev1.PersistentVolumeClaim) []int32 {
	type key struct {
		request         resource.Quantity
		namespace, name string
		index           int32
	}
	keys := make([]key, 0, len(claims))
	for c, claim := range claims {
		if claim == nil {
			continue
		}
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

func oracleVolumeOrder(volumes []*corev1.PersistentVolume) []int32 {
	type key struct {
		capacity resource.Quantity
		modes    int
		name     string
		index    int32
	}
	keys := make([]key, 0, len(volumes))
	for v, volume := range volumes {
		if volume == nil {
			continue
		}
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
