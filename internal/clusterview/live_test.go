package clusterview_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/pvguard/pvguard/clusterstate"
	"github.com/pvguard/pvguard/internal/clusterview"
	"github.com/pvguard/pvguard/test/testobj"
)

// countingReader counts the lists made through it, by list type and namespace.
type countingReader struct {
	client.Reader
	mu    sync.Mutex
	lists map[string]int
}

func (c *countingReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	o := (&client.ListOptions{}).ApplyOptions(opts)
	c.mu.Lock()
	c.lists[fmt.Sprintf("%T %s", list, o.Namespace)]++
	c.mu.Unlock()
	return c.Reader.List(ctx, list, opts...)
}

// TestLiveViewReadsOnlyTheAPIServer: a LiveView answers every question from live reads, as
// clusterstate.State answers it over the same objects, never reading the cache (whose every read
// fails here) nor falling back to it; it lists the pods of the claim's namespace only, and the
// nodes once per view whoever asks.
func TestLiveViewReadsOnlyTheAPIServer(t *testing.T) {
	ctx := context.Background()
	claims := []*corev1.PersistentVolumeClaim{
		testobj.PVC("ns-a", "data", testobj.ClaimUID("u-1"), testobj.VolumeName("pv-1")),
		testobj.PVC("ns-b", "data", testobj.ClaimUID("u-2"), testobj.VolumeName("pv-1")),
		testobj.PVC("ns-b", "logs", testobj.ClaimUID("u-3")),
	}
	volumes := []*corev1.PersistentVolume{
		testobj.PV("pv-1", testobj.ClaimRef("ns-a", "data", "u-1")),
		testobj.PV("pv-2", testobj.ClaimRef("ns-b", "logs", "")),
		testobj.PV("pv-3"),
	}
	classes := []*storagev1.StorageClass{testobj.StorageClass("gold", "csi.example.com")}
	nodes := []*corev1.Node{testobj.Node("node-1", map[string]string{"zone": "a"}), testobj.Node("node-2", nil)}
	pods := []*corev1.Pod{
		testobj.Pod("ns-a", "p-1", "node-1", corev1.PodRunning, "data"),
		testobj.Pod("ns-b", "p-2", "node-2", corev1.PodRunning, "data", "logs"),
	}
	var objs []client.Object
	for _, list := range [][]client.Object{toObjects(claims), toObjects(volumes), toObjects(classes), toObjects(nodes), toObjects(pods)} {
		for _, o := range list {
			objs = append(objs, o.DeepCopyObject().(client.Object))
		}
	}
	live := &countingReader{Reader: fake.NewClientBuilder().WithObjects(objs...).Build(), lists: map[string]int{}}
	source := clusterview.New(testobj.FailingReader{Source: "the cache"}, live) // a LiveView reads no cache
	view := source.LiveView(ctx)
	state := clusterstate.New(claims, volumes, classes, nodes).WithPods(pods)

	check := func(what string, got, want []string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: live view %v, state %v", what, got, want)
		}
	}
	for _, name := range []string{"pv-1", "pv-2", "pv-3", "pv-none"} {
		got, err := view.PersistentVolume(name)
		want, _ := state.PersistentVolume(name)
		check("volume "+name, keys(nonNil(got)), keys(nonNil(want)), err)
		gotC, err := view.ClaimsNamingVolume(name)
		wantC, _ := state.ClaimsNamingVolume(name)
		check("claims naming "+name, keys(gotC), keys(wantC), err)
	}
	for _, k := range [][2]string{{"ns-a", "data"}, {"ns-b", "data"}, {"ns-b", "logs"}, {"ns-c", "none"}} {
		got, err := view.PersistentVolumeClaim(k[0], k[1])
		want, _ := state.PersistentVolumeClaim(k[0], k[1])
		check("claim "+k[0]+"/"+k[1], keys(nonNil(got)), keys(nonNil(want)), err)
		gotV, err := view.VolumesClaiming(k[0], k[1])
		wantV, _ := state.VolumesClaiming(k[0], k[1])
		check("volumes claiming "+k[0]+"/"+k[1], keys(gotV), keys(wantV), err)
		gotP, err := view.PodsUsingClaim(k[0], k[1])
		wantP, _ := state.PodsUsingClaim(k[0], k[1])
		check("pods using "+k[0]+"/"+k[1], keys(gotP), keys(wantP), err)
	}
	for _, uid := range []types.UID{"u-1", "u-3", "u-none"} {
		got, err := view.ClaimWaitingForData(uid)
		want, _ := state.ClaimWaitingForData(uid)
		check("claim with uid "+string(uid), keys(nonNil(got)), keys(nonNil(want)), err)
	}
	for _, name := range []string{"node-1", "node-none"} {
		got, err := view.Node(name)
		want, _ := state.Node(name)
		check("node "+name, keys(nonNil(got)), keys(nonNil(want)), err)
	}
	gotSC, err := view.StorageClasses()
	check("classes", keys(gotSC), keys(classes), err)

	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			got, err := view.ListNodes()
			if err != nil || len(got) != 2 || got[0].Labels["zone"] != "a" {
				t.Errorf("ListNodes: %v (%v), want both nodes with their labels", keys(got), err)
			}
		})
	}
	wg.Wait()
	if _, err := source.LiveView(ctx).ListNodes(); err != nil {
		t.Fatal(err)
	}
	if n := live.lists["*v1.PartialObjectMetadataList "]; n != 2 {
		t.Errorf("%d lists of the nodes by two views, want one each", n)
	}
	if n := live.lists["*v1.PodList "]; n != 0 {
		t.Errorf("%d lists of every namespace's pods, want only the claim's namespace listed", n)
	}
	if n := live.lists["*v1.PodList ns-b"]; n != 2 {
		t.Errorf("%d lists of ns-b's pods for two questions, want 2", n)
	}
}

// TestListKindReadsTheCacheOrLive: the cache view lists a kind of clusterstate.Readables from
// the informer's store (its own objects), the LiveView from the apiserver only.
func TestListKindReadsTheCacheOrLive(t *testing.T) {
	ctx := context.Background()
	const vac = "VolumeAttributesClass"
	cached := &storagev1.VolumeAttributesClass{ObjectMeta: metav1.ObjectMeta{Name: "cached"}, DriverName: "csi.example.com"}
	live := &storagev1.VolumeAttributesClass{ObjectMeta: metav1.ObjectMeta{Name: "live"}, DriverName: "csi.example.com"}
	c := newInformerCache()
	if err := c.add(cached); err != nil {
		t.Fatal(err)
	}
	source := clusterview.New(c, fake.NewClientBuilder().WithObjects(live).Build())
	got, err := source.View(ctx).ListKind(vac)
	if err != nil || len(got) != 1 || got[0] != runtime.Object(cached) {
		t.Errorf("cache view: %v (%v), want the store's own class cached", got, err)
	}
	got, err = source.LiveView(ctx).ListKind(vac)
	if err != nil || len(got) != 1 || got[0].(*storagev1.VolumeAttributesClass).Name != "live" {
		t.Errorf("live view: %v (%v), want the class live", got, err)
	}
	if _, err := source.View(ctx).ListKind(clusterstate.KindNode); err == nil {
		t.Error("ListKind(Node): no error, though the View's typed reads serve nodes")
	}
}

// TestCacheViewNeverReadsLive: a CacheView answers from the cache, and takes a miss for an
// absence, where View reads the missing object live (the audit reads through it the claims of
// Released volumes, which are gone by definition).
func TestCacheViewNeverReadsLive(t *testing.T) {
	ctx := context.Background()
	c := newInformerCache()
	cached := testobj.PVC("ns-a", "data", testobj.ClaimUID("u-1"))
	if err := c.add(cached, testobj.PV("pv-1")); err != nil {
		t.Fatal(err)
	}
	source := clusterview.New(c, testobj.FailingReader{Source: "the apiserver"}) // a CacheView reads nothing live
	v := source.CacheView(ctx)
	if got, err := v.PersistentVolumeClaim("ns-a", "data"); err != nil || got == nil || got.UID != "u-1" {
		t.Errorf("cached claim: %v (%v), want the cache's", got, err)
	}
	if got, err := v.PersistentVolume("pv-1"); err != nil || got == nil {
		t.Errorf("cached volume: %v (%v), want the cache's", got, err)
	}
	if got, err := v.PersistentVolumeClaim("ns-a", "gone"); err != nil || got != nil {
		t.Errorf("missing claim: %v (%v), want none and no live read", got, err)
	}
	if got, err := v.PersistentVolume("gone"); err != nil || got != nil {
		t.Errorf("missing volume: %v (%v), want none and no live read", got, err)
	}
	// The admission view reads the miss live (here: fails), which the audit must not.
	if _, err := source.View(ctx).PersistentVolumeClaim("ns-a", "gone"); err == nil {
		t.Error("View: a miss was not read live; the test's apiserver would have failed it")
	}
}
