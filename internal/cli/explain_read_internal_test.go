package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	k8stesting "k8s.io/client-go/testing"

	"github.com/pvguard/pvguard/clusterstate"
	"github.com/pvguard/pvguard/explain"
	"github.com/pvguard/pvguard/storage"
	. "github.com/pvguard/pvguard/test/testobj"
)

// pagedClientset is a fake clientset whose lists honour Limit and Continue as the apiserver
// does (the fake's own tracker returns every object at once), counting the requests per
// resource.
func pagedClientset(t *testing.T, objs ...runtime.Object) (*fake.Clientset, map[string]int) {
	t.Helper()
	cs := fake.NewClientset(objs...)
	requests := map[string]int{}
	cs.PrependReactor("list", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		la := a.(k8stesting.ListActionImpl)
		requests[la.Resource.Resource]++
		list, err := cs.Tracker().List(la.Resource, la.Kind, la.Namespace)
		if err != nil {
			return true, nil, err
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return true, nil, err
		}
		sort.Slice(items, func(i, j int) bool {
			a, _ := meta.Accessor(items[i])
			b, _ := meta.Accessor(items[j])
			return a.GetNamespace()+"/"+a.GetName() < b.GetNamespace()+"/"+b.GetName()
		})
		from := 0
		if c := la.ListOptions.Continue; c != "" {
			if from, err = strconv.Atoi(c); err != nil {
				return true, nil, fmt.Errorf("continue %q: %w", c, err)
			}
		}
		to, next := len(items), ""
		if l := int(la.ListOptions.Limit); l > 0 && from+l < len(items) {
			to, next = from+l, strconv.Itoa(from+l)
		}
		if err := meta.SetList(list, items[from:to]); err != nil {
			return true, nil, err
		}
		lm, _ := meta.ListAccessor(list)
		lm.SetContinue(next)
		return true, list, nil
	})
	return cs, requests
}

// fakePages reads the pages of cs's claims and volumes (through its lists, so paged and counted
// as pagedClientset's) encoded as the apiserver encodes them, in mediaType (protobuf or JSON).
func fakePages(t *testing.T, cs *fake.Clientset, mediaType string) pageReader {
	info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), mediaType)
	if !ok {
		t.Fatalf("no serializer for %s", mediaType)
	}
	enc := scheme.Codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion)
	return func(ctx context.Context, resource string, o metav1.ListOptions) (io.ReadCloser, error) {
		var list runtime.Object
		var err error
		switch resource {
		case "persistentvolumeclaims":
			list, err = cs.CoreV1().PersistentVolumeClaims("").List(ctx, o)
		case "persistentvolumes":
			list, err = cs.CoreV1().PersistentVolumes().List(ctx, o)
		default:
			t.Fatalf("pages of %s", resource)
		}
		if err != nil {
			return nil, err
		}
		var buf bytes.Buffer
		if err := enc.Encode(list, &buf); err != nil {
			return nil, err
		}
		return io.NopCloser(&buf), nil
	}
}

// TestReadClaimInputReadsPageByPageAndCountsSettledVolumes: the local read keeps the claims the
// binder plans and every volume that is not settled, reads a claim whose volume does not name it
// back, keeps the closest settled volumes and counts the others by class and check, and asks
// for each list page by page.
func TestReadClaimInputReadsPageByPageAndCountsSettledVolumes(t *testing.T) {
	target := PVC("team-a", "data", ClaimClass("local"), ClaimPhase(corev1.ClaimPending))
	var objs []runtime.Object
	objs = append(objs, target, StorageClass("local", "kubernetes.io/no-provisioner"), Node("n1", map[string]string{"zone": "a"}))
	// Settled pairs, claim and volume naming each other: the closest settledKept are kept.
	for i := range settledKept + 5 {
		c := PVC("team-b", fmt.Sprintf("bound-%d", i), ClaimClass("local"), ClaimBoundTo(fmt.Sprintf("pv-bound-%d", i)))
		objs = append(objs, c, PV(fmt.Sprintf("pv-bound-%d", i), Class("local"), BoundTo(c)))
	}
	// A free volume, a pending claim, a volume whose claim is gone (Released), and a claim that
	// names a volume that names another claim.
	half := PVC("team-b", "half", ClaimClass("local"), VolumeName("pv-other"))
	objs = append(objs,
		PV("pv-free", Class("local"), Phase(corev1.VolumeAvailable)),
		PVC("team-c", "waiting", ClaimClass("local")),
		PV("pv-released", Class("local"), ClaimRef("team-b", "gone", "uid-gone"), Phase(corev1.VolumeReleased)),
		half, PV("pv-other", Class("local"), ClaimRef("team-c", "someone", "uid-someone"), Phase(corev1.VolumeBound)),
		Pod("team-a", "web-0", "n1", corev1.PodPending, "data"), Pod("team-b", "web-1", "n1", corev1.PodRunning, "bound-0"),
	)
	cs, requests := pagedClientset(t, objs...)
	in, settled, err := readClaimInput(context.Background(), cs, fakePages(t, cs, runtime.ContentTypeProtobuf), nil, "team-a", "data", 10, settledKept)
	if err != nil {
		t.Fatal(err)
	}
	// Settled: the 45 bound, pv-released and pv-other (which names a claim that does not
	// exist); the closest settledKept are kept. Each fails exactly phase and claimRef, so once
	// settledKept are kept, those with a later name than the last kept are counted unchecked.
	if settled.Total != 7 || settled.ByClass["local"] != 7 || settled.ByCheck[""] != 7 {
		t.Errorf("settled volumes %+v, want 7 of class local, counted without being checked", settled)
	}
	var claims, volumes []string
	for _, c := range in.State.Claims() {
		claims = append(claims, c.Namespace+"/"+c.Name)
	}
	for _, v := range in.State.Volumes() {
		if strings.HasPrefix(v.Name, "pv-bound-") || v.Name == "pv-released" || v.Name == "pv-other" {
			continue
		}
		volumes = append(volumes, v.Name)
		if v.ManagedFields != nil {
			t.Errorf("volume %s kept its managed fields", v.Name)
		}
	}
	slices.Sort(claims)
	slices.Sort(volumes)
	if want := []string{"team-a/data", "team-b/half", "team-c/waiting"}; !slices.Equal(claims, want) {
		t.Errorf("claims %v, want %v", claims, want)
	}
	if want := []string{"pv-free"}; !slices.Equal(volumes, want) {
		t.Errorf("volumes %v, want %v", volumes, want)
	}
	if n := len(in.State.Volumes()) - len(volumes); n != settledKept {
		t.Errorf("kept %d volumes of settled pairs, want %d", n, settledKept)
	}
	if len(in.Pods) != 1 || in.Pods[0].Name != "web-0" || len(in.State.Nodes()) != 1 || in.State.Nodes()[0].Labels["zone"] != "a" {
		t.Errorf("pods %d, nodes %v: want team-a's one pod and node n1 with its labels", len(in.Pods), in.State.Nodes())
	}
	// 48 claims and 48 volumes, ten a page: five requests each.
	if requests["persistentvolumeclaims"] != 5 || requests["persistentvolumes"] != 5 {
		t.Errorf("requests %v, want 5 pages of claims and 5 of volumes", requests)
	}
}

// TestReadClaimInputUnknownClaim: a claim that does not exist is explain.ErrUnknownClaim.
func TestReadClaimInputUnknownClaim(t *testing.T) {
	cs, _ := pagedClientset(t)
	if _, _, err := readClaimInput(context.Background(), cs, fakePages(t, cs, runtime.ContentTypeProtobuf), nil, "team-a", "nope", 10, settledKept); !errors.Is(err, explain.ErrUnknownClaim) {
		t.Fatalf("err %v, want ErrUnknownClaim", err)
	}
}

// TestLocalReadExplainsAsTheWholeCluster compares, over random clusters, the explanation made
// from the whole cluster with the one the local read makes: the same state, what the claim
// waits for, the verdict, and the same rows but for the settled pairs, which each fail
// claimRef.
func TestLocalReadExplainsAsTheWholeCluster(t *testing.T) {
	counted := 0
	for seed := range uint64(200) {
		objs, claims := randomCluster(rand.New(rand.NewPCG(seed, 7)))
		cs, _ := pagedClientset(t, objs...)
		full := wholeState(t, objs)
		for _, c := range claims {
			want, err := explain.Claim(explain.Input{State: full, NodesListed: true}, c.Namespace, c.Name)
			if err != nil {
				t.Fatal(err)
			}
			// Keep one to three settled volumes, so that most clusters have some counted. The lists
			// come in protobuf, as from kube-apiserver, or, for one cluster in four, in JSON.
			keep := 1 + int(seed%3)
			mediaType := runtime.ContentTypeProtobuf
			if seed%4 == 3 {
				mediaType = runtime.ContentTypeJSON
			}
			in, settled, err := readClaimInput(context.Background(), cs, fakePages(t, cs, mediaType), nil, c.Namespace, c.Name, 3, keep)
			if err != nil {
				t.Fatal(err)
			}
			in.Pods, in.Events = nil, nil // the whole state has none either
			in.State = clusterstate.New(in.State.Claims(), in.State.Volumes(), in.State.Classes(), in.State.Nodes())
			got, err := explain.Claim(in, c.Namespace, c.Name)
			if err != nil {
				t.Fatal(err)
			}
			where := fmt.Sprintf("seed %d, claim %s/%s", seed, c.Namespace, c.Name)
			if got.WaitingFor != want.WaitingFor || got.State.String() != want.State.String() {
				t.Errorf("%s: waits for %q (%s), want %q (%s)", where, got.WaitingFor, got.State.String(), want.WaitingFor, want.State.String())
			}
			if !reflect.DeepEqual(got.Verdict, want.Verdict) {
				t.Errorf("%s: verdict %+v, want %+v", where, got.Verdict, want.Verdict)
			}
			var kept []explain.Candidate
			left := 0
			for _, r := range want.Candidates {
				if slices.ContainsFunc(got.Candidates, func(g explain.Candidate) bool { return g.Volume == r.Volume }) {
					kept = append(kept, r)
					continue
				}
				left++
				if f := r.Failed(); len(f) == 0 || !slices.ContainsFunc(f, func(x explain.Result) bool { return x.Check == explain.CheckClaimRef }) {
					t.Errorf("%s: volume %s left out, but it does not fail claimRef: %+v", where, r.Volume, r.Checks)
				}
			}
			counted += settled.Total
			if left != settled.Total {
				t.Errorf("%s: %d volumes left out, %d counted", where, left, settled.Total)
			}
			// The settled volumes kept are the keep closest of them, in the whole table's order.
			var settledOrder []string
			for _, r := range want.Candidates {
				if settledVolume(volumeFactsOf(volumeNamed(objs, r.Volume)), c, wholeClaims(objs)) {
					settledOrder = append(settledOrder, r.Volume)
				}
			}
			for i, name := range settledOrder {
				shown := slices.ContainsFunc(got.Candidates, func(g explain.Candidate) bool { return g.Volume == name })
				if shown != (i < keep) {
					t.Errorf("%s: settled volume %s, %d closest of them, kept %v (keep %d)", where, name, i+1, shown, keep)
				}
			}
			if !reflect.DeepEqual(got.Candidates, kept) {
				t.Errorf("%s: rows differ from the whole cluster's:\n got %+v\nwant %+v", where, got.Candidates, kept)
			}
		}
	}
	if counted == 0 {
		t.Fatal("no cluster had a volume of a settled pair counted rather than kept: the comparison tested nothing")
	}
}

// volumeNamed is the volume of objs named name.
func volumeNamed(objs []runtime.Object, name string) *corev1.PersistentVolume {
	for _, o := range objs {
		if v, ok := o.(*corev1.PersistentVolume); ok && v.Name == name {
			return v
		}
	}
	return nil
}

// volumeFactsOf is what scanVolume reads of v's encoding, read from v itself.
func volumeFactsOf(v *corev1.PersistentVolume) volumeFacts {
	f := volumeFacts{name: v.Name, class: storage.VolumeClass(v), phase: string(v.Status.Phase)}
	if r := v.Spec.ClaimRef; r != nil {
		f.hasRef, f.refNamespace, f.refName, f.refUID = true, r.Namespace, r.Name, string(r.UID)
	}
	return f
}

// wholeClaims are the uids of the claims of objs without a volume: those the local read keeps
// whole.
func wholeClaims(objs []runtime.Object) map[types.UID]bool {
	out := map[types.UID]bool{}
	for _, o := range objs {
		if c, ok := o.(*corev1.PersistentVolumeClaim); ok && c.Spec.VolumeName == "" {
			out[c.UID] = true
		}
	}
	return out
}

// wholeState is the state of every object, as the whole-cluster read has it.
func wholeState(t *testing.T, objs []runtime.Object) *clusterstate.State {
	t.Helper()
	return NewView(objs...).State
}

// randomCluster is a small cluster of two classes: settled pairs, free volumes of several
// sizes and modes, pending claims, claims pre-bound to a volume, volumes pre-bound to a claim,
// volumes Bound to a claim that does not name them yet, Released volumes and claims naming a
// volume that names another. It returns the objects and
// the claims to explain.
func randomCluster(r *rand.Rand) ([]runtime.Object, []*corev1.PersistentVolumeClaim) {
	objs := []runtime.Object{StorageClass("fast", "kubernetes.io/no-provisioner"), StorageClass("slow", "kubernetes.io/no-provisioner"),
		Node("n1", nil), Node("n2", nil)}
	classes := []string{"fast", "slow"}
	sizes := []string{"1Gi", "2Gi", "5Gi", "10Gi"}
	modes := []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce, corev1.ReadWriteMany}
	var explained []*corev1.PersistentVolumeClaim
	for i := range 4 + r.IntN(8) {
		class := classes[r.IntN(2)]
		name := fmt.Sprintf("pv-%d", i)
		switch r.IntN(6) {
		case 0, 1: // a settled pair
			c := PVC("ns", fmt.Sprintf("bound-%d", i), ClaimClass(class), ClaimBoundTo(name))
			objs = append(objs, c, PV(name, Class(class), Capacity(sizes[r.IntN(4)]), BoundTo(c)))
			if r.IntN(3) == 0 {
				explained = append(explained, c)
			}
		case 2: // free
			objs = append(objs, PV(name, Class(class), Capacity(sizes[r.IntN(4)]), AccessModes(modes[r.IntN(2)]), Phase(corev1.VolumeAvailable)))
		case 3: // Released
			objs = append(objs, PV(name, Class(class), Capacity(sizes[r.IntN(4)]), ClaimRef("ns", "gone", "uid-gone"), Phase(corev1.VolumeReleased)))
		case 4: // pre-bound to a pending claim
			c := PVC("ns", fmt.Sprintf("prebound-%d", i), ClaimClass(class), Request(sizes[r.IntN(4)]))
			objs = append(objs, c, PV(name, Class(class), Capacity(sizes[r.IntN(4)]), ClaimRef("ns", c.Name, ""), Phase(corev1.VolumeAvailable)))
			explained = append(explained, c)
		case 5: // half bound: the volume names a pending claim by uid and is Bound, the claim not yet written
			c := PVC("ns", fmt.Sprintf("halfbound-%d", i), ClaimClass(class), Request(sizes[r.IntN(4)]))
			objs = append(objs, c, PV(name, Class(class), Capacity(sizes[r.IntN(4)]), BoundTo(c)))
			explained = append(explained, c)
		}
	}
	for i := range 2 + r.IntN(5) {
		mods := []PVCMod{ClaimClass(classes[r.IntN(2)]), Request(sizes[r.IntN(4)]), ClaimAccessModes(modes[r.IntN(2)]), ClaimPhase(corev1.ClaimPending)}
		if r.IntN(4) == 0 {
			mods = append(mods, VolumeName(fmt.Sprintf("pv-%d", r.IntN(12)))) // names a volume that may name another claim
		}
		c := PVC("ns", fmt.Sprintf("pending-%d", i), mods...)
		objs = append(objs, c)
		explained = append(explained, c)
	}
	return objs, explained
}
