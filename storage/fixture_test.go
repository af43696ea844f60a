package storage

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// clusterObjects is the JSON of n volumes and claims shaped as hack/bench/scale's fill writes
// them (pairs alternate a volume and a claim): a third of the volumes local disks pinned to one of
// 32 nodes, the rest Ceph RBD CSI volumes with attributes, secret refs and the provisioner's
// finalizer; every twentieth pair Released, Pending or Available; claims written by kubectl
// apply (the last-applied annotation) and bound by kube-controller-manager; managedFields as the
// apiserver records them. Each is encoded alone, so decoding it gives it strings of its own, as
// an informer's decoding does.
func clusterObjects(t testing.TB, n int) [][]byte {
	t.Helper()
	out := make([][]byte, 0, n)
	for i := 0; len(out) < n; i++ {
		pv, pvc := fixturePair(t, i)
		for _, o := range []any{pv, pvc} {
			if o == nil || len(out) == n {
				continue
			}
			b, err := json.Marshal(o)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, b)
		}
	}
	return out
}

// decodeObject decodes one object of clusterObjects afresh.
func decodeObject(t testing.TB, b []byte) any {
	var o any = &corev1.PersistentVolumeClaim{}
	if strings.Contains(string(b[:min(len(b), 64)]), `"kind":"PersistentVolume",`) {
		o = &corev1.PersistentVolume{}
	}
	if err := json.Unmarshal(b, o); err != nil {
		t.Fatal(err)
	}
	return o
}

// fixtureShape is what pvguard's cache keeps of status (explain.CacheShape, which storage's tests
// cannot import).
var fixtureShape = CacheShape{
	VolumeStatus: []string{"lastPhaseTransitionTime", "message", "phase"},
	ClaimStatus:  []string{"accessModes", "capacity", "phase"},
}

// fixturePair is pair i of the fill: its volume and claim (either may be nil).
func fixturePair(t testing.TB, i int) (*corev1.PersistentVolume, *corev1.PersistentVolumeClaim) {
	t.Helper()
	ns := fmt.Sprintf("team-%03d", i%200)
	node := fmt.Sprintf("node-%02d", (i/3)%32)
	local := i%3 == 0
	request := []string{"1Gi", "5Gi", "8Gi", "10Gi", "20Gi", "50Gi", "100Gi"}[(i/20)%7]
	capacity := request
	class := "rbd"
	if local {
		class, request, capacity = "local-storage", "100Gi", []string{"375Gi", "750Gi", "1500Gi"}[(i/3)%3]
	}
	created := metav1.NewTime(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Second))
	mode := corev1.PersistentVolumeFilesystem
	claimUID := types.UID(fmt.Sprintf("5f0c%04x-1b2c-4d3e-8f40-%012x", i%0x10000, i))
	pvc := &corev1.PersistentVolumeClaim{
		TypeMeta: metav1.TypeMeta{Kind: "PersistentVolumeClaim", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("data-app-%06d-0", i), UID: claimUID,
			ResourceVersion: fmt.Sprint(1000 + 5*i), CreationTimestamp: created,
			Labels: map[string]string{"app.kubernetes.io/name": fmt.Sprintf("app-%06d", i), "app.kubernetes.io/part-of": fmt.Sprintf("service-%03d", i%500)},
		},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: &class, VolumeMode: &mode,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(request)}},
		},
	}
	lastApplied(t, &pvc.ObjectMeta, pvc)
	pvc.Finalizers = []string{"kubernetes.io/pvc-protection"}
	pvc.ManagedFields = []metav1.ManagedFieldsEntry{managed("kubectl-client-side-apply", created,
		`{"f:metadata":{"f:annotations":{".":{},"f:kubectl.kubernetes.io/last-applied-configuration":{}},"f:labels":{".":{},"f:app.kubernetes.io/name":{},"f:app.kubernetes.io/part-of":{}}},"f:spec":{"f:accessModes":{},"f:resources":{"f:requests":{".":{},"f:storage":{}}},"f:storageClassName":{},"f:volumeMode":{}}}`, "")}

	var pv *corev1.PersistentVolume
	if local {
		name := fmt.Sprintf("local-pv-%06d", i)
		pv = &corev1.PersistentVolume{
			TypeMeta:   metav1.TypeMeta{Kind: "PersistentVolume", APIVersion: "v1"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"disk-type": "nvme", "node": node}},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:    corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(capacity)},
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				StorageClassName: class, VolumeMode: &mode,
				PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/mnt/disks/" + name}},
				NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
				}}}},
			},
		}
		lastApplied(t, &pv.ObjectMeta, pv)
		pv.Finalizers = []string{"kubernetes.io/pv-protection"}
		pv.ManagedFields = []metav1.ManagedFieldsEntry{managed("kubectl-client-side-apply", created,
			`{"f:metadata":{"f:annotations":{".":{},"f:kubectl.kubernetes.io/last-applied-configuration":{}},"f:labels":{".":{},"f:disk-type":{},"f:node":{}}},"f:spec":{"f:accessModes":{},"f:capacity":{".":{},"f:storage":{}},"f:local":{".":{},"f:path":{}},"f:nodeAffinity":{".":{},"f:required":{}},"f:persistentVolumeReclaimPolicy":{},"f:storageClassName":{},"f:volumeMode":{}}}`, "")}
	} else {
		id := string(claimUID)
		name := "pvc-" + id
		pv = &corev1.PersistentVolume{
			TypeMeta: metav1.TypeMeta{Kind: "PersistentVolume", APIVersion: "v1"},
			ObjectMeta: metav1.ObjectMeta{Name: name,
				Labels:      map[string]string{"team": ns, "backup.example.com/schedule": []string{"daily", "weekly", "none"}[i%3]},
				Annotations: map[string]string{AnnProvisionedBy: "rbd.csi.ceph.com", "volume.kubernetes.io/provisioner-deletion-secret-name": "rook-csi-rbd-provisioner", "volume.kubernetes.io/provisioner-deletion-secret-namespace": "rook-ceph"},
				Finalizers:  []string{"kubernetes.io/pv-protection", "external-provisioner.volume.kubernetes.io/finalizer"},
				ManagedFields: []metav1.ManagedFieldsEntry{managed("csi-provisioner", created,
					`{"f:metadata":{"f:annotations":{".":{},"f:pv.kubernetes.io/provisioned-by":{},"f:volume.kubernetes.io/provisioner-deletion-secret-name":{},"f:volume.kubernetes.io/provisioner-deletion-secret-namespace":{}},"f:finalizers":{".":{},"v:\"external-provisioner.volume.kubernetes.io/finalizer\"":{}},"f:labels":{}},"f:spec":{"f:accessModes":{},"f:capacity":{".":{},"f:storage":{}},"f:claimRef":{".":{},"f:apiVersion":{},"f:kind":{},"f:name":{},"f:namespace":{},"f:resourceVersion":{},"f:uid":{}},"f:csi":{".":{},"f:controllerExpandSecretRef":{".":{},"f:name":{},"f:namespace":{}},"f:driver":{},"f:fsType":{},"f:nodeStageSecretRef":{".":{},"f:name":{},"f:namespace":{}},"f:volumeAttributes":{".":{},"f:clusterID":{},"f:imageFeatures":{},"f:imageName":{},"f:journalPool":{},"f:pool":{},"f:storage.kubernetes.io/csiProvisionerIdentity":{}},"f:volumeHandle":{}},"f:persistentVolumeReclaimPolicy":{},"f:storageClassName":{},"f:volumeMode":{}}}`, "")},
			},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:    corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(capacity)},
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
				StorageClassName: class, VolumeMode: &mode,
				PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
					Driver: "rbd.csi.ceph.com", VolumeHandle: "0001-0009-rook-ceph-0000000000000002-" + id, FSType: "ext4",
					VolumeAttributes: map[string]string{
						"clusterID": "rook-ceph", "pool": "replicapool", "imageName": "csi-vol-" + id,
						"imageFeatures": "layering", "journalPool": "replicapool",
						"storage.kubernetes.io/csiProvisionerIdentity": "1761985123456-2174-rbd.csi.ceph.com",
					},
					NodeStageSecretRef:        &corev1.SecretReference{Name: "rook-csi-rbd-node", Namespace: "rook-ceph"},
					ControllerExpandSecretRef: &corev1.SecretReference{Name: "rook-csi-rbd-provisioner", Namespace: "rook-ceph"},
				}},
			},
		}
	}
	pv.UID = types.UID(fmt.Sprintf("9a1d%04x-2c3b-4e5f-9a60-%012x", i%0x10000, i))
	pv.ResourceVersion, pv.CreationTimestamp = fmt.Sprint(1001+5*i), created
	ref := &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID, ResourceVersion: pvc.ResourceVersion}
	phaseAt := metav1.NewTime(created.Add(2 * time.Second))
	bound := func() {
		pv.Spec.ClaimRef = ref
		pv.Status = corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound, LastPhaseTransitionTime: &phaseAt}
		if pv.Annotations == nil {
			pv.Annotations = map[string]string{}
		}
		pv.Annotations[AnnBoundByController] = "yes"
		pv.ManagedFields = append(pv.ManagedFields, managed("kube-controller-manager", phaseAt, `{"f:status":{"f:phase":{}}}`, "status"))
	}
	switch i % 20 {
	case 0: // Released: the claim is gone
		bound()
		pv.Status.Phase = corev1.VolumeReleased
		pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
		return pv, nil
	case 1: // Pending: no volume
		pvc.Status.Phase = corev1.ClaimPending
		if !local {
			pvc.Annotations["volume.kubernetes.io/storage-provisioner"] = "rbd.csi.ceph.com"
			pvc.Annotations["volume.beta.kubernetes.io/storage-provisioner"] = "rbd.csi.ceph.com"
		}
		return nil, pvc
	case 2: // Available: no claim
		pv.Status = corev1.PersistentVolumeStatus{Phase: corev1.VolumeAvailable, LastPhaseTransitionTime: &phaseAt}
		return pv, nil
	}
	bound()
	if !local {
		pvc.Annotations["volume.kubernetes.io/storage-provisioner"] = "rbd.csi.ceph.com"
		pvc.Annotations["volume.beta.kubernetes.io/storage-provisioner"] = "rbd.csi.ceph.com"
	}
	pvc.Annotations[AnnBindCompleted] = "yes"
	pvc.Annotations[AnnBoundByController] = "yes"
	pvc.Spec.VolumeName = pv.Name
	pvc.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, AccessModes: pv.Spec.AccessModes, Capacity: pv.Spec.Capacity}
	pvc.ManagedFields = append(pvc.ManagedFields,
		managed("kube-controller-manager", phaseAt, `{"f:metadata":{"f:annotations":{"f:pv.kubernetes.io/bind-completed":{},"f:pv.kubernetes.io/bound-by-controller":{}}},"f:spec":{"f:volumeName":{}}}`, ""),
		managed("kube-controller-manager", phaseAt, `{"f:status":{"f:accessModes":{},"f:capacity":{".":{},"f:storage":{}},"f:phase":{}}}`, "status"))
	return pv, pvc
}

func managed(manager string, at metav1.Time, fields, sub string) metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &at,
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}, Subresource: sub}
}

// lastApplied records obj as kubectl apply does, in the last-applied annotation.
func lastApplied(t testing.TB, m *metav1.ObjectMeta, obj any) {
	t.Helper()
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var manifest map[string]any
	if err := json.Unmarshal(data, &manifest); err != nil {
		t.Fatal(err)
	}
	delete(manifest, "status")
	md := manifest["metadata"].(map[string]any)
	delete(md, "creationTimestamp")
	delete(md, "uid")
	delete(md, "resourceVersion")
	if _, ok := md["annotations"]; !ok {
		md["annotations"] = map[string]any{}
	}
	if data, err = json.Marshal(manifest); err != nil {
		t.Fatal(err)
	}
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[AnnLastApplied] = string(data) + "\n"
}
