package binder

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/clusterstate"
	"github.com/pvguard/pvguard/internal/cachelist"
	"github.com/pvguard/pvguard/storage"
)

// runPlan plans the pending claims (Plan) and enqueues them to carry the plan out. The plan runs
// outside the ledger's lock: runPlan reads the cache, takes a snapshot of the in-flight state,
// plans from the two, and installs the plan (ledger.install says what it does about binds begun
// and pairs denied while the plan ran). The workqueue never runs two plans at once. With
// Options.KeepPlans it keeps the plan for its readers (LatestPlan), which explain it.
func (b *Binder) runPlan(ctx context.Context) error {
	start := time.Now()
	read := b.made.reads.Add(1)
	in, err := b.planInput(ctx)
	if err != nil {
		return err
	}
	plan := Plan(in)
	explained := plan
	if b.o.KeepPlans {
		explained.Volumes = maps.Clone(plan.Volumes) // install hands plan.Volumes to the ledger
		b.made.keep(&MadePlan{Input: in, Plan: explained, Read: read, Took: time.Since(start)})
	}
	if b.ledger.install(plan.Volumes, in.InFlight, time.Now()) > 0 {
		b.requestPlan() // for the claims it left unplanned, now that the new binds show
	}
	b.ledger.nameClaims(plan.Claims)
	for _, c := range plan.Claims {
		b.queue.Add(key{kind: 'c', namespace: c.Namespace, name: c.Name})
	}
	b.metrics.pending.Set(float64(len(plan.Claims)))
	took := time.Since(start)
	b.metrics.planDuration.Observe(took.Seconds())
	b.planTook.Store(int64(took))
	return nil
}

// planInput reads what a plan reads: claims, volumes and classes from the cache, the nodes the
// pending claims were scheduled to, and, last, a snapshot of the in-flight state. Of the claims
// its state holds only those the plan considers (plannable).
func (b *Binder) planInput(ctx context.Context) (PlanInput, error) {
	// The cache's own objects, neither deep copies nor struct copies (package cachelist says why),
	// in a state that holds the lists as they are: the planner only reads them, and what it keeps
	// of them is names and uids.
	pvcs, err := cachelist.List(ctx, b.o.Cache, &corev1.PersistentVolumeClaim{}, &corev1.PersistentVolumeClaimList{})
	if err != nil {
		return PlanInput{}, fmt.Errorf("listing claims: %w", err)
	}
	volumes, err := cachelist.List(ctx, b.o.Cache, &corev1.PersistentVolume{}, &corev1.PersistentVolumeList{})
	if err != nil {
		return PlanInput{}, fmt.Errorf("listing volumes: %w", err)
	}
	classes, err := b.classes(ctx)
	if err != nil {
		return PlanInput{}, err
	}
	byName := classIndex(classes)
	var claims []*corev1.PersistentVolumeClaim
	for _, c := range pvcs {
		if plannable(c, byName) {
			claims = append(claims, c)
		}
	}
	nodes, err := b.scheduledNodes(ctx, claims)
	if err != nil {
		return PlanInput{}, err
	}
	if b.o.KeepPlans {
		// Explanations read every claim and node (a bound claim's, a node that is gone); the
		// plan reads the pending claims and their selected nodes out of them all the same.
		claims = pvcs
		if nodes, err = b.allNodes(ctx, nodes); err != nil {
			return PlanInput{}, err
		}
	}
	// The pairs the plan judges by policy are judged on every kind its rules read.
	st, err := clusterstate.ReadKinds(ctx, b.o.Cache, clusterstate.New(claims, volumes, classes, nodes), b.o.Engine().Reads()...)
	if err != nil {
		return PlanInput{}, err
	}
	return PlanInput{
		State:       st,
		PendingFree: b.pendingFree(),
		InFlight:    b.ledger.snapshot(time.Now()),
	}, nil
}

// scheduledNodes reads, once each, the nodes that the claims' selected-node annotations name, in
// the order they are first named; a node that does not exist is left out.
func (b *Binder) scheduledNodes(ctx context.Context, claims []*corev1.PersistentVolumeClaim) ([]*corev1.Node, error) {
	read := map[string]bool{}
	var nodes []*corev1.Node
	for _, c := range claims {
		name, ok := c.Annotations[storage.AnnSelectedNode]
		if !ok || read[name] {
			continue
		}
		read[name] = true
		n, err := b.node(ctx, name)
		if err != nil {
			return nil, err
		}
		if n != nil {
			nodes = append(nodes, n)
		}
	}
	return nodes, nil
}

// allNodes is every node the cache holds (names and labels), and those of selected that it does
// not hold (read live: scheduledNodes).
func (b *Binder) allNodes(ctx context.Context, selected []*corev1.Node) ([]*corev1.Node, error) {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Node"))
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NodeList"))
	meta, err := cachelist.List(ctx, b.o.Cache, m, list)
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	nodes := make([]*corev1.Node, 0, len(meta)+len(selected))
	cached := make(map[string]bool, len(meta))
	for _, n := range meta {
		nodes, cached[n.Name] = append(nodes, &corev1.Node{ObjectMeta: n.ObjectMeta}), true
	}
	for _, n := range selected {
		if !cached[n.Name] {
			nodes = append(nodes, n)
		}
	}
	return nodes, nil
}

// PlanInput is what a plan reads.
type PlanInput struct {
	// State holds the cluster's claims, of which the plan considers the pending ones
	// (plannable); its volumes, of which the plan gives out those that are free or pre-bound to a
	// pending claim, and not being deleted; its classes; and the nodes that claims'
	// selected-node annotations name (name and labels are enough). A node the state does not hold
	// does not exist, and no volume with a node affinity is reachable from it.
	State *clusterstate.State
	// PendingFree makes free volumes still Pending count as free (active mode: see
	// Binder.pendingFree).
	PendingFree bool
	// InFlight is the binder's own work that the plan must respect.
	InFlight InFlight
}

// PoolPlan is a plan.
type PoolPlan struct {
	// Volumes maps the uid of every claim the plan considered to the volume chosen for it, ""
	// when none fits.
	Volumes map[types.UID]string
	// Claims lists the claims the plan considered, by class and then namespace and name.
	Claims []*corev1.PersistentVolumeClaim
}

// Plan assigns volumes to all pending claims of Immediate classes at once (see assignLists), class
// by class. Volumes pre-bound to a claim go to that claim first, as upstream does. Claims of a
// WaitForFirstConsumer class are left out: the scheduler binds free volumes to them, and the
// binder only completes what it began (DecideClaim). A claim that carries
// volume.kubernetes.io/selected-node all the same (the scheduler sets it only on
// WaitForFirstConsumer claims, but anyone may write it) takes only volumes reachable from that
// node: upstream does not check that, but the policy refuses the other bindings. No pair goes
// against in.InFlight: a volume with a bind in flight goes to that bind's claim or to none, and a
// pair policy denied recently to neither.
//
// Plan only reads its input, and the result depends on nothing else, not even map order.
func Plan(in PlanInput) PoolPlan {
	claimsByClass := pendingByClass(in, nil)
	out := PoolPlan{Volumes: map[types.UID]string{}}
	for _, class := range sortedKeys(claimsByClass) {
		for _, c := range claimsByClass[class] {
			out.Claims = append(out.Claims, c.claim)
		}
	}
	planClasses(in, claimsByClass, nil, out.Volumes)
	return out
}

// planClasses plans each class of claimsByClass in turn (in the classes' order) over its volumes,
// writing into plan; only, when not nil, names the classes whose volumes are read.
func planClasses(in PlanInput, claimsByClass map[string][]pending, only map[string]bool, plan map[types.UID]string) {
	volumesByClass := map[string][]*corev1.PersistentVolume{}
	for _, v := range in.State.Volumes() {
		// Volumes with a claimRef stay in: one pre-bound to a pending claim (by a user, by a
		// provisioner with the claim's uid, or by a bind interrupted after its first write) is
		// that claim's first choice.
		if class := storage.VolumeClass(v); (only == nil || only[class]) && v.DeletionTimestamp == nil {
			volumesByClass[class] = append(volumesByClass[class], v)
		}
	}
	pl := &poolPlanner{inFlight: in.InFlight, pendingFree: in.PendingFree, fits: newFitCache()}
	for _, class := range sortedKeys(claimsByClass) {
		pl.planClass(claimsByClass[class], volumesByClass[class], plan)
	}
}

// pendingByClass groups the claims the plan considers by class (only those of the classes only
// names, when it is not nil), each group sorted by namespace and name, with the nodes they were
// scheduled to.
func pendingByClass(in PlanInput, only map[string]bool) map[string][]pending {
	classes := classIndex(in.State.Classes())
	byClass := map[string][]pending{}
	for _, c := range in.State.Claims() {
		class := storage.ClaimClass(c)
		if (only != nil && !only[class]) || !plannable(c, classes) {
			continue
		}
		p := pending{claim: c}
		if name, ok := c.Annotations[storage.AnnSelectedNode]; ok {
			p.scheduled = true
			p.node, _ = in.State.Node(name) // a state's reads never fail
		}
		byClass[class] = append(byClass[class], p)
	}
	for _, claims := range byClass {
		sort.Slice(claims, func(i, j int) bool {
			return claims[i].claim.Namespace+"/"+claims[i].claim.Name < claims[j].claim.Namespace+"/"+claims[j].claim.Name
		})
	}
	return byClass
}

// classIndex maps class names to classes.
func classIndex(classes []*storagev1.StorageClass) map[string]*storagev1.StorageClass {
	byName := make(map[string]*storagev1.StorageClass, len(classes))
	for _, sc := range classes {
		byName[sc.Name] = sc
	}
	return byName
}

// plannable reports whether the plan considers the claim: it is unbound, names no volume, is not
// being deleted, and its class (if it exists) binds at once rather than waiting for the first
// consumer.
func plannable(c *corev1.PersistentVolumeClaim, classes map[string]*storagev1.StorageClass) bool {
	if _, done := c.Annotations[storage.AnnBindCompleted]; done || c.Spec.VolumeName != "" || c.DeletionTimestamp != nil {
		return false
	}
	return !isDelayBinding(c, classes[storage.ClaimClass(c)])
}

// poolPlanner is one plan's state, shared by its classes.
type poolPlanner struct {
	inFlight    InFlight
	pendingFree bool
	fits        *fitCache
}

// planClass plans one class's pending claims, sorted by name, over the class's volumes: the
// volumes pre-bound to them first, then the free ones (planPool).
func (pl *poolPlanner) planClass(claims []pending, volumes []*corev1.PersistentVolume, plan map[types.UID]string) {
	used, rest := pl.planPreBound(claims, volumes, plan)
	var free []*corev1.PersistentVolume
	for _, v := range volumes {
		if !used[v.Name] && v.Spec.ClaimRef == nil {
			free = append(free, v)
		}
	}
	pl.planPool(rest, free, plan)
}

// planPreBound gives each claim a volume pre-bound to it that fits, if there is one, and returns
// the volumes given and the claims left without one. Every claim gets a plan entry, "" until it
// has a volume.
func (pl *poolPlanner) planPreBound(claims []pending, volumes []*corev1.PersistentVolume, plan map[types.UID]string) (used map[string]bool, rest []pending) {
	used = map[string]bool{}
	preBound := preBoundByClaim(claims, volumes)
	for i, c := range claims {
		plan[c.claim.UID] = ""
		if v := pl.preBoundChoice(c, preBound[i], used); v != nil {
			plan[c.claim.UID], used[v.Name] = v.Name, true
			continue
		}
		rest = append(rest, c)
	}
	return used, rest
}

// preBoundChoice returns the volume of candidates (those whose claimRef names the claim) that
// the claim takes, if any fits and is not used yet. A volume that already carries the claim's uid
// (a bind begun before a crash, or a provisioner's volume) comes before one pre-bound by name
// only: taking the latter would cost an unbind of the former.
func (pl *poolPlanner) preBoundChoice(c pending, candidates []*corev1.PersistentVolume, used map[string]bool) *corev1.PersistentVolume {
	for _, withUID := range []bool{true, false} {
		for _, v := range candidates {
			if !used[v.Name] && storage.ClaimRefNames(v, c.claim) && (v.Spec.ClaimRef.UID != "") == withUID &&
				pl.inFlight.usable(c.claim.UID, v.Name) && pl.fits.fitsUnbound(c.claim, v, c.node, c.scheduled, pl.pendingFree) {
				return v
			}
		}
	}
	return nil
}

// planPool assigns the free volumes to the claims all at once (assignLists, over poolLists).
func (pl *poolPlanner) planPool(claims []pending, volumes []*corev1.PersistentVolume, plan map[types.UID]string) {
	objs := make([]*corev1.PersistentVolumeClaim, len(claims))
	for i, c := range claims {
		objs[i] = c.claim
	}
	lists, listOf := pl.poolLists(claims, volumes, assignVolumeOrder(volumes))
	for ci, vi := range assignLists(objs, len(volumes), lists, listOf) {
		plan[claims[ci].claim.UID] = volumes[vi].Name
	}
}

// preBoundByClaim lists, for each claim (by index), the volumes whose claimRef names it, in the
// order of volumes. Looking them up by name keeps the pre-bound pass linear: scanning every
// volume of the class for every claim is quadratic (BenchmarkPlanAtScale).
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

// node reads a node's name and labels (all node affinity needs); nil when it does not exist.
func (b *Binder) node(ctx context.Context, name string) (*corev1.Node, error) {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Node"))
	err := b.o.Cache.Get(ctx, client.ObjectKey{Name: name}, m)
	if apierrors.IsNotFound(err) {
		err = b.liveGet(ctx, client.ObjectKey{Name: name}, m)
	}
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading node %s: %w", name, err)
	}
	return &corev1.Node{ObjectMeta: m.ObjectMeta}, nil
}
