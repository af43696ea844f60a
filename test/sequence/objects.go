package sequence

import (
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvguard/pvguard/test/testobj"
)

// Driver is the CSI driver (and external provisioner name) of the model's dynamic classes.
const Driver = "csi.example.com"

// The classes every world has: "manual" for static volumes (no provisioner), "fast" provisioned
// at once, "local" provisioned or bound when a pod is scheduled (WaitForFirstConsumer). Volumes
// and claims may also have no class ("").
const (
	ClassManual = "manual"
	ClassFast   = "fast"
	ClassLocal  = "local"
)

// BaseWorld holds the classes and two nodes in two zones.
func BaseWorld() *World {
	immediate, wffc := storagev1.VolumeBindingImmediate, storagev1.VolumeBindingWaitForFirstConsumer
	deleteP := corev1.PersistentVolumeReclaimDelete
	return NewWorld(
		testobj.StorageClass(ClassManual, "kubernetes.io/no-provisioner", func(sc *storagev1.StorageClass) {
			sc.VolumeBindingMode = &immediate
		}),
		testobj.StorageClass(ClassFast, Driver, func(sc *storagev1.StorageClass) {
			sc.VolumeBindingMode, sc.ReclaimPolicy = &immediate, &deleteP
		}),
		testobj.StorageClass(ClassLocal, Driver, func(sc *storagev1.StorageClass) {
			sc.VolumeBindingMode, sc.ReclaimPolicy = &wffc, &deleteP
		}),
		testobj.Node("node-a", map[string]string{"topology.kubernetes.io/zone": "zone-a"}),
		testobj.Node("node-b", map[string]string{"topology.kubernetes.io/zone": "zone-b"}),
	)
}

// Volume builds a static volume: a size, access modes, reclaim policy Retain, a class, and the
// pv-protection finalizer the apiserver adds.
func Volume(name, size, class string, modes ...corev1.PersistentVolumeAccessMode) *corev1.PersistentVolume {
	if len(modes) == 0 {
		modes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	}
	pv := testobj.PV(name, testobj.Capacity(size), testobj.AccessModes(modes...), testobj.Class(class),
		testobj.PVMeta(testobj.Finalizers(FinPV)))
	pv.Status.Phase = corev1.VolumeAvailable
	return pv
}

// Claim builds a pending claim with a uid, a request, a class ("" for none) and access modes,
// with the pvc-protection finalizer the apiserver adds.
func Claim(namespace, name, uid, size, class string, modes ...corev1.PersistentVolumeAccessMode) *corev1.PersistentVolumeClaim {
	if len(modes) == 0 {
		modes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	}
	pvc := testobj.PVC(namespace, name, testobj.ClaimUID(uid), testobj.Request(size), testobj.ClaimClass(class),
		testobj.ClaimAccessModes(modes...), testobj.ClaimMeta(testobj.Finalizers(FinPVC)))
	pvc.Status.Phase = corev1.ClaimPending
	return pvc
}

// RefTo is the claimRef the PV controller writes for a claim (with its uid); RefByName is the
// one an admin writes to pre-bind a volume (no uid).
func RefTo(c *corev1.PersistentVolumeClaim) *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: c.Namespace, Name: c.Name, UID: c.UID, ResourceVersion: "1"}
}

func RefByName(namespace, name string) *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: namespace, Name: name}
}

func refWithUID(namespace, name, uid string) *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: namespace, Name: name, UID: types.UID(uid)}
}

// SetAnn and DelAnn edit one annotation of an object's metadata.
func SetAnn(m *metav1.ObjectMeta, key, value string) {
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[key] = value
}

func DelAnn(m *metav1.ObjectMeta, key string) {
	delete(m.Annotations, key)
	if len(m.Annotations) == 0 {
		m.Annotations = nil
	}
}

// AddFin and DelFin edit one finalizer.
func AddFin(m *metav1.ObjectMeta, f string) { addFinalizer(m, f) }

func DelFin(m *metav1.ObjectMeta, f string) {
	var out []string
	for _, x := range m.Finalizers {
		if x != f {
			out = append(out, x)
		}
	}
	m.Finalizers = out
}

// HostAffinity is the node affinity an external provisioner writes for a volume on one node (or
// admits each of the nodes).
func HostAffinity(nodes ...string) *corev1.VolumeNodeAffinity {
	return &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: nodes}},
	}}}}
}

// ZoneAffinity admits the nodes of one zone.
func ZoneAffinity(zone string) *corev1.VolumeNodeAffinity {
	return &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "topology.kubernetes.io/zone", Operator: corev1.NodeSelectorOpIn, Values: []string{zone}}},
	}}}}
}

// Provisioned is the volume an external provisioner saves for a claim: named after the claim's
// uid, linked to it with its uid, the claim's size, modes, mode and class, reclaim policy Delete,
// provisioned-by, its finalizer, and on a WaitForFirstConsumer class the selected node's affinity.
func Provisioned(c *corev1.PersistentVolumeClaim) *corev1.PersistentVolume {
	class := ""
	if c.Spec.StorageClassName != nil {
		class = *c.Spec.StorageClassName
	}
	req := c.Spec.Resources.Requests[corev1.ResourceStorage]
	pv := &corev1.PersistentVolume{
		TypeMeta: metav1.TypeMeta{Kind: "PersistentVolume", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        "pvc-" + string(c.UID),
			Annotations: map[string]string{annProvisionedBy: Driver},
			Finalizers:  []string{FinProvisioner},
		},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: req.DeepCopy()},
			AccessModes:                   append([]corev1.PersistentVolumeAccessMode(nil), c.Spec.AccessModes...),
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			StorageClassName:              class,
			VolumeMode:                    c.Spec.VolumeMode,
			ClaimRef:                      RefTo(c),
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: Driver, VolumeHandle: "vol-" + string(c.UID),
			}},
			VolumeAttributesClassName: c.Spec.VolumeAttributesClassName,
		},
	}
	if node := c.Annotations[annSelectedNode]; node != "" {
		pv.Spec.NodeAffinity = HostAffinity(node)
	}
	return pv
}

// Quantity parses a size.
func Quantity(s string) resource.Quantity { return resource.MustParse(s) }

// Exported annotation keys, for flows and tests.
const (
	AnnBindCompleted = annBindCompleted
	AnnBoundBy       = annBoundBy
	AnnProvisionedBy = annProvisionedBy
	AnnSelectedNode  = annSelectedNode
	AnnProvisioner   = annProvisioner
	AnnBetaProv      = annBetaProv
	AnnConfirm       = annConfirm
)
