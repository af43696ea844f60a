package clusterstate_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvguard/pvguard/clusterstate"
)

// randomObjects makes claims and volumes with names, links and uids drawn from small sets, so
// that names repeat, several claims name one volume and several volumes one claim.
func randomObjects(rng *rand.Rand, n int) ([]*corev1.PersistentVolumeClaim, []*corev1.PersistentVolume, []*corev1.Node) {
	var claims []*corev1.PersistentVolumeClaim
	var volumes []*corev1.PersistentVolume
	var nodes []*corev1.Node
	for range n {
		c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{
			Namespace: fmt.Sprintf("ns-%d", rng.IntN(3)), Name: fmt.Sprintf("c-%d", rng.IntN(n)), UID: types.UID(fmt.Sprintf("u-%d", rng.IntN(n)))}}
		if rng.IntN(2) == 0 {
			c.Spec.VolumeName = fmt.Sprintf("pv-%d", rng.IntN(n))
		}
		claims = append(claims, c)
		v := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pv-%d", rng.IntN(n))}}
		if rng.IntN(2) == 0 {
			v.Spec.ClaimRef = &corev1.ObjectReference{Namespace: fmt.Sprintf("ns-%d", rng.IntN(3)), Name: fmt.Sprintf("c-%d", rng.IntN(n))}
		}
		volumes = append(volumes, v)
		nodes = append(nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n-%d", rng.IntN(n)), UID: types.UID(fmt.Sprint(len(nodes)))}})
	}
	return claims, volumes, nodes
}

// last returns the last element of list that match accepts, or nil.
func last[T any](list []*T, match func(*T) bool) *T {
	var out *T
	for _, o := range list {
		if match(o) {
			out = o
		}
	}
	return out
}

// TestLookupsAgreeWithAScan holds every index to a scan of the lists: the last object of a key,
// and every object naming another, in list order.
func TestLookupsAgreeWithAScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 200 {
		claims, volumes, nodes := randomObjects(rng, 1+rng.IntN(12))
		s := clusterstate.New(claims, volumes, nil, nodes)
		for j := range 30 {
			ns, c, pv, n := fmt.Sprintf("ns-%d", j%4), fmt.Sprintf("c-%d", j%13), fmt.Sprintf("pv-%d", j%13), fmt.Sprintf("n-%d", j%13)
			uid := types.UID(fmt.Sprintf("u-%d", j%13))
			if got, _ := s.PersistentVolume(pv); got != last(volumes, func(v *corev1.PersistentVolume) bool { return v.Name == pv }) {
				t.Fatalf("instance %d: PersistentVolume(%s) = %v", i, pv, got)
			}
			if got, _ := s.PersistentVolumeClaim(ns, c); got != last(claims, func(o *corev1.PersistentVolumeClaim) bool { return o.Namespace == ns && o.Name == c }) {
				t.Fatalf("instance %d: PersistentVolumeClaim(%s, %s) = %v", i, ns, c, got)
			}
			if got, _ := s.ClaimWithUID(uid); got != last(claims, func(o *corev1.PersistentVolumeClaim) bool { return o.UID == uid }) {
				t.Fatalf("instance %d: ClaimWithUID(%s) = %v", i, uid, got)
			}
			if got, _ := s.Node(n); got != last(nodes, func(o *corev1.Node) bool { return o.Name == n }) {
				t.Fatalf("instance %d: Node(%s) = %v", i, n, got)
			}
			var naming []*corev1.PersistentVolumeClaim
			for _, o := range claims {
				if o.Spec.VolumeName == pv {
					naming = append(naming, o)
				}
			}
			if got, _ := s.ClaimsNamingVolume(pv); !slices.Equal(got, naming) {
				t.Fatalf("instance %d: ClaimsNamingVolume(%s) = %v, want %v", i, pv, claimNames(got), claimNames(naming))
			}
			var claiming []*corev1.PersistentVolume
			for _, o := range volumes {
				if ref := o.Spec.ClaimRef; ref != nil && ref.Namespace == ns && ref.Name == c {
					claiming = append(claiming, o)
				}
			}
			if got, _ := s.VolumesClaiming(ns, c); !slices.Equal(got, claiming) {
				t.Fatalf("instance %d: VolumesClaiming(%s, %s) = %v, want %v", i, ns, c, volumeNames(got), volumeNames(claiming))
			}
		}
		if got, _ := s.ClaimsNamingVolume(""); got != nil {
			t.Fatalf("instance %d: ClaimsNamingVolume(\"\") = %v: a claim without spec.volumeName names no volume", i, got)
		}
	}
}

func claimNames(claims []*corev1.PersistentVolumeClaim) []string {
	var out []string
	for _, c := range claims {
		out = append(out, c.Namespace+"/"+c.Name)
	}
	return out
}

func volumeNames(volumes []*corev1.PersistentVolume) []string {
	var out []string
	for _, v := range volumes {
		out = append(out, v.Name)
	}
	return out
}

// TestNewKeepsTheLists: a State holds the lists it is given, not copies.
func TestNewKeepsTheLists(t *testing.T) {
	claims, volumes, nodes := randomObjects(rand.New(rand.NewPCG(3, 4)), 5)
	classes := []*storagev1.StorageClass{{ObjectMeta: metav1.ObjectMeta{Name: "fast"}}}
	s := clusterstate.New(claims, volumes, classes, nodes)
	if &s.Claims()[0] != &claims[0] || &s.Volumes()[0] != &volumes[0] || &s.Classes()[0] != &classes[0] || &s.Nodes()[0] != &nodes[0] {
		t.Fatal("the State copied a list it was given")
	}
	if got, _ := s.StorageClasses(); &got[0] != &classes[0] {
		t.Fatal("StorageClasses copied the classes")
	}
	objs := s.Objects()
	if len(objs) != 1+len(claims)+len(volumes) || objs[0] != any(classes[0]) || objs[1] != any(claims[0]) || objs[len(objs)-1] != any(volumes[len(volumes)-1]) {
		t.Fatalf("Objects() = %v: want the classes, the claims, then the volumes", objs)
	}
}

// TestConcurrentFirstLookups: goroutines that look up at once, before any index exists, build
// each index once and all find the same objects (run with -race).
func TestConcurrentFirstLookups(t *testing.T) {
	claims, volumes, nodes := randomObjects(rand.New(rand.NewPCG(5, 6)), 200)
	s := clusterstate.New(claims, volumes, nil, nodes)
	want := clusterstate.New(claims, volumes, nil, nodes)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				j := (i + g*25) % 200
				pv, c := fmt.Sprintf("pv-%d", j), fmt.Sprintf("c-%d", j)
				a, _ := s.PersistentVolume(pv)
				b, _ := want.PersistentVolume(pv)
				x, _ := s.VolumesClaiming("ns-1", c)
				y, _ := want.VolumesClaiming("ns-1", c)
				p, _ := s.ClaimsNamingVolume(pv)
				q, _ := want.ClaimsNamingVolume(pv)
				if a != b || !slices.Equal(x, y) || !slices.Equal(p, q) {
					t.Errorf("concurrent lookups of %s and %s disagree", pv, c)
					return
				}
				_, _ = s.PersistentVolumeClaim("ns-1", c)
				_, _ = s.ClaimWithUID(types.UID(fmt.Sprintf("u-%d", j)))
				_, _ = s.Node(fmt.Sprintf("n-%d", j))
			}
		})
	}
	wg.Wait()
}

// TestLookupsDoNotAllocate: once its index is built, a lookup allocates nothing; the audit makes
// several per object.
func TestLookupsDoNotAllocate(t *testing.T) {
	claims, volumes, nodes := randomObjects(rand.New(rand.NewPCG(7, 8)), 50)
	s := clusterstate.New(claims, volumes, nil, nodes)
	lookups := func() {
		_, _ = s.PersistentVolume("pv-1")
		_, _ = s.PersistentVolumeClaim("ns-1", "c-1")
		_, _ = s.ClaimsNamingVolume("pv-1")
		_, _ = s.VolumesClaiming("ns-1", "c-1")
		_, _ = s.ClaimWithUID("u-1")
		_, _ = s.Node("n-1")
		_, _ = s.StorageClasses()
	}
	lookups()
	if n := testing.AllocsPerRun(100, lookups); n != 0 {
		t.Fatalf("%v allocations a round of lookups, want none", n)
	}
}

func TestKeys(t *testing.T) {
	for _, tc := range []struct {
		got, want clusterstate.Key
	}{
		{clusterstate.VolumeKey("pv-1"), clusterstate.Key{Kind: "PersistentVolume", Name: "pv-1"}},
		{clusterstate.ClaimKey("ns", "c"), clusterstate.Key{Kind: "PersistentVolumeClaim", Namespace: "ns", Name: "c"}},
		{clusterstate.ClassKey("fast"), clusterstate.Key{Kind: "StorageClass", Name: "fast"}},
	} {
		if tc.got != tc.want {
			t.Errorf("key %v, want %v", tc.got, tc.want)
		}
	}
	if clusterstate.ClaimKey("ns", "c") == (clusterstate.Key{Namespace: "ns", Name: "c"}) {
		t.Error("a claim's key equals a key without a kind")
	}
}

// TestReplacingClaimsOrNodesKeepsTheRest: a reader that narrows a state's claims or nodes (the
// NoVolumeFits pass, explain's copies of the claims) keeps its pods and the kinds it was
// read with, so that no rule reading them fails on the narrowed state.
func TestReplacingClaimsOrNodesKeepsTheRest(t *testing.T) {
	const vac = clusterstate.Kind("VolumeAttributesClass")
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "app"}}
	gold := &storagev1.VolumeAttributesClass{ObjectMeta: metav1.ObjectMeta{Name: "gold"}}
	st := clusterstate.New(nil, nil, nil, nil).WithPods([]*corev1.Pod{pod}).WithKind(vac, []runtime.Object{gold})
	for name, narrowed := range map[string]*clusterstate.State{
		"WithClaims": st.WithClaims([]*corev1.PersistentVolumeClaim{claim}),
		"WithNodes":  st.WithNodes([]*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}}),
	} {
		if got, err := narrowed.ListKind(vac); err != nil || len(got) != 1 {
			t.Errorf("%s: ListKind(%s) = %d objects, %v; want gold", name, vac, len(got), err)
		}
		if got := narrowed.Pods(); len(got) != 1 {
			t.Errorf("%s: %d pods, want the state's one", name, len(got))
		}
	}
}
