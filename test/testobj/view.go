package testobj

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvguard/pvguard/clusterstate"
	"github.com/pvguard/pvguard/policy"
)

// View is an in-memory policy.View over a fixed set of objects (a clusterstate.State). Err, when
// set, is returned by every lookup, to test how callers handle a failed read.
type View struct {
	*clusterstate.State
	Err error
	// StrictNames makes a get by an empty name, or of a claim by an empty namespace, fail as the
	// webhook's live view does (the client refuses it: "resource name may not be empty"), where
	// a State just finds nothing.
	StrictNames bool
}

var _ policy.View = &View{}

// errEmptyName is what client-go's request builder says of a get without a name.
var errEmptyName = errors.New("resource name may not be empty")

// NewView sorts objects of any supported kind (those of the View's typed reads, and of
// clusterstate.Readables) into a View, which holds every kind of clusterstate.Readables (none
// of one when none is given); it panics on other kinds, which is a bug in the test that calls it.
func NewView(objs ...runtime.Object) *View {
	var (
		volumes []*corev1.PersistentVolume
		claims  []*corev1.PersistentVolumeClaim
		nodes   []*corev1.Node
		classes []*storagev1.StorageClass
		pods    []*corev1.Pod
		listed  = map[clusterstate.Kind][]runtime.Object{}
	)
	for _, o := range objs {
		if r, ok := clusterstate.ReadableOf(o); ok {
			listed[r.Kind] = append(listed[r.Kind], o)
			continue
		}
		switch t := o.(type) {
		case *corev1.PersistentVolume:
			volumes = append(volumes, t)
		case *corev1.PersistentVolumeClaim:
			claims = append(claims, t)
		case *corev1.Node:
			nodes = append(nodes, t)
		case *storagev1.StorageClass:
			classes = append(classes, t)
		case *corev1.Pod:
			pods = append(pods, t)
		default:
			panic(fmt.Sprintf("testobj.NewView: unsupported %T", o))
		}
	}
	st := clusterstate.New(claims, volumes, classes, nodes).WithPods(pods)
	for _, r := range clusterstate.Readables() {
		st = st.WithKind(r.Kind, listed[r.Kind])
	}
	return &View{State: st}
}

func (v *View) PersistentVolume(name string) (*corev1.PersistentVolume, error) {
	if v.Err != nil {
		return nil, v.Err
	}
	if v.StrictNames && name == "" {
		return nil, errEmptyName
	}
	return v.State.PersistentVolume(name)
}

func (v *View) PersistentVolumeClaim(namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	if v.Err != nil {
		return nil, v.Err
	}
	if v.StrictNames && (namespace == "" || name == "") {
		return nil, fmt.Errorf("reading PersistentVolumeClaim %q in namespace %q: %w", name, namespace, errEmptyName)
	}
	return v.State.PersistentVolumeClaim(namespace, name)
}

func (v *View) ClaimsNamingVolume(volumeName string) ([]*corev1.PersistentVolumeClaim, error) {
	if v.Err != nil {
		return nil, v.Err
	}
	return v.State.ClaimsNamingVolume(volumeName)
}

func (v *View) VolumesClaiming(namespace, name string) ([]*corev1.PersistentVolume, error) {
	if v.Err != nil {
		return nil, v.Err
	}
	return v.State.VolumesClaiming(namespace, name)
}

func (v *View) ClaimWaitingForData(uid types.UID) (*corev1.PersistentVolumeClaim, error) {
	if v.Err != nil {
		return nil, v.Err
	}
	return v.State.ClaimWaitingForData(uid)
}

func (v *View) Node(name string) (*corev1.Node, error) {
	if v.Err != nil {
		return nil, v.Err
	}
	if v.StrictNames && name == "" {
		return nil, errEmptyName
	}
	return v.State.Node(name)
}

func (v *View) ListNodes() ([]*corev1.Node, error) {
	if v.Err != nil {
		return nil, v.Err
	}
	return v.State.ListNodes()
}

func (v *View) PodsUsingClaim(namespace, claim string) ([]*corev1.Pod, error) {
	if v.Err != nil {
		return nil, v.Err
	}
	return v.State.PodsUsingClaim(namespace, claim)
}

func (v *View) StorageClasses() ([]*storagev1.StorageClass, error) {
	if v.Err != nil {
		return nil, v.Err
	}
	return v.State.StorageClasses()
}

func (v *View) ListKind(kind policy.Kind) ([]runtime.Object, error) {
	if v.Err != nil {
		return nil, v.Err
	}
	return v.State.ListKind(kind)
}
