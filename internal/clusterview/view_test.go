package clusterview_test

import (
	"context"
	"fmt"
	"reflect"
	goruntime "runtime"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/pvguard/pvguard/clusterstate"
	"github.com/pvguard/pvguard/internal/clusterview"
	"github.com/pvguard/pvguard/storage"
	"github.com/pvguard/pvguard/test/testobj"
	"github.com/pvguard/pvguard/webhook"
)

// informerCache is an informer cache of client-go informers (what controller-runtime's are),
// never started: tests fill their stores. Get and List read the stores, copying the top-level
// struct as controller-runtime's cache does. Only what the view and SetupIndexes use is there.
type informerCache struct {
	cache.Cache
	informers map[reflect.Type]toolscache.SharedIndexInformer
}

func newInformerCache() *informerCache {
	return &informerCache{informers: map[reflect.Type]toolscache.SharedIndexInformer{}}
}

func (c *informerCache) informer(obj runtime.Object) toolscache.SharedIndexInformer {
	t := reflect.TypeOf(obj)
	inf, ok := c.informers[t]
	if !ok {
		inf = toolscache.NewSharedIndexInformer(&toolscache.ListWatch{}, obj, 0, toolscache.Indexers{})
		c.informers[t] = inf
	}
	return inf
}

func (c *informerCache) GetInformer(_ context.Context, obj client.Object, _ ...cache.InformerGetOption) (cache.Informer, error) {
	return c.informer(obj), nil
}

func (c *informerCache) add(objs ...client.Object) error {
	for _, o := range objs {
		if err := c.informer(o).GetStore().Add(o); err != nil {
			return err
		}
	}
	return nil
}

func (c *informerCache) Get(_ context.Context, key client.ObjectKey, out client.Object, _ ...client.GetOption) error {
	k := key.Name
	if key.Namespace != "" {
		k = key.Namespace + "/" + key.Name
	}
	obj, ok, err := c.informer(out).GetStore().GetByKey(k)
	if err != nil {
		return err
	}
	if !ok {
		return apierrors.NewNotFound(schema.GroupResource{}, key.Name)
	}
	reflect.ValueOf(out).Elem().Set(reflect.ValueOf(obj).Elem())
	return nil
}

func (c *informerCache) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	var kind runtime.Object
	switch list.(type) {
	case *storagev1.StorageClassList:
		kind = &storagev1.StorageClass{}
	default:
		return fmt.Errorf("the test cache lists no %T", list)
	}
	var items []runtime.Object
	for _, o := range c.informer(kind).GetStore().List() {
		items = append(items, o.(runtime.Object))
	}
	return apimeta.SetList(list, items)
}

// TestViewListsAsTheState: the view's indexed lists (claims naming a volume, volumes claiming a
// claim, the claim with a uid, the pods using a claim) over an informer cache that SetupIndexes
// indexed answer what clusterstate.State, which scans the same objects, answers, for every
// question with an answer and for questions without one; and they are the cache's own objects.
func TestViewListsAsTheState(t *testing.T) {
	ctx := context.Background()
	var claims []*corev1.PersistentVolumeClaim
	var volumes []*corev1.PersistentVolume
	var pods []*corev1.Pod
	for i := range 40 {
		ns := fmt.Sprintf("ns-%d", i%3)
		name := fmt.Sprintf("data-%d", i%13) // names repeat across namespaces
		mods := []testobj.PVCMod{testobj.ClaimUID(fmt.Sprintf("uid-%d", i))}
		if i%4 != 0 {
			mods = append(mods, testobj.VolumeName(fmt.Sprintf("pv-%d", i%17))) // two claims may name one volume
		}
		if i%3 == 0 {
			// Waiting for a populator's data while unbound; bound, it waits for nothing.
			mods = append(mods, testobj.DataSourceRef("example.io", "Seed", "seed"))
		}
		c := testobj.PVC(ns, name, mods...)
		if slices.ContainsFunc(claims, func(o *corev1.PersistentVolumeClaim) bool { return o.Namespace == ns && o.Name == name }) {
			continue
		}
		claims = append(claims, c)
		if i%5 != 0 {
			pods = append(pods, testobj.Pod(ns, fmt.Sprintf("pod-%d", i), "node-1", corev1.PodRunning, name))
		}
	}
	for i := range 20 {
		var mods []testobj.PVMod
		if i%3 != 0 {
			mods = append(mods, testobj.ClaimRef(fmt.Sprintf("ns-%d", i%3), fmt.Sprintf("data-%d", i%7), "")) // some name no claim
		}
		volumes = append(volumes, testobj.PV(fmt.Sprintf("pv-%d", i), mods...))
	}
	c := newInformerCache()
	if err := clusterview.SetupIndexes(ctx, c, nil); err != nil {
		t.Fatal(err)
	}
	for _, objs := range [][]client.Object{toObjects(claims), toObjects(volumes), toObjects(pods)} {
		if err := c.add(objs...); err != nil {
			t.Fatal(err)
		}
	}
	view := clusterview.New(c, fake.NewClientBuilder().Build()).View(ctx)
	state := clusterstate.New(claims, volumes, nil, nil).WithPods(pods)

	answers := 0
	same := func(what string, got, want []string, cached bool) {
		t.Helper()
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s: view %v, state %v", what, got, want)
		}
		if !cached {
			t.Errorf("%s: not the cache's own objects", what)
		}
		answers += len(want)
	}
	for i := range 20 {
		name := fmt.Sprintf("pv-%d", i)
		got, err := view.ClaimsNamingVolume(name)
		want, _ := state.ClaimsNamingVolume(name)
		if err != nil {
			t.Fatal(err)
		}
		same("claims naming "+name, keys(got), keys(want), own(c, got))
	}
	for ns := range 4 {
		for i := range 14 {
			namespace, name := fmt.Sprintf("ns-%d", ns), fmt.Sprintf("data-%d", i)
			gotV, err := view.VolumesClaiming(namespace, name)
			wantV, _ := state.VolumesClaiming(namespace, name)
			if err != nil {
				t.Fatal(err)
			}
			same("volumes claiming "+namespace+"/"+name, keys(gotV), keys(wantV), own(c, gotV))
			gotP, err := view.PodsUsingClaim(namespace, name)
			wantP, _ := state.PodsUsingClaim(namespace, name)
			if err != nil {
				t.Fatal(err)
			}
			same("pods using "+namespace+"/"+name, keys(gotP), keys(wantP), own(c, gotP))
		}
	}
	for i := range 45 {
		uid := types.UID(fmt.Sprintf("uid-%d", i))
		got, err := view.ClaimWaitingForData(uid)
		want, _ := state.ClaimWaitingForData(uid)
		if err != nil {
			t.Fatal(err)
		}
		same("claim with "+string(uid), keys(nonNil(got)), keys(nonNil(want)), own(c, nonNil(got)))
	}
	waiting := 0
	for _, c := range claims {
		if storage.WaitsForData(c) {
			waiting++
		}
	}
	if waiting < 2 || waiting == len(claims) {
		t.Fatalf("%d of %d claims wait for data: the cluster no longer exercises the uid index", waiting, len(claims))
	}
	if answers < 60 {
		t.Fatalf("only %d objects in all the answers: the cluster no longer exercises the lists", answers)
	}
}

func toObjects[T client.Object](in []T) []client.Object {
	out := make([]client.Object, len(in))
	for i, o := range in {
		out[i] = o
	}
	return out
}

func nonNil[T client.Object](o T) []T {
	if reflect.ValueOf(o).IsNil() {
		return nil
	}
	return []T{o}
}

func keys[T client.Object](objs []T) []string {
	out := []string{}
	for _, o := range objs {
		out = append(out, o.GetNamespace()+"/"+o.GetName())
	}
	return out
}

// own reports whether every object is the one the cache's store holds.
func own[T client.Object](c *informerCache, objs []T) bool {
	for _, o := range objs {
		k, _ := toolscache.MetaNamespaceKeyFunc(o)
		held, ok, _ := c.informer(o).GetStore().GetByKey(k)
		if !ok || held != any(o) {
			return false
		}
	}
	return true
}

// BenchmarkIndexMemory is the heap the indexes of SetupIndexes hold over 100,000 bound pairs
// (claims and volumes as the cache keeps them, one pod per claim), beside the same indexes filed
// as controller-runtime's IndexField files them (every value of a namespaced object twice: under
// its namespace and under all namespaces). Results are in docs/benchmarks.md.
//
//	go test ./webhook/ -run '^$' -bench IndexMemory -benchtime 1x
func BenchmarkIndexMemory(b *testing.B) {
	objs := indexedPairs(100_000)
	held := func(index func(c *informerCache) error) float64 {
		var before, after goruntime.MemStats
		goruntime.GC()
		goruntime.ReadMemStats(&before)
		c := newInformerCache()
		if err := index(c); err != nil {
			b.Fatal(err)
		}
		if err := c.add(objs...); err != nil {
			b.Fatal(err)
		}
		goruntime.GC()
		goruntime.ReadMemStats(&after)
		goruntime.KeepAlive(c)
		return float64(after.HeapAlloc - before.HeapAlloc)
	}
	for b.Loop() {
		stores := held(func(*informerCache) error { return nil })
		now := held(func(c *informerCache) error { return clusterview.SetupIndexes(context.Background(), c, nil) })
		doubled := held(func(c *informerCache) error { return clusterview.SetupDoubledIndexes(c) })
		b.ReportMetric((now-stores)/(1<<20), "indexes-MB")
		b.ReportMetric((doubled-stores)/(1<<20), "doubled-indexes-MB")
	}
}

// indexedPairs are n bound pairs and a pod using each claim, as BenchmarkIndexMemory and
// BenchmarkIndexLookup index them.
func indexedPairs(n int) []client.Object {
	var objs []client.Object
	for i := range n {
		ns := fmt.Sprintf("ns-%03d", i%200)
		claim := testobj.PVC(ns, fmt.Sprintf("data-%06d", i), testobj.ClaimUID(fmt.Sprintf("%08d-5f0e-4c7a-9d55-4a3f0c2b9e1d", i)), testobj.VolumeName(fmt.Sprintf("pvc-%08d-5f0e-4c7a-9d55-4a3f0c2b9e1d", i)))
		pv := testobj.PV(claim.Spec.VolumeName, testobj.ClaimRef(ns, claim.Name, string(claim.UID)))
		objs = append(objs, claim, pv, testobj.Pod(ns, fmt.Sprintf("app-%06d", i), "node-1", corev1.PodRunning, claim.Name))
	}
	return objs
}

// BenchmarkIndexLookup is what a review's lookups through the indexes cost over 100,000 bound
// pairs: the claims naming a volume, the volumes naming a claim, the claim with a uid and the
// pods using a claim, each answered with the one object filed under it. Results are in
// docs/benchmarks.md, "The informers' indexes".
//
//	go test ./internal/clusterview/ -run '^$' -bench IndexLookup -benchmem
func BenchmarkIndexLookup(b *testing.B) {
	const pairs = 100_000
	ctx := context.Background()
	c := newInformerCache()
	if err := clusterview.SetupIndexes(ctx, c, nil); err != nil {
		b.Fatal(err)
	}
	if err := c.add(indexedPairs(pairs)...); err != nil {
		b.Fatal(err)
	}
	view := clusterview.New(c, fake.NewClientBuilder().Build()).View(ctx)
	type asked struct{ ns, claim, uid, volume string }
	var asks []asked
	for i := 0; i < pairs; i += 97 {
		asks = append(asks, asked{fmt.Sprintf("ns-%03d", i%200), fmt.Sprintf("data-%06d", i), fmt.Sprintf("%08d-5f0e-4c7a-9d55-4a3f0c2b9e1d", i), fmt.Sprintf("pvc-%08d-5f0e-4c7a-9d55-4a3f0c2b9e1d", i)})
	}
	i := 0
	for b.Loop() {
		a := asks[i%len(asks)]
		i++
		claims, err := view.ClaimsNamingVolume(a.volume)
		if err != nil || len(claims) != 1 {
			b.Fatalf("claims naming %s: %d, %v", a.volume, len(claims), err)
		}
		volumes, err := view.VolumesClaiming(a.ns, a.claim)
		if err != nil || len(volumes) != 1 {
			b.Fatalf("volumes claiming %s/%s: %d, %v", a.ns, a.claim, len(volumes), err)
		}
		if claim, err := view.ClaimWaitingForData(types.UID(a.uid)); err != nil || claim != nil {
			b.Fatalf("bound claim with uid %s waiting for data: %v, %v", a.uid, claim, err)
		}
		pods, err := view.PodsUsingClaim(a.ns, a.claim)
		if err != nil || len(pods) != 1 {
			b.Fatalf("pods using %s/%s: %d, %v", a.ns, a.claim, len(pods), err)
		}
	}
}

// The admission handlers read through a Source, live where a denial is judged again.
var _ webhook.FreshViewSource = &clusterview.Source{}
