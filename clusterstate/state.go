package clusterstate

import (
	"maps"
	"sync"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvguard/pvguard/storage"
)

// State is a fixed set of cluster objects: claims, volumes, StorageClasses and nodes. It keeps the
// lists it is given, neither copying them nor the objects in them: neither may change while the
// State is in use. Its lookups implement policy.View; each is answered from an index built on the
// first lookup that needs it, once, whichever goroutine asks first, and read by any number of
// goroutines after. When two objects share a key (a directory of manifests may hold both), a
// lookup finds the last.
//
// A State's reads never fail, but ListKind of a kind it was not given: the lookups return a nil
// error, and nil when the object does not exist.
type State struct {
	claims  []*corev1.PersistentVolumeClaim
	volumes []*corev1.PersistentVolume
	classes []*storagev1.StorageClass
	nodes   []*corev1.Node
	pods    []*corev1.Pod
	// listed are the objects of the Readables kinds the state was given (WithKind), by kind.
	listed map[Kind][]runtime.Object

	volumeByName index[*lookup[*corev1.PersistentVolume, string]]
	claimByKey   index[*lookup[*corev1.PersistentVolumeClaim, Key]]
	// naming finds the claims whose spec.volumeName names a volume, claiming the volumes whose
	// spec.claimRef names a claim.
	naming     index[*lookup[*corev1.PersistentVolumeClaim, string]]
	claiming   index[*lookup[*corev1.PersistentVolume, Key]]
	claimByUID index[*lookup[*corev1.PersistentVolumeClaim, string]]
	nodeByName index[map[string]*corev1.Node]
	// podsUsing maps a claim's key to the pods whose volumes use it.
	podsUsing index[map[Key][]*corev1.Pod]
}

// index is a lookup table built once, on first use.
type index[M any] struct {
	once sync.Once
	m    M
}

func (x *index[M]) get(build func() M) M {
	x.once.Do(func() { x.m = build() })
	return x.m
}

// appendOne is append(list, all[i]) for an index's list of objects. A list's first object is
// all[i:i+1] with no room to grow, a view of the state's own slice rather than a slice of its
// own: nearly every list of pods using a claim holds one pod, and a slice each was most of what
// building the index allocated. Appending to it copies, so all is never written.
func appendOne[T any](list []T, all []T, i int) []T {
	if list == nil {
		return all[i : i+1 : i+1]
	}
	return append(list, all[i])
}

// New returns the State of the given objects. Nil entries are not allowed. The state keeps the
// slices (its indexes' lists are views of them): they must not change after.
func New(claims []*corev1.PersistentVolumeClaim, volumes []*corev1.PersistentVolume, classes []*storagev1.StorageClass, nodes []*corev1.Node) *State {
	return &State{claims: claims, volumes: volumes, classes: classes, nodes: nodes}
}

// WithPods returns a State of s's objects and the given pods, which the rules read to know where
// a claim is used (PodsUsingClaim). A State without pods knows of no pod using any claim.
func (s *State) WithPods(pods []*corev1.Pod) *State {
	return &State{claims: s.claims, volumes: s.volumes, classes: s.classes, nodes: s.nodes, pods: pods, listed: s.listed}
}

// WithClaims returns a State of s's objects with claims in place of its claims.
func (s *State) WithClaims(claims []*corev1.PersistentVolumeClaim) *State {
	return &State{claims: claims, volumes: s.volumes, classes: s.classes, nodes: s.nodes, pods: s.pods, listed: s.listed}
}

// WithNodes returns a State of s's objects with nodes in place of its nodes.
func (s *State) WithNodes(nodes []*corev1.Node) *State {
	return &State{claims: s.claims, volumes: s.volumes, classes: s.classes, nodes: nodes, pods: s.pods, listed: s.listed}
}

// WithKind returns a State of s's objects and the given objects of kind k, one of Readables,
// which ListKind answers. A State answers ListKind only for the kinds it was given (none, an
// empty list): for another it fails, so that no rule judges on an absence the reader made up.
func (s *State) WithKind(k Kind, objs []runtime.Object) *State {
	listed := make(map[Kind][]runtime.Object, len(s.listed)+1)
	maps.Copy(listed, s.listed)
	if objs == nil {
		objs = []runtime.Object{}
	}
	listed[k] = objs
	return &State{claims: s.claims, volumes: s.volumes, classes: s.classes, nodes: s.nodes, pods: s.pods, listed: listed}
}

// ListKind returns the state's objects of kind k, as given to WithKind; an error for a kind it
// was not given.
func (s *State) ListKind(k Kind) ([]runtime.Object, error) {
	objs, ok := s.listed[k]
	if !ok {
		return nil, errNotHeld(k)
	}
	return objs, nil
}

// Pods are the state's pods, as given to WithPods.
func (s *State) Pods() []*corev1.Pod { return s.pods }

// Claims are the state's claims, as given to New.
func (s *State) Claims() []*corev1.PersistentVolumeClaim { return s.claims }

// Volumes are the state's volumes, as given to New.
func (s *State) Volumes() []*corev1.PersistentVolume { return s.volumes }

// Classes are the state's StorageClasses, as given to New.
func (s *State) Classes() []*storagev1.StorageClass { return s.classes }

// Nodes are the state's nodes, as given to New.
func (s *State) Nodes() []*corev1.Node { return s.nodes }

// Objects lists the state's classes, claims and volumes, in that order (the order an audit judges
// them in, policy.AuditOrder); nodes are read, never judged.
func (s *State) Objects() []any {
	out := make([]any, 0, len(s.classes)+len(s.claims)+len(s.volumes))
	for _, sc := range s.classes {
		out = append(out, sc)
	}
	for _, pvc := range s.claims {
		out = append(out, pvc)
	}
	for _, pv := range s.volumes {
		out = append(out, pv)
	}
	return out
}

// PersistentVolume returns the volume of that name, or nil.
func (s *State) PersistentVolume(name string) (*corev1.PersistentVolume, error) {
	pv, _ := s.volumeByName.get(func() *lookup[*corev1.PersistentVolume, string] {
		return newLookup(s.volumes, volumeName, hashString, false)
	}).one(name)
	return pv, nil
}

// PersistentVolumeClaim returns the claim namespace/name, or nil.
func (s *State) PersistentVolumeClaim(namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	pvc, _ := s.claimByKey.get(func() *lookup[*corev1.PersistentVolumeClaim, Key] {
		return newLookup(s.claims, claimKey, hashNamed, false)
	}).one(ClaimKey(namespace, name))
	return pvc, nil
}

// ClaimsNamingVolume lists, in the order of Claims, the claims whose spec.volumeName is the
// volume's name (none for "").
func (s *State) ClaimsNamingVolume(volumeName string) ([]*corev1.PersistentVolumeClaim, error) {
	if volumeName == "" {
		return nil, nil
	}
	return s.naming.get(func() *lookup[*corev1.PersistentVolumeClaim, string] {
		return newLookup(s.claims, namedVolume, hashString, true)
	}).each(volumeName), nil
}

// VolumesClaiming lists, in the order of Volumes, the volumes whose spec.claimRef names the claim
// namespace/name (whatever its uid).
func (s *State) VolumesClaiming(namespace, name string) ([]*corev1.PersistentVolume, error) {
	return s.claiming.get(func() *lookup[*corev1.PersistentVolume, Key] {
		return newLookup(s.volumes, claimRefKey, hashNamed, true)
	}).each(ClaimKey(namespace, name)), nil
}

// ClaimWithUID returns the claim with that uid, in any namespace, or nil.
func (s *State) ClaimWithUID(uid types.UID) (*corev1.PersistentVolumeClaim, error) {
	pvc, _ := s.claimByUID.get(func() *lookup[*corev1.PersistentVolumeClaim, string] {
		return newLookup(s.claims, claimUID, hashString, false)
	}).one(string(uid))
	return pvc, nil
}

// ClaimWaitingForData returns the claim with that uid if it waits for its data
// (storage.WaitsForData), else nil.
func (s *State) ClaimWaitingForData(uid types.UID) (*corev1.PersistentVolumeClaim, error) {
	if c, _ := s.ClaimWithUID(uid); c != nil && storage.WaitsForData(c) {
		return c, nil
	}
	return nil, nil
}

// Node returns the node of that name, or nil.
func (s *State) Node(name string) (*corev1.Node, error) {
	return s.nodeByName.get(func() map[string]*corev1.Node {
		m := make(map[string]*corev1.Node, len(s.nodes))
		for _, n := range s.nodes {
			m[n.Name] = n
		}
		return m
	})[name], nil
}

// ListNodes returns the state's nodes (Nodes).
func (s *State) ListNodes() ([]*corev1.Node, error) { return s.nodes, nil }

// PodsUsingClaim lists, in the order of Pods, the pods of the namespace whose volumes use the
// claim (storage.PodClaims).
func (s *State) PodsUsingClaim(namespace, claim string) ([]*corev1.Pod, error) {
	return s.podsUsing.get(func() map[Key][]*corev1.Pod {
		m := make(map[Key][]*corev1.Pod, len(s.pods))
		for i, p := range s.pods {
			for _, c := range storage.PodClaims(p) {
				k := ClaimKey(p.Namespace, c)
				m[k] = appendOne(m[k], s.pods, i)
			}
		}
		return m
	})[ClaimKey(namespace, claim)], nil
}

// StorageClasses returns the state's StorageClasses (Classes).
func (s *State) StorageClasses() ([]*storagev1.StorageClass, error) { return s.classes, nil }

// The keys the lookups find objects by.
func volumeName(pv *corev1.PersistentVolume) (string, bool) { return pv.Name, true }

func claimKey(pvc *corev1.PersistentVolumeClaim) (Key, bool) {
	return ClaimKey(pvc.Namespace, pvc.Name), true
}

func claimUID(pvc *corev1.PersistentVolumeClaim) (string, bool) { return string(pvc.UID), true }

func namedVolume(pvc *corev1.PersistentVolumeClaim) (string, bool) {
	return pvc.Spec.VolumeName, pvc.Spec.VolumeName != ""
}

func claimRefKey(pv *corev1.PersistentVolume) (Key, bool) {
	if ref := pv.Spec.ClaimRef; ref != nil {
		return ClaimKey(ref.Namespace, ref.Name), true
	}
	return Key{}, false
}
