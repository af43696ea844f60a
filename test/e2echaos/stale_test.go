package e2echaos

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/internal/cli"
	"github.com/pvguard/pvguard/test/harness"
	"github.com/pvguard/pvguard/test/testobj"
)

// staleCache is the binder's informer cache, lagging on purpose: hidden objects are absent
// (Get says NotFound, List leaves them out) and frozen ones are shown as an old copy.
type staleCache struct {
	client.Reader
	mu     sync.Mutex
	hidden map[string]bool
	frozen map[string]client.Object
}

var _ client.Reader = &staleCache{}

func newStaleCache(r client.Reader) *staleCache {
	return &staleCache{Reader: r, hidden: map[string]bool{}, frozen: map[string]client.Object{}}
}

func cacheKey(obj client.Object) string {
	if _, ok := obj.(*corev1.PersistentVolume); ok {
		return pvObj(obj.GetName())
	}
	return pvcObj(ClaimKey{obj.GetNamespace(), obj.GetName()})
}

func (s *staleCache) hide(obj client.Object) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hidden[cacheKey(obj)] = true
}

func (s *staleCache) freeze(obj client.Object) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.frozen[cacheKey(obj)] = obj.DeepCopyObject().(client.Object)
}

func (s *staleCache) catchUp() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.hidden)
	clear(s.frozen)
}

func (s *staleCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	var k string
	switch obj.(type) {
	case *corev1.PersistentVolume:
		k = pvObj(key.Name)
	case *corev1.PersistentVolumeClaim:
		k = pvcObj(ClaimKey{key.Namespace, key.Name})
	default:
		return s.Reader.Get(ctx, key, obj, opts...)
	}
	s.mu.Lock()
	hidden, frozen := s.hidden[k], s.frozen[k]
	s.mu.Unlock()
	if hidden {
		return apierrors.NewNotFound(resourceOf(obj), key.Name)
	}
	if frozen != nil {
		switch o := obj.(type) {
		case *corev1.PersistentVolume:
			*o = *frozen.(*corev1.PersistentVolume).DeepCopy()
		case *corev1.PersistentVolumeClaim:
			*o = *frozen.(*corev1.PersistentVolumeClaim).DeepCopy()
		}
		return nil
	}
	return s.Reader.Get(ctx, key, obj, opts...)
}

func (s *staleCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := s.Reader.List(ctx, list, opts...); err != nil {
		return err
	}
	lo := (&client.ListOptions{}).ApplyOptions(opts)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch l := list.(type) {
	case *corev1.PersistentVolumeList:
		l.Items = staleItems(s, l.Items, func(pv *corev1.PersistentVolume) bool { return true })
	case *corev1.PersistentVolumeClaimList:
		l.Items = staleItems(s, l.Items, func(pvc *corev1.PersistentVolumeClaim) bool {
			return lo.Namespace == "" || pvc.Namespace == lo.Namespace
		})
	}
	return nil
}

// staleItems applies the hidden and frozen objects to a listed page; s.mu is held.
func staleItems[T any, P interface {
	*T
	client.Object
}](s *staleCache, items []T, inList func(P) bool) []T {
	var out []T
	seen := map[string]bool{}
	for i := range items {
		k := cacheKey(P(&items[i]))
		seen[k] = true
		switch {
		case s.hidden[k]:
		case s.frozen[k] != nil:
			out = append(out, *any(s.frozen[k].DeepCopyObject()).(P))
		default:
			out = append(out, items[i])
		}
	}
	for k, obj := range s.frozen {
		if o, ok := obj.(P); ok && !seen[k] && inList(o) {
			out = append(out, *any(o.DeepCopyObject()).(P))
		}
	}
	return out
}

// TestStaleCacheNeverReleases makes the binder's cache lag in every way that could make it
// release a volume whose claim is alive, with each reclaim policy, and holds the lag for
// CHAOS_LAG (at least five resyncs of 1 s):
//
//	s1-s4  a bound volume (Retain; Delete; Delete and provisioned by an external provisioner;
//	       Retain with pvguard.io/reuse-when-released and a pending claim that would take it)
//	       whose claim is hidden from the cache while it exists
//	s5-s6  a volume provisioned for a re-created claim (claimRef uid of the new claim; Retain;
//	       Delete and provisioned) while the cache still shows the old claim of the same name,
//	       with a free volume that the old claim would fit
//	s7     a volume provisioned (Delete) for a claim the cache has never seen
//	s8     a bound claim whose volume is hidden from the cache (it must not become Lost)
//	s9     a bound volume the cache shows as it was before the binding (Available, no claimRef),
//	       with a pending claim that fits it
//	s0     the control: a bound claim really deleted, whose volume must become Released, so the
//	       monitor demonstrably sees a release when there is one
//
// No volume of s1-s9 may be Released, Failed, unbound or deleted, no claim Lost, and no binder
// write may even try; once the cache catches up, every pair is bound as it should be.
func TestStaleCacheNeverReleases(t *testing.T) {
	cfg := loadConfig(t)
	cluster(t)
	ctx := context.Background()
	ns := harness.Namespace(t, admin(t), "")
	c := admin(t)
	class := func(s string) string { return ns + "-" + s }
	pv := func(s string) string { return ns + "-" + s }
	guarded := map[string]bool{}
	mon := startMonitor(t, func(n, name string) bool {
		return n == ns || (n == "" && strings.HasPrefix(name, ns+"-"))
	})

	var (
		mu         sync.Mutex
		attempts   []string
		staleBinds []string // writes of s9's volume made from the stale copy
		guarding   bool
	)
	stale := newStaleCache(nil)
	var snapshot *corev1.PersistentVolume // s9's volume as the cache will keep showing it
	inst, err := cluster(t).ServeWith(cli.BinderHooks{
		WrapCache: func(r client.Reader) client.Reader { stale.Reader = r; return stale },
		BeforeWrite: func(op string, obj client.Object) error {
			mu.Lock()
			defer mu.Unlock()
			if !guarding || !guarded[cacheKey(obj)] {
				return nil
			}
			switch o := obj.(type) {
			case *corev1.PersistentVolume:
				if snapshot != nil && o.Name == snapshot.Name && o.ResourceVersion == snapshot.ResourceVersion {
					staleBinds = append(staleBinds, fmt.Sprintf("%s for %s", op, o.Spec.ClaimRef.Name))
				}
				if releasedPhase(o.Status.Phase) || o.Spec.ClaimRef == nil || o.Spec.ClaimRef.UID == "" {
					attempts = append(attempts, fmt.Sprintf("%s %s: phase %q, claimRef %v", op, o.Name, o.Status.Phase, o.Spec.ClaimRef))
				}
			case *corev1.PersistentVolumeClaim:
				if o.Status.Phase == corev1.ClaimLost {
					attempts = append(attempts, fmt.Sprintf("%s %s/%s: phase Lost", op, o.Namespace, o.Name))
				}
			}
			return nil
		},
	}, func(o *cli.ServeFlags) {
		o.Binder.Mode, o.Binder.Resync, o.Audit.Interval, o.LeaderElection.Elect = "active", time.Second, 0, false
	})
	harness.Must(t, err, "starting the binder")
	t.Cleanup(func() { _ = inst.Stop() })

	in := Intent{
		PreboundVolumes: map[string]ClaimKey{}, NamedVolumes: map[ClaimKey]string{},
		Volumes: map[string]bool{}, Claims: map[ClaimKey]bool{}, Finalizers: map[string][]string{},
		ProtectionFinalizers: true, GrabDenied: true, GrantAnnotation: grantAnnotation,
	}
	createPV := func(v *corev1.PersistentVolume) *corev1.PersistentVolume {
		t.Helper()
		v.Status = corev1.PersistentVolumeStatus{}
		harness.Must(t, c.Create(ctx, v), "creating volume "+v.Name)
		in.Volumes[v.Name] = true
		if ref := v.Spec.ClaimRef; ref != nil {
			in.PreboundVolumes[v.Name] = ClaimKey{ref.Namespace, ref.Name}
		}
		return v
	}
	createPVC := func(name, cls string, mods ...testobj.PVCMod) *corev1.PersistentVolumeClaim {
		t.Helper()
		pvc := harness.FreshPVC(testobj.PVC(ns, name, append([]testobj.PVCMod{testobj.ClaimClass(cls)}, mods...)...))
		harness.Must(t, c.Create(ctx, pvc), "creating claim "+name)
		in.Claims[keyOf(pvc)] = true
		return pvc
	}
	provisioned := testobj.PVMeta(testobj.Annotation("pv.kubernetes.io/provisioned-by", "csi.example.com"))
	deleteReclaim := testobj.Reclaim(corev1.PersistentVolumeReclaimDelete)

	// Bound pairs, made by the binder while its cache is still current.
	type pairSpec struct {
		s    string
		mods []testobj.PVMod
	}
	pairs := []pairSpec{
		{"s0", nil}, {"s1", nil}, {"s2", []testobj.PVMod{deleteReclaim}}, {"s3", []testobj.PVMod{deleteReclaim, provisioned}},
		{"s4", []testobj.PVMod{testobj.PVMeta(testobj.Annotation("pvguard.io/reuse-when-released", "true"))}}, {"s8", nil},
	}
	claims := map[string]*corev1.PersistentVolumeClaim{}
	for _, p := range pairs {
		createPV(testobj.PV(pv(p.s), append([]testobj.PVMod{testobj.Class(class(p.s)), testobj.ClaimRef(ns, "c-"+p.s, "")}, p.mods...)...))
		claims[p.s] = createPVC("c-"+p.s, class(p.s))
	}
	// s9: a free volume the binder picks itself; the cache will later show it as it was.
	v9 := createPV(testobj.PV(pv("s9"), testobj.Class(class("s9")))).DeepCopy()
	v9.Status.Phase = corev1.VolumeAvailable
	claims["s9"] = createPVC("c-s9", class("s9"))
	createPVC("decoy-s4", class("s4")) // nothing fits it while c-s4 holds the only volume
	for _, s := range []string{"s0", "s1", "s2", "s3", "s4", "s8", "s9"} {
		harness.WaitFor(t, time.Minute, s+" bound", harness.BoundTo(admin(t), ns, "c-"+s, pv(s)))
	}

	// From here on, no binder write may release a volume of s1-s9 or lose a claim.
	mu.Lock()
	guarding = true
	for s := 1; s <= 9; s++ {
		guarded[pvObj(pv(fmt.Sprintf("s%d", s)))] = true
		guarded[pvcObj(ClaimKey{ns, fmt.Sprintf("c-s%d", s)})] = true
	}
	mu.Unlock()

	// s5, s6: the cache keeps the first claim of the name; the live one is a second.
	for _, s := range []string{"s5", "s6"} {
		old := createPVC("c-"+s, class(s))
		stale.freeze(old)
		harness.DeleteClaim(t, admin(t), protector(t), ns, old.Name)
		claims[s] = createPVC("c-"+s, class(s))
		mods := []testobj.PVMod{testobj.Class(class(s)), testobj.ClaimRef(ns, "c-"+s, string(claims[s].UID))}
		if s == "s6" {
			mods = append(mods, deleteReclaim, provisioned)
		}
		createPV(testobj.PV(pv(s), mods...))
		createPV(testobj.PV(pv(s)+"-decoy", testobj.Class(class(s)))) // the old claim would fit it
	}
	// s7: the claim is created while hidden, then its volume is provisioned.
	stale.hide(testobj.PVC(ns, "c-s7"))
	claims["s7"] = createPVC("c-s7", class("s7"))
	createPV(testobj.PV(pv("s7"), testobj.Class(class("s7")), testobj.ClaimRef(ns, "c-s7", string(claims["s7"].UID)), deleteReclaim, provisioned))

	// The lag.
	for _, s := range []string{"s1", "s2", "s3", "s4"} {
		stale.hide(claims[s])
	}
	stale.hide(testobj.PV(pv("s8")))
	mu.Lock()
	snapshot = v9
	mu.Unlock()
	stale.freeze(snapshot)
	createPVC("decoy-s9", class("s9")) // fits s9's volume, which the cache shows free
	lagStart := time.Now()
	harness.DeleteClaim(t, admin(t), protector(t), ns, "c-s0")
	delete(in.Claims, ClaimKey{ns, "c-s0"})
	harness.WaitFor(t, cfg.Lag+30*time.Second, "the control volume Released after its claim was deleted", func(context.Context) (bool, error) {
		return slices.Contains(mon.Released(), pv("s0")), nil
	})
	time.Sleep(cfg.Lag - time.Since(lagStart))
	t.Logf("cache lagged for %v (binder resync 1s)", time.Since(lagStart).Round(100*time.Millisecond))

	mu.Lock()
	during := slices.Clone(attempts)
	mu.Unlock()
	for _, a := range during {
		t.Errorf("the binder tried to release on cache evidence alone: %s", a)
	}
	reportViolations(t, "monitor during the lag", mon.Violations())
	if t.Failed() {
		t.FailNow()
	}

	// The cache catches up: everything binds as it should.
	stale.catchUp()
	for _, s := range []string{"s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9"} {
		harness.WaitFor(t, time.Minute, s+" bound after the cache caught up", harness.BoundTo(admin(t), ns, "c-"+s, pv(s)))
	}
	time.Sleep(2 * time.Second) // a couple of resyncs more
	_, violations := settle(t, 30*time.Second, []string{ns}, ns+"-", func() Intent { return in })
	reportViolations(t, "final state", violations)
	reportViolations(t, "monitor", mon.Violations())
	mu.Lock()
	for _, a := range attempts[len(during):] {
		t.Errorf("the binder tried to release after the lag: %s", a)
	}
	mu.Unlock()
	for _, s := range []string{"s5", "s6"} {
		decoy := &corev1.PersistentVolume{}
		harness.Must(t, c.Get(ctx, client.ObjectKey{Name: pv(s) + "-decoy"}, decoy), "reading decoy")
		if decoy.Spec.ClaimRef != nil {
			t.Errorf("%s: the stale claim took the decoy volume: %v", s, decoy.Spec.ClaimRef)
		}
	}
	mu.Lock()
	counts := map[string]int{}
	for _, b := range staleBinds {
		counts[b]++
	}
	t.Logf("s9: writes of the volume made from the stale copy (its claim re-binding it, or the pending claim taking it), all refused by the apiserver: %v", counts)
	mu.Unlock()
	for _, reason := range []string{"PolicyForbidsBinding", "FailedBinding"} {
		for _, m := range eventMessages(t, ns, "decoy-s9", reason) {
			t.Logf("s9: pending claim event %s: %s", reason, m)
		}
	}
	t.Logf("control volume Released as expected; %d monitor releases in all: %v", len(mon.Released()), mon.Released())
}
