package testobj

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// PVMod modifies a PersistentVolume under construction.
type PVMod func(*corev1.PersistentVolume)

// PVCMod modifies a PersistentVolumeClaim under construction.
type PVCMod func(*corev1.PersistentVolumeClaim)

// MetaMod modifies object metadata; it applies to every kind.
type MetaMod func(*metav1.ObjectMeta)

// PV builds a 1Gi ReadWriteOnce Filesystem volume backed by a host path, with no class.
func PV(name string, mods ...PVMod) *corev1.PersistentVolume {
	pv := &corev1.PersistentVolume{
		TypeMeta:   metav1.TypeMeta{Kind: "PersistentVolume", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: "/data/" + name},
			},
		},
	}
	for _, m := range mods {
		m(pv)
	}
	return pv
}

// PVC builds a claim in a namespace asking for 1Gi ReadWriteOnce with an explicit empty class
// (so no default class applies).
func PVC(namespace, name string, mods ...PVCMod) *corev1.PersistentVolumeClaim {
	empty := ""
	pvc := &corev1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{Kind: "PersistentVolumeClaim", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID("uid-" + namespace + "-" + name)},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &empty,
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			},
		},
	}
	for _, m := range mods {
		m(pvc)
	}
	return pvc
}

// StorageClass builds a class with the given provisioner.
func StorageClass(name, provisioner string, mods ...func(*storagev1.StorageClass)) *storagev1.StorageClass {
	sc := &storagev1.StorageClass{
		TypeMeta:    metav1.TypeMeta{Kind: "StorageClass", APIVersion: "storage.k8s.io/v1"},
		ObjectMeta:  metav1.ObjectMeta{Name: name},
		Provisioner: provisioner,
	}
	for _, m := range mods {
		m(sc)
	}
	return sc
}

// DefaultClass marks a StorageClass as the cluster default.
func DefaultClass(sc *storagev1.StorageClass) {
	if sc.Annotations == nil {
		sc.Annotations = map[string]string{}
	}
	sc.Annotations["storageclass.kubernetes.io/is-default-class"] = "true"
}

// Node builds a node with labels (kubernetes.io/hostname is set to the name).
func Node(name string, labels map[string]string) *corev1.Node {
	l := map[string]string{"kubernetes.io/hostname": name}
	for k, v := range labels {
		l[k] = v
	}
	return &corev1.Node{
		TypeMeta:   metav1.TypeMeta{Kind: "Node", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l},
	}
}

// Pod builds a pod of the namespace on a node ("" for one not scheduled yet) in a phase, using
// the claims.
func Pod(namespace, name, node string, phase corev1.PodPhase, claims ...string) *corev1.Pod {
	p := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID("uid-pod-" + namespace + "-" + name)},
		Spec:       corev1.PodSpec{NodeName: node},
		Status:     corev1.PodStatus{Phase: phase},
	}
	for i, c := range claims {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: fmt.Sprintf("data-%d", i), VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c},
		}})
	}
	return p
}

// --- volume modifiers ---

// Capacity sets the volume's storage capacity.
func Capacity(q string) PVMod {
	return func(pv *corev1.PersistentVolume) {
		pv.Spec.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(q)}
	}
}

// ClaimRef points the volume at a claim; an empty uid pre-binds it.
func ClaimRef(namespace, name, uid string) PVMod {
	return func(pv *corev1.PersistentVolume) {
		pv.Spec.ClaimRef = &corev1.ObjectReference{
			Kind: "PersistentVolumeClaim", APIVersion: "v1",
			Namespace: namespace, Name: name, UID: types.UID(uid),
		}
	}
}

// BoundTo points the volume at the claim with its uid and marks it Bound, as the binder does.
func BoundTo(pvc *corev1.PersistentVolumeClaim) PVMod {
	return func(pv *corev1.PersistentVolume) {
		ClaimRef(pvc.Namespace, pvc.Name, string(pvc.UID))(pv)
		pv.Status.Phase = corev1.VolumeBound
	}
}

// VolumeMode sets the volume's mode.
func VolumeMode(m corev1.PersistentVolumeMode) PVMod {
	return func(pv *corev1.PersistentVolume) { pv.Spec.VolumeMode = &m }
}

// VolumeAttributesClass sets the volume's spec.volumeAttributesClassName; "" sets it to the
// empty string, which is not the same object as leaving it unset.
func VolumeAttributesClass(name string) PVMod {
	return func(pv *corev1.PersistentVolume) { pv.Spec.VolumeAttributesClassName = &name }
}

// AccessModes sets the volume's access modes.
func AccessModes(modes ...corev1.PersistentVolumeAccessMode) PVMod {
	return func(pv *corev1.PersistentVolume) { pv.Spec.AccessModes = modes }
}

// Class sets the volume's storage class.
func Class(name string) PVMod {
	return func(pv *corev1.PersistentVolume) { pv.Spec.StorageClassName = name }
}

// Reclaim sets the volume's reclaim policy.
func Reclaim(p corev1.PersistentVolumeReclaimPolicy) PVMod {
	return func(pv *corev1.PersistentVolume) { pv.Spec.PersistentVolumeReclaimPolicy = p }
}

// Phase sets the volume's status phase.
func Phase(p corev1.PersistentVolumePhase) PVMod {
	return func(pv *corev1.PersistentVolume) { pv.Status.Phase = p }
}

// NodeAffinity requires nodes whose label key has one of the values.
func NodeAffinity(key string, values ...string) PVMod {
	return func(pv *corev1.PersistentVolume) {
		pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
				Key: key, Operator: corev1.NodeSelectorOpIn, Values: values,
			}}}},
		}}
	}
}

// CSI makes the volume a CSI volume with the given attributes.
func CSI(driver, handle string, attrs map[string]string) PVMod {
	return func(pv *corev1.PersistentVolume) {
		pv.Spec.PersistentVolumeSource = corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
			Driver: driver, VolumeHandle: handle, VolumeAttributes: attrs,
		}}
	}
}

// PVMeta applies metadata modifiers to a volume.
func PVMeta(mods ...MetaMod) PVMod {
	return func(pv *corev1.PersistentVolume) {
		for _, m := range mods {
			m(&pv.ObjectMeta)
		}
	}
}

// --- claim modifiers ---

// Request sets the claim's storage request.
func Request(q string) PVCMod {
	return func(pvc *corev1.PersistentVolumeClaim) {
		pvc.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(q)}
	}
}

// VolumeName pre-binds the claim to a volume.
func VolumeName(name string) PVCMod {
	return func(pvc *corev1.PersistentVolumeClaim) { pvc.Spec.VolumeName = name }
}

// ClaimBoundTo names the volume, sets bind-completed and the Bound phase, as the binder does.
func ClaimBoundTo(pvName string) PVCMod {
	return func(pvc *corev1.PersistentVolumeClaim) {
		pvc.Spec.VolumeName = pvName
		ClaimMeta(Annotation("pv.kubernetes.io/bind-completed", "yes"))(pvc)
		pvc.Status.Phase = corev1.ClaimBound
	}
}

// ClaimVolumeMode sets the claim's volume mode.
func ClaimVolumeMode(m corev1.PersistentVolumeMode) PVCMod {
	return func(pvc *corev1.PersistentVolumeClaim) { pvc.Spec.VolumeMode = &m }
}

// ClaimVolumeAttributesClass sets the claim's spec.volumeAttributesClassName; "" sets it to the
// empty string, which is not the same object as leaving it unset.
func ClaimVolumeAttributesClass(name string) PVCMod {
	return func(pvc *corev1.PersistentVolumeClaim) { pvc.Spec.VolumeAttributesClassName = &name }
}

// ClaimCurrentAttributesClass records the VolumeAttributesClass the claim's volume has
// (status.currentVolumeAttributesClassName), as the PV controller does at bind and the
// external-resizer after a modification.
func ClaimCurrentAttributesClass(name string) PVCMod {
	return func(pvc *corev1.PersistentVolumeClaim) { pvc.Status.CurrentVolumeAttributesClassName = &name }
}

// ClaimModifyingTo records a modification under way to the VolumeAttributesClass name, as the
// external-resizer does before it calls the driver.
func ClaimModifyingTo(name string) PVCMod {
	return func(pvc *corev1.PersistentVolumeClaim) {
		pvc.Status.ModifyVolumeStatus = &corev1.ModifyVolumeStatus{
			Status: corev1.PersistentVolumeClaimModifyVolumeInProgress, TargetVolumeAttributesClassName: name,
		}
	}
}

// ClaimAccessModes sets the claim's access modes.
func ClaimAccessModes(modes ...corev1.PersistentVolumeAccessMode) PVCMod {
	return func(pvc *corev1.PersistentVolumeClaim) { pvc.Spec.AccessModes = modes }
}

// ClaimClass sets the claim's class; ClaimNoClass leaves it unset (nil).
func ClaimClass(name string) PVCMod {
	return func(pvc *corev1.PersistentVolumeClaim) { pvc.Spec.StorageClassName = &name }
}

// ClaimNoClass leaves the claim's class unset, so the default class applies.
func ClaimNoClass(pvc *corev1.PersistentVolumeClaim) { pvc.Spec.StorageClassName = nil }

// Selector sets a label selector on the claim.
func Selector(labels map[string]string) PVCMod {
	return func(pvc *corev1.PersistentVolumeClaim) {
		pvc.Spec.Selector = &metav1.LabelSelector{MatchLabels: labels}
	}
}

// ClaimUID sets the claim's uid.
func ClaimUID(uid string) PVCMod {
	return func(pvc *corev1.PersistentVolumeClaim) { pvc.UID = types.UID(uid) }
}

// ClaimPhase sets the claim's status phase.
func ClaimPhase(p corev1.PersistentVolumeClaimPhase) PVCMod {
	return func(pvc *corev1.PersistentVolumeClaim) { pvc.Status.Phase = p }
}

// ClaimMeta applies metadata modifiers to a claim.
func ClaimMeta(mods ...MetaMod) PVCMod {
	return func(pvc *corev1.PersistentVolumeClaim) {
		for _, m := range mods {
			m(&pvc.ObjectMeta)
		}
	}
}

// --- metadata modifiers ---

// Annotation sets one annotation.
func Annotation(key, value string) MetaMod {
	return func(m *metav1.ObjectMeta) {
		if m.Annotations == nil {
			m.Annotations = map[string]string{}
		}
		m.Annotations[key] = value
	}
}

// Label sets one label.
func Label(key, value string) MetaMod {
	return func(m *metav1.ObjectMeta) {
		if m.Labels == nil {
			m.Labels = map[string]string{}
		}
		m.Labels[key] = value
	}
}

// Finalizers sets the finalizers.
func Finalizers(f ...string) MetaMod {
	return func(m *metav1.ObjectMeta) { m.Finalizers = f }
}

// Deleting sets a deletionTimestamp: the object was deleted and waits for its finalizers.
func Deleting() MetaMod {
	return func(m *metav1.ObjectMeta) {
		t := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
		m.DeletionTimestamp = &t
	}
}

// DataSourceRef has the claim wait for a populator's data source (spec.dataSourceRef).
func DataSourceRef(group, kind, name string) PVCMod {
	return func(pvc *corev1.PersistentVolumeClaim) {
		pvc.Spec.DataSourceRef = &corev1.TypedObjectReference{APIGroup: &group, Kind: kind, Name: name}
	}
}
