package binder

import (
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/policy"
)

// runPlan assigns volumes to all pending claims of Immediate classes at once (see Assign), class
// by class, and enqueues the claims to carry it out. Volumes pre-bound to a claim go to that claim
// first, as upstream does. Claims of a WaitForFirstConsumer class are left out: the scheduler
// binds free volumes to them, and the binder only completes what it began (DecideClaim). A claim
// that carries volume.kubernetes.io/selected-node all the same (the scheduler sets it only on
// WaitForFirstConsumer claims, but anyone may write it) takes only volumes reachable from that
// node: upstream does not check that, but the policy refuses the other bindings.
func (b *Binder) runPlan(ctx context.Context) error {
	start := time.Now()
	var pvcs corev1.PersistentVolumeClaimList
	var pvs corev1.PersistentVolumeList
	// The cache's own objects, not deep copies (the copies were most of a plan's allocations):
	// the planner only reads them, and what it keeps of them is names and uids.
	if err := b.o.Cache.List(ctx, &pvcs, client.UnsafeDisableDeepCopy); err != nil {
		return fmt.Errorf("listing claims: %w", err)
	}
	if err := b.o.Cache.List(ctx, &pvs, client.UnsafeDisableDeepCopy); err != nil {
		return fmt.Errorf("listing volumes: %w", err)
	}
	classes, err := b.classes(ctx)
	if err != nil {
		return err
	}
	byName := map[string]int{}
	for i, sc := range classes {
		byName[sc.Name] = i
	}

	// Each node is read once a plan, so claims scheduled to it share one *Node (poolLists).
	nodes := nodeReader{b: b, read: map[string]*corev1.Node{}}
	claimsByClass := map[string][]pending{}
	for i := range pvcs.Items {
		c := &pvcs.Items[i]
		if _, done := c.Annotations[annBindCompleted]; done || c.Spec.VolumeName != "" || c.DeletionTimestamp != nil {
			continue
		}
		if i, ok := byName[policy.ClaimClass(c)]; ok && isDelayBinding(c, classes[i]) {
			continue
		}
		p := pending{claim: c}
		if nodeName, ok := c.Annotations[annSelectedNode]; ok {
			p.scheduled = true
			if p.node, err = nodes.get(ctx, nodeName); err != nil {
				return err
			}
		}
		claimsByClass[policy.ClaimClass(c)] = append(claimsByClass[policy.ClaimClass(c)], p)
	}
	volumesByClass := map[string][]*corev1.PersistentVolume{}
	for i := range pvs.Items {
		v := &pvs.Items[i]
		// Volumes with a claimRef stay in: one pre-bound to a pending claim (by a user, by a
		// provisioner with the claim's uid, or by a bind interrupted after its first write) is
		// that claim's first choice.
		if v.DeletionTimestamp != nil {
			continue
		}
		volumesByClass[policy.VolumeClass(v)] = append(volumesByClass[policy.VolumeClass(v)], v)
	}

	plan := map[types.UID]string{}
	fits := newFitCache()
	var considered []*corev1.PersistentVolumeClaim
	b.mu.Lock()
	for _, class := range sortedKeys(claimsByClass) {
		claims := claimsByClass[class]
		sort.Slice(claims, func(i, j int) bool {
			return claims[i].claim.Namespace+"/"+claims[i].claim.Name < claims[j].claim.Namespace+"/"+claims[j].claim.Name
		})
		volumes := volumesByClass[class]
		used := map[string]bool{}
		preBound := preBoundByClaim(claims, volumes)
		var poolClaims []pending
		for i, p := range claims {
			considered = append(considered, p.claim)
			plan[p.claim.UID] = ""
			// A volume that already carries the claim's uid (a bind begun before a crash, or a
			// provisioner's volume) comes before one pre-bound by name only: taking the latter
			// would cost an unbind of the former.
			for _, withUID := range []bool{true, false} {
				for _, v := range preBound[i] {
					if plan[p.claim.UID] == "" && !used[v.Name] && preBoundTo(v, p.claim) && (v.Spec.ClaimRef.UID != "") == withUID &&
						b.usable(p.claim, v) && fits.fitsUnbound(p.claim, v, p.node, p.scheduled, b.pendingFree()) {
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
		lists, listOf := b.poolLists(poolClaims, poolVolumes, assignVolumeOrder(poolVolumes), fits)
		for ci, vi := range assignLists(claimObjs, len(poolVolumes), lists, listOf) {
			plan[poolClaims[ci].claim.UID] = poolVolumes[vi].Name
		}
	}
	b.plan = plan
	for uid := range b.forbidden {
		if _, pendingStill := plan[uid]; !pendingStill {
			delete(b.forbidden, uid)
		}
	}
	b.mu.Unlock()

	for _, c := range considered {
		b.queue.Add(key{kind: 'c', namespace: c.Namespace, name: c.Name})
	}
	b.metrics.pending.Set(float64(len(considered)))
	b.metrics.planDuration.Observe(time.Since(start).Seconds())
	return nil
}

// preBoundByClaim lists, for each claim (by index), the volumes whose claimRef names it, in the
// order of volumes. Looking them up by name keeps the pre-bound pass linear: scanning every
// volume of the class for every claim took minutes for 10,000 pending claims among 100,000
// volumes (BenchmarkPlanAtScale).
func preBoundByClaim(claims []pending, volumes []*corev1.PersistentVolume) map[int][]*corev1.PersistentVolume {
	type name struct{ namespace, name string }
	index := make(map[name]int, len(claims))
	for i, p := range claims {
		index[name{p.claim.Namespace, p.claim.Name}] = i
	}
	out := map[int][]*corev1.PersistentVolume{}
	for _, v := range volumes {
		if ref := v.Spec.ClaimRef; ref != nil {
			if i, ok := index[name{ref.Namespace, ref.Name}]; ok {
				out[i] = append(out[i], v)
			}
		}
	}
	return out
}

// pending is a claim the planner considers, with the node it was scheduled to, if any.
type pending struct {
	claim     *corev1.PersistentVolumeClaim
	node      *corev1.Node
	scheduled bool
}

// nodeReader reads nodes, each once.
type nodeReader struct {
	b    *Binder
	read map[string]*corev1.Node
}

func (r nodeReader) get(ctx context.Context, name string) (*corev1.Node, error) {
	if n, ok := r.read[name]; ok {
		return n, nil
	}
	n, err := r.b.node(ctx, name)
	if err != nil {
		return nil, err
	}
	r.read[name] = n
	return n, nil
}

// node reads a node's name and labels (all node affinity needs); nil when it does not exist.
func (b *Binder) node(ctx context.Context, name string) (*corev1.Node, error) {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Node"))
	err := b.o.Cache.Get(ctx, client.ObjectKey{Name: name}, m)
	if apierrors.IsNotFound(err) {
		err = b.o.Live.Get(ctx, client.ObjectKey{Name: name}, m)
	}
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading node %s: %w", name, err)
	}
	return &corev1.Node{ObjectMeta: m.ObjectMeta}, nil
}
