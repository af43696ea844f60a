package sequence

import (
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/test/testobj"
)

// Identity names who makes a write, by role; Users maps it to the username and groups the
// apiserver would hand the webhook.
type Identity string

const (
	Tenant      Identity = "tenant"
	Admin       Identity = "admin"
	PVBinder    Identity = "pv-binder"
	KCM         Identity = "kube-controller-manager"
	Scheduler   Identity = "scheduler"
	Provisioner Identity = "csi-provisioner"
	Resizer     Identity = "csi-resizer"
	Expander    Identity = "expand-controller"
	PVProt      Identity = "pv-protection"
	PVCProt     Identity = "pvc-protection"
	Kubelet     Identity = "kubelet"
	// Populator is a volume populator (lib-volume-populator, KubeVirt CDI): its service account
	// is the installer's choice, unknown to a default install.
	Populator Identity = "populator"
	// Velero is Velero's server (its data-mover restore re-binds volumes).
	Velero Identity = "velero"
)

// Users are the identities' usernames and groups. The CSI sidecars run under a service account
// of the driver's namespace that a default install (policy.DefaultConfig, no controllers:) does
// not know.
var Users = map[Identity]policy.UserInfo{
	Tenant:      {Username: "alice", Groups: []string{"team-a", "system:authenticated"}},
	Admin:       {Username: "kubernetes-admin", Groups: []string{"system:masters", "system:authenticated"}},
	PVBinder:    {Username: "system:serviceaccount:kube-system:persistent-volume-binder", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:kube-system"}},
	KCM:         {Username: "system:kube-controller-manager"},
	Scheduler:   {Username: "system:kube-scheduler"},
	Provisioner: {Username: "system:serviceaccount:csi:csi-provisioner", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:csi"}},
	Resizer:     {Username: "system:serviceaccount:csi:csi-resizer", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:csi"}},
	Expander:    {Username: "system:serviceaccount:kube-system:expand-controller", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:kube-system"}},
	PVProt:      {Username: "system:serviceaccount:kube-system:pv-protection-controller", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:kube-system"}},
	PVCProt:     {Username: "system:serviceaccount:kube-system:pvc-protection-controller", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:kube-system"}},
	Kubelet:     {Username: "system:node:node-a", Groups: []string{"system:nodes", "system:authenticated"}},
	Velero:      {Username: "system:serviceaccount:velero:velero", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:velero"}},
	Populator:   {Username: "system:serviceaccount:populators:populator", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:populators"}},
}

// knownControllers are the identities pvguard knows as controllers on a default install (the
// built-in Kubernetes controllers). The oracle's I9 uses it; it is written here, not read from
// the policy package, so that the oracle stays independent of the code it judges.
var knownControllers = map[Identity]bool{
	PVBinder: true, KCM: true, Scheduler: true, Expander: true, PVProt: true, PVCProt: true,
}

// World is a cluster: volumes by name, claims by namespace/name, classes and nodes by name, and
// the pods that use claims by namespace/name (no step writes a pod: they are where claims are
// used). Objects in a World are never modified in place: a write replaces the object, so Clone
// only copies the maps.
type World struct {
	PVs     map[string]*corev1.PersistentVolume
	PVCs    map[string]*corev1.PersistentVolumeClaim
	Classes map[string]*storagev1.StorageClass
	Nodes   map[string]*corev1.Node
	Pods    map[string]*corev1.Pod
	// Gates are the apiserver's feature gates the model honours.
	Gates Gates
}

// Gates are the kube-apiserver feature gates that change what the model's apiserver accepts.
type Gates struct {
	// MutablePVNodeAffinity lets a volume's spec.nodeAffinity change (alpha since 1.35, off by
	// default); off, only setting it where there was none is accepted.
	MutablePVNodeAffinity bool `json:"mutablePVNodeAffinity,omitempty"`
}

// NewWorld returns a world holding the objects (volumes, claims, classes, nodes).
func NewWorld(objs ...runtime.Object) *World {
	w := &World{
		PVs:     map[string]*corev1.PersistentVolume{},
		PVCs:    map[string]*corev1.PersistentVolumeClaim{},
		Classes: map[string]*storagev1.StorageClass{},
		Nodes:   map[string]*corev1.Node{},
		Pods:    map[string]*corev1.Pod{},
	}
	for _, o := range objs {
		w.Put(o)
	}
	return w
}

// Put adds or replaces an object; it panics on a kind the world does not hold, which is a bug in
// the test that calls it.
func (w *World) Put(o runtime.Object) {
	switch t := o.(type) {
	case *corev1.PersistentVolume:
		w.PVs[t.Name] = t
	case *corev1.PersistentVolumeClaim:
		w.PVCs[claimKey(t.Namespace, t.Name)] = t
	case *storagev1.StorageClass:
		w.Classes[t.Name] = t
	case *corev1.Node:
		w.Nodes[t.Name] = t
	case *corev1.Pod:
		w.Pods[claimKey(t.Namespace, t.Name)] = t
	default:
		panic(fmt.Sprintf("sequence.World: unsupported %T", o))
	}
}

// Clone returns a world that shares the (never modified) objects but not the maps.
func (w *World) Clone() *World {
	return &World{PVs: maps.Clone(w.PVs), PVCs: maps.Clone(w.PVCs), Classes: maps.Clone(w.Classes), Nodes: maps.Clone(w.Nodes),
		Pods: maps.Clone(w.Pods), Gates: w.Gates}
}

func claimKey(namespace, name string) string { return namespace + "/" + name }

// PVC returns the claim of that namespace and name, or nil.
func (w *World) PVC(namespace, name string) *corev1.PersistentVolumeClaim {
	return w.PVCs[claimKey(namespace, name)]
}

// Objects lists every object in a stable order: classes, nodes, volumes, claims, pods, each by
// name.
func (w *World) Objects() []runtime.Object {
	var out []runtime.Object
	for _, k := range slices.Sorted(maps.Keys(w.Classes)) {
		out = append(out, w.Classes[k])
	}
	for _, k := range slices.Sorted(maps.Keys(w.Nodes)) {
		out = append(out, w.Nodes[k])
	}
	for _, k := range slices.Sorted(maps.Keys(w.PVs)) {
		out = append(out, w.PVs[k])
	}
	for _, k := range slices.Sorted(maps.Keys(w.PVCs)) {
		out = append(out, w.PVCs[k])
	}
	for _, k := range slices.Sorted(maps.Keys(w.Pods)) {
		out = append(out, w.Pods[k])
	}
	return out
}

// SortedPVs and SortedPVCs list the volumes and claims in a stable order.
func (w *World) SortedPVs() []*corev1.PersistentVolume {
	out := make([]*corev1.PersistentVolume, 0, len(w.PVs))
	for _, k := range slices.Sorted(maps.Keys(w.PVs)) {
		out = append(out, w.PVs[k])
	}
	return out
}

func (w *World) SortedPVCs() []*corev1.PersistentVolumeClaim {
	out := make([]*corev1.PersistentVolumeClaim, 0, len(w.PVCs))
	for _, k := range slices.Sorted(maps.Keys(w.PVCs)) {
		out = append(out, w.PVCs[k])
	}
	return out
}

// View is the world as the engine reads it: the state after every admitted write so far.
func (w *World) View() policy.View {
	return testobj.NewView(w.Objects()...)
}

// remove drops an object from the world.
func (w *World) remove(o runtime.Object) {
	switch t := o.(type) {
	case *corev1.PersistentVolume:
		delete(w.PVs, t.Name)
	case *corev1.PersistentVolumeClaim:
		delete(w.PVCs, claimKey(t.Namespace, t.Name))
	case *storagev1.StorageClass:
		delete(w.Classes, t.Name)
	case *corev1.Node:
		delete(w.Nodes, t.Name)
	case *corev1.Pod:
		delete(w.Pods, claimKey(t.Namespace, t.Name))
	}
}
