package e2echaos

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/test/harness"
	"github.com/pvguard/pvguard/test/testobj"
)

// The population of a chaos run: random volumes and claims, planted pairs (legitimately
// pre-bound ones, and ones a deny rule refuses), each object created at the start, while the
// in-process binders are being killed (wave 1), or before the real processes are (wave 2).

const (
	holdFinalizer = "chaos.pvguard.io/hold" // set at creation
	lateFinalizer = "chaos.pvguard.io/late" // added by the injector while the binder runs
	pokeAnn       = "chaos.pvguard.io/poke" // bumped by the injector to make binder writes conflict
)

var sizes = []string{"1Gi", "2Gi", "4Gi", "8Gi"}

type plannedPV struct {
	pv      *corev1.PersistentVolume
	seed    bool
	wave    int
	special string
}

type plannedPVC struct {
	pvc     *corev1.PersistentVolumeClaim
	seed    bool
	wave    int
	special string
}

type world struct {
	cfg      config
	r        *rand.Rand // generation only, one goroutine
	nsA, nsB string
	classes  []string
	nodes    []string
	pvs      []*plannedPV
	pvcs     []*plannedPVC
	plants   map[string]int

	mu      sync.Mutex
	intent  Intent
	created []client.Object // keys of created objects, for the injector

	pokes, pokeErrors, lateFinalizers, refused atomic.Int64
	lastPokeErr                                atomic.Value
}

func newWorld(t *testing.T, cfg config) *world {
	t.Helper()
	w := &world{
		cfg: cfg, r: rand.New(rand.NewPCG(cfg.Seed, 1)), plants: map[string]int{},
		intent: Intent{
			PreboundVolumes: map[string]ClaimKey{}, NamedVolumes: map[ClaimKey]string{},
			Volumes: map[string]bool{}, Claims: map[ClaimKey]bool{}, Finalizers: map[string][]string{},
			GrabDenied: true, GrantAnnotation: grantAnnotation,
		},
	}
	w.nsA, w.nsB = harness.Namespace(t, admin(t), "-a"), harness.Namespace(t, admin(t), "-b")
	w.classes = []string{w.nsA + "-gold", w.nsA + "-silver"}
	w.nodes = []string{w.nsA + "-n1", w.nsA + "-n2"}
	ctx := context.Background()
	c := admin(t)
	for _, name := range w.classes {
		harness.Must(t, c.Create(ctx, testobj.StorageClass(name, "kubernetes.io/no-provisioner")), "creating class")
		t.Cleanup(func() { _ = c.Delete(ctx, testobj.StorageClass(name, "")) })
	}
	for _, n := range w.nodes {
		harness.Must(t, c.Create(ctx, testobj.Node(n, nil)), "creating node")
	}
	for i := range cfg.Volumes {
		w.pvs = append(w.pvs, &plannedPV{pv: w.randomVolume(i)})
	}
	for i := range cfg.Claims {
		w.pvcs = append(w.pvcs, &plannedPVC{pvc: w.randomClaim(i)})
	}
	w.plant()
	w.schedule()
	return w
}

func pick[T any](r *rand.Rand, from ...T) T { return from[r.IntN(len(from))] }

func (w *world) randomVolume(i int) *corev1.PersistentVolume {
	r := w.r
	mods := []testobj.PVMod{testobj.Class(pick(r, w.classes...)), testobj.Capacity(pick(r, sizes...))}
	switch x := r.Float64(); {
	case x < 0.65:
		mods = append(mods, testobj.AccessModes(corev1.ReadWriteOnce))
	case x < 0.9:
		mods = append(mods, testobj.AccessModes(corev1.ReadWriteOnce, corev1.ReadWriteMany))
	default:
		mods = append(mods, testobj.AccessModes(corev1.ReadOnlyMany))
	}
	if r.Float64() < 0.12 {
		mods = append(mods, testobj.VolumeMode(corev1.PersistentVolumeBlock))
	}
	if r.Float64() < 0.15 {
		mods = append(mods, testobj.NodeAffinity("kubernetes.io/hostname", pick(r, w.nodes...)))
	}
	if r.Float64() < 0.25 {
		mods = append(mods, testobj.Reclaim(corev1.PersistentVolumeReclaimDelete))
	}
	pv := testobj.PV(fmt.Sprintf("%s-pv-%03d", w.nsA, i), mods...)
	pv.Status = corev1.PersistentVolumeStatus{}
	return pv
}

func (w *world) randomClaim(i int) *corev1.PersistentVolumeClaim {
	r := w.r
	mods := []testobj.PVCMod{testobj.ClaimClass(pick(r, w.classes...)), testobj.Request(pick(r, "1Gi", "1Gi", "2Gi", "2Gi", "4Gi", "8Gi"))}
	switch x := r.Float64(); {
	case x < 0.75:
	case x < 0.9:
		mods = append(mods, testobj.ClaimAccessModes(corev1.ReadWriteMany))
	default:
		mods = append(mods, testobj.ClaimAccessModes(corev1.ReadOnlyMany))
	}
	if r.Float64() < 0.12 {
		mods = append(mods, testobj.ClaimVolumeMode(corev1.PersistentVolumeBlock))
	}
	if r.Float64() < 0.1 {
		mods = append(mods, testobj.ClaimMeta(testobj.Annotation(annSelectedNode, pick(r, w.nodes...))))
	}
	pvc := testobj.PVC(pick(r, w.nsA, w.nsB), fmt.Sprintf("c-%03d", i), mods...)
	pvc.UID, pvc.Status = "", corev1.PersistentVolumeClaimStatus{}
	return pvc
}

// fit makes a claim fit a volume: same class and mode, a request the volume covers, one of its
// access modes, and no node of its own.
func fit(c *corev1.PersistentVolumeClaim, v *corev1.PersistentVolume) {
	class := v.Spec.StorageClassName
	c.Spec.StorageClassName = &class
	c.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceStorage: v.Spec.Capacity[corev1.ResourceStorage].DeepCopy()}
	c.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{v.Spec.AccessModes[0]}
	c.Spec.VolumeMode = nil
	if v.Spec.VolumeMode != nil {
		m := *v.Spec.VolumeMode
		c.Spec.VolumeMode = &m
	}
	delete(c.Annotations, annSelectedNode)
}

func preBind(v *corev1.PersistentVolume, c *corev1.PersistentVolumeClaim) {
	testobj.ClaimRef(c.Namespace, c.Name, "")(v)
}

func grant(v *corev1.PersistentVolume, ns string) {
	testobj.PVMeta(testobj.Annotation(grantAnnotation, ns))(v)
}

// plant turns some random objects into the pairs the run is about.
func (w *world) plant() {
	pvOrder, pvcOrder := w.r.Perm(len(w.pvs)), w.r.Perm(len(w.pvcs))
	nextPV := func() *plannedPV {
		p := w.pvs[pvOrder[0]]
		pvOrder = pvOrder[1:]
		return p
	}
	nextPVC := func() *plannedPVC {
		p := w.pvcs[pvcOrder[0]]
		pvcOrder = pvcOrder[1:]
		return p
	}
	named := func(c *plannedPVC, v *plannedPV) {
		c.pvc.Spec.VolumeName = v.pv.Name
		w.intent.NamedVolumes[keyOf(c.pvc)] = v.pv.Name
	}
	prebound := func(v *plannedPV, c *plannedPVC) {
		preBind(v.pv, c.pvc)
		w.intent.PreboundVolumes[v.pv.Name] = keyOf(c.pvc)
	}
	// Legitimate pairs: a claim naming a volume that grants its namespace, a volume pre-bound
	// to a claim.
	for range w.cfg.Claims * 6 / 100 {
		v, c := nextPV(), nextPVC()
		fit(c.pvc, v.pv)
		grant(v.pv, c.pvc.Namespace)
		named(c, v)
		c.special, v.special = "named", "named"
	}
	for range w.cfg.Volumes * 6 / 100 {
		v, c := nextPV(), nextPVC()
		fit(c.pvc, v.pv)
		prebound(v, c)
		c.special, v.special = "prebound", "prebound"
	}
	perKind := max(1, w.cfg.Claims/100)
	// Claims naming a volume that a deny rule (or upstream's matching) refuses them.
	for _, kind := range []string{"volume-mode", "capacity", "access-modes", "storage-class", "volume-grab", "node-affinity", "prebound-elsewhere"} {
		for range perKind {
			v, c := nextPV(), nextPVC()
			fit(c.pvc, v.pv)
			if kind != "volume-grab" {
				grant(v.pv, c.pvc.Namespace)
			}
			switch kind {
			case "volume-mode":
				flipMode(c.pvc)
			case "capacity":
				q := v.pv.Spec.Capacity[corev1.ResourceStorage].DeepCopy()
				q.Add(q)
				c.pvc.Spec.Resources.Requests[corev1.ResourceStorage] = q
			case "access-modes":
				v.pv.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
				c.pvc.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
			case "storage-class":
				other := w.classes[0]
				if v.pv.Spec.StorageClassName == other {
					other = w.classes[1]
				}
				c.pvc.Spec.StorageClassName = &other
			case "node-affinity":
				testobj.NodeAffinity("kubernetes.io/hostname", w.nodes[1])(v.pv)
				testobj.ClaimMeta(testobj.Annotation(annSelectedNode, w.nodes[0]))(c.pvc)
			case "prebound-elsewhere":
				// The volume is pre-bound to a claim in one namespace; a claim in the other
				// names it.
				owner := nextPVC()
				owner.pvc.Namespace, c.pvc.Namespace = w.nsA, w.nsB
				fit(owner.pvc, v.pv)
				grant(v.pv, w.nsB)
				prebound(v, owner)
				owner.special = "owner"
			}
			named(c, v)
			c.seed, c.special, v.special = true, "denied-named-"+kind, "denied-named-"+kind
			// A free volume that a claim it does not grant names is refused in whichever order
			// the two are written (PVG010 judges the claim's write and the volume's): the state
			// is seeded whole.
			v.seed = kind == "volume-grab"
			w.plants[c.special]++
		}
	}
	// Volumes pre-bound to a claim that does not fit them.
	for _, kind := range []string{"volume-mode", "capacity", "access-modes"} {
		for range perKind {
			v, c := nextPV(), nextPVC()
			fit(c.pvc, v.pv)
			switch kind {
			case "volume-mode":
				flipMode(c.pvc)
			case "capacity":
				q := resource.MustParse("16Gi")
				c.pvc.Spec.Resources.Requests[corev1.ResourceStorage] = q
			case "access-modes":
				v.pv.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadOnlyMany}
				c.pvc.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
			}
			prebound(v, c)
			v.seed, c.special, v.special = true, "denied-prebound-"+kind, "denied-prebound-"+kind
			w.plants[v.special]++
		}
	}
}

func flipMode(c *corev1.PersistentVolumeClaim) {
	if modeOf(c.Spec.VolumeMode) == corev1.PersistentVolumeBlock {
		c.Spec.VolumeMode = nil
		return
	}
	testobj.ClaimVolumeMode(corev1.PersistentVolumeBlock)(c)
}

// schedule decides when each object is created, and which carry a finalizer of the test's.
func (w *world) schedule() {
	for _, p := range w.pvs {
		switch x := w.r.Float64(); {
		case x < 0.12:
			p.wave = 1
		case x < 0.17:
			p.wave = 2
		}
		if w.r.Float64() < 0.1 {
			p.pv.Finalizers = append(p.pv.Finalizers, holdFinalizer)
		}
	}
	for _, p := range w.pvcs {
		switch x := w.r.Float64(); {
		case x < 0.25:
			p.wave = 1
		case x < 0.30:
			p.wave = 2
		}
		if w.r.Float64() < 0.1 {
			p.pvc.Finalizers = append(p.pvc.Finalizers, holdFinalizer)
		}
	}
}

// wave lists the objects of one wave in a random order.
func (w *world) wave(n int, r *lockedRand) []func(context.Context, *testing.T) {
	var out []func(context.Context, *testing.T)
	for _, p := range w.pvs {
		if p.wave == n {
			out = append(out, func(ctx context.Context, t *testing.T) { w.create(ctx, t, p.pv, p.seed) })
		}
	}
	for _, p := range w.pvcs {
		if p.wave == n {
			out = append(out, func(ctx context.Context, t *testing.T) { w.create(ctx, t, p.pvc, p.seed) })
		}
	}
	perm := r.Perm(len(out))
	shuffled := make([]func(context.Context, *testing.T), len(out))
	for i, j := range perm {
		shuffled[i] = out[j]
	}
	return shuffled
}

// createAll creates a wave with a few parallel clients.
func (w *world) createAll(t *testing.T, n int, r *lockedRand) {
	ctx := context.Background()
	work := make(chan func(context.Context, *testing.T))
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for f := range work {
				f(ctx, t)
			}
		}()
	}
	for _, f := range w.wave(n, r) {
		work <- f
	}
	close(work)
	wg.Wait()
}

// trickle creates a wave one object at a time at random intervals, spread over about d.
func (w *world) trickle(ctx context.Context, t *testing.T, n int, r *lockedRand, d time.Duration) {
	fs := w.wave(n, r)
	if len(fs) == 0 {
		return
	}
	avg := d / time.Duration(len(fs))
	for _, f := range fs {
		select {
		case <-ctx.Done():
			return
		case <-time.After(r.Between(0, 2*avg)):
		}
		f(ctx, t)
	}
}

func (w *world) create(ctx context.Context, t *testing.T, obj client.Object, seeded bool) {
	c := admin(t)
	if seeded {
		c = seed(t)
	}
	obj = obj.DeepCopyObject().(client.Object)
	if err := c.Create(ctx, obj); err != nil {
		if !seeded && preBinds(obj) && strings.Contains(err.Error(), "[PVG004 no-double-binding]") {
			// Created late, it names the other half of a pair the binder has since bound
			// elsewhere: the webhook rightly refuses it.
			w.refused.Add(1)
			return
		}
		t.Errorf("creating %T %s/%s (seeded %v): %v", obj, obj.GetNamespace(), obj.GetName(), seeded, err)
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch o := obj.(type) {
	case *corev1.PersistentVolume:
		w.intent.Volumes[o.Name] = true
		if slices.Contains(o.Finalizers, holdFinalizer) {
			w.intent.Finalizers[pvObj(o.Name)] = append(w.intent.Finalizers[pvObj(o.Name)], holdFinalizer)
		}
	case *corev1.PersistentVolumeClaim:
		w.intent.Claims[keyOf(o)] = true
		if slices.Contains(o.Finalizers, holdFinalizer) {
			w.intent.Finalizers[pvcObj(keyOf(o))] = append(w.intent.Finalizers[pvcObj(keyOf(o))], holdFinalizer)
		}
	}
	w.created = append(w.created, obj)
}

// preBinds reports whether the creator links the object to its other half.
func preBinds(obj client.Object) bool {
	switch o := obj.(type) {
	case *corev1.PersistentVolume:
		return o.Spec.ClaimRef != nil
	case *corev1.PersistentVolumeClaim:
		return o.Spec.VolumeName != ""
	}
	return false
}

// Intent returns a copy of what the creator did so far.
func (w *world) Intent() Intent {
	w.mu.Lock()
	defer w.mu.Unlock()
	in := w.intent
	in.PreboundVolumes, in.NamedVolumes = maps.Clone(in.PreboundVolumes), maps.Clone(in.NamedVolumes)
	in.Volumes, in.Claims = maps.Clone(in.Volumes), maps.Clone(in.Claims)
	in.Finalizers = map[string][]string{}
	for k, v := range w.intent.Finalizers {
		in.Finalizers[k] = slices.Clone(v)
	}
	// Pre-bindings and names of objects never created (a failed create) say nothing.
	for v := range in.PreboundVolumes {
		if !in.Volumes[v] {
			delete(in.PreboundVolumes, v)
		}
	}
	for c := range in.NamedVolumes {
		if !in.Claims[c] {
			delete(in.NamedVolumes, c)
		}
	}
	return in
}

func (w *world) inScope(ns, name string) bool {
	if ns == "" {
		return strings.HasPrefix(name, w.nsA+"-pv-")
	}
	return ns == w.nsA || ns == w.nsB
}

// inject keeps bumping an annotation of random objects, so that the binder's updates, made from
// its cache, hit 409 Conflict; every tenth time it adds a finalizer of the test's instead.
func (w *world) inject(ctx context.Context, t *testing.T, r *lockedRand) {
	c := admin(t)
	tick := time.NewTicker(w.cfg.PokeInterval)
	defer tick.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		w.mu.Lock()
		if len(w.created) == 0 {
			w.mu.Unlock()
			continue
		}
		obj := w.created[r.IntN(len(w.created))].DeepCopyObject().(client.Object)
		w.mu.Unlock()
		var err error
		if n%10 == 9 {
			err = w.addLateFinalizer(ctx, c, obj)
		} else {
			patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"%d"}}}`, pokeAnn, n)
			err = c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(patch)))
			w.pokes.Add(1)
		}
		if err != nil && ctx.Err() == nil {
			w.pokeErrors.Add(1)
			w.lastPokeErr.Store(err.Error())
		}
	}
}

func (w *world) addLateFinalizer(ctx context.Context, c client.Client, obj client.Object) error {
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		return err
	}
	if slices.Contains(obj.GetFinalizers(), lateFinalizer) {
		return nil
	}
	base := obj.DeepCopyObject().(client.Object)
	obj.SetFinalizers(append(obj.GetFinalizers(), lateFinalizer))
	if err := c.Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return err
	}
	key := pvObj(obj.GetName())
	if obj.GetNamespace() != "" {
		key = pvcObj(ClaimKey{obj.GetNamespace(), obj.GetName()})
	}
	w.mu.Lock()
	w.intent.Finalizers[key] = append(w.intent.Finalizers[key], lateFinalizer)
	w.mu.Unlock()
	w.lateFinalizers.Add(1)
	return nil
}
