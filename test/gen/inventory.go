package gen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/pvguard/pvguard/clusterstate"
	"github.com/pvguard/pvguard/storage"
)

// Inventory: large synthetic clusters for the audit tests and benchmarks (policy, manifests,
// hack/bench/audit): half volumes, half claims, mostly bound pairs with realistic specs (local
// disks with node affinity, Ceph RBD volumes with CSI attributes, labels, annotations,
// finalizers), and a sprinkling of the violations an audit finds.

// InventoryNow is the time the audits of an Inventory are dated, so PVG023's released-aging
// findings are stable.
var InventoryNow = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

// Violations every this many pairs, one kind each, in the order of violationKinds; the other
// pairs are healthy bound pairs.
const violationEvery = 20

// The violations, one per slot of violationEvery: about 1% of pairs each, 5% in all.
const (
	modeMismatch = iota // PVG001: a Block volume bound to a Filesystem claim
	danglingRef         // PVG020: a Bound volume whose claim is gone (the claim slot holds a Pending claim)
	lostClaim           // PVG021: a claim in phase Lost, its volume gone (the volume slot holds an Available volume)
	failedVolume        // PVG024: a volume in phase Failed (its claim slot holds a Pending claim)
	releasedAged        // PVG023: a Retain volume Released 30 days ago (its claim slot holds a Pending claim)
	violationKinds
)

// InventoryFindings is how many findings Inventory(n) yields: one per violation.
func InventoryFindings(n int) int {
	pairs := n / 2
	return (pairs/violationEvery)*violationKinds + min(pairs%violationEvery, violationKinds)
}

// Inventory returns the state of n objects (n/2 volumes and n/2 claims) plus three storage
// classes and 32 nodes. It is deterministic.
func Inventory(n int) *clusterstate.State {
	pairs := n / 2
	volumes := make([]*corev1.PersistentVolume, 0, pairs)
	claims := make([]*corev1.PersistentVolumeClaim, 0, pairs)
	var nodes []*corev1.Node
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	classes := []*storagev1.StorageClass{
		{TypeMeta: metav1.TypeMeta{Kind: "StorageClass", APIVersion: "storage.k8s.io/v1"}, ObjectMeta: metav1.ObjectMeta{Name: "local-ssd"},
			Provisioner: "kubernetes.io/no-provisioner", VolumeBindingMode: &wffc},
		{TypeMeta: metav1.TypeMeta{Kind: "StorageClass", APIVersion: "storage.k8s.io/v1"}, ObjectMeta: metav1.ObjectMeta{Name: "ceph-rbd",
			Annotations: map[string]string{storage.AnnDefaultClass: "true"}}, Provisioner: "rbd.csi.ceph.com",
			Parameters: map[string]string{"clusterID": "rook-ceph", "pool": "replicapool", "imageFeatures": "layering"}},
		{TypeMeta: metav1.TypeMeta{Kind: "StorageClass", APIVersion: "storage.k8s.io/v1"}, ObjectMeta: metav1.ObjectMeta{Name: "nfs"},
			Provisioner: "nfs.csi.k8s.io"},
	}
	for i := range 32 {
		name := fmt.Sprintf("node-%02d", i)
		nodes = append(nodes, &corev1.Node{TypeMeta: metav1.TypeMeta{Kind: "Node", APIVersion: "v1"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
				"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": fmt.Sprintf("zone-%d", i%3)}}})
	}
	created := metav1.NewTime(InventoryNow.Add(-90 * 24 * time.Hour))
	for i := range pairs {
		ns := fmt.Sprintf("team-%03d", i%100)
		pvc := inventoryClaim(ns, fmt.Sprintf("data-%07d", i), created)
		var pv *corev1.PersistentVolume
		if i%3 == 0 {
			pv = localVolume(fmt.Sprintf("local-pv-%07d", i), fmt.Sprintf("node-%02d", i%32), created)
			pvc.Spec.StorageClassName = ptr("local-ssd")
			pvc.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("100Gi")}
		} else {
			pv = rbdVolume(fmt.Sprintf("pvc-%08x-%04x-4d3c-9e1f-%012d", i, i%65536, i), created)
		}
		bindPair(pv, pvc)
		if i%violationEvery < violationKinds {
			switch i % violationEvery {
			case modeMismatch:
				pv.Spec.VolumeMode = ptr(corev1.PersistentVolumeBlock)
			case danglingRef:
				unbindClaim(pvc) // the claim the volume names is gone: this one has another name
				pvc.Name += "-new"
			case lostClaim:
				pvc.Status.Phase = corev1.ClaimLost
				pvc.Spec.VolumeName = pv.Name + "-deleted" // its volume is gone
				pv.Spec.ClaimRef, pv.Status.Phase = nil, corev1.VolumeAvailable
			case failedVolume:
				pv.Status.Phase, pv.Status.Message = corev1.VolumeFailed, "error getting deleter volume plugin for volume: no deletable volume plugin matched"
				unbindClaim(pvc)
				pvc.Name += "-new"
			case releasedAged:
				pv.Status.Phase = corev1.VolumeReleased
				pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
				at := metav1.NewTime(InventoryNow.Add(-30 * 24 * time.Hour))
				pv.Status.LastPhaseTransitionTime = &at
				unbindClaim(pvc)
				pvc.Name += "-new"
			}
		}
		volumes = append(volumes, pv)
		claims = append(claims, pvc)
	}
	return clusterstate.New(claims, volumes, classes, nodes)
}

func inventoryClaim(ns, name string, created metav1.Time) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		TypeMeta: metav1.TypeMeta{Kind: "PersistentVolumeClaim", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(fmt.Sprintf("6c1f%04x-%s-%s", len(name), ns, name)),
			ResourceVersion: "123456", CreationTimestamp: created,
			Labels:      map[string]string{"app.kubernetes.io/name": "postgres", "app.kubernetes.io/instance": name},
			Annotations: map[string]string{"volume.kubernetes.io/storage-provisioner": "rbd.csi.ceph.com"},
			Finalizers:  []string{"kubernetes.io/pvc-protection"}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr("ceph-rbd"),
			VolumeMode:       ptr(corev1.PersistentVolumeFilesystem),
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("20Gi")},
			},
		},
	}
}

func inventoryVolume(name string, created metav1.Time) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		TypeMeta: metav1.TypeMeta{Kind: "PersistentVolume", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("9a7e-" + name), ResourceVersion: "654321", CreationTimestamp: created,
			Finalizers: []string{"kubernetes.io/pv-protection"}},
		Spec: corev1.PersistentVolumeSpec{
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			VolumeMode:                    ptr(corev1.PersistentVolumeFilesystem),
		},
	}
}

func localVolume(name, node string, created metav1.Time) *corev1.PersistentVolume {
	pv := inventoryVolume(name, created)
	pv.Labels = map[string]string{"storage.example.com/disk": "nvme"}
	pv.Spec.StorageClassName = "local-ssd"
	pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
	pv.Spec.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("100Gi")}
	pv.Spec.Local = &corev1.LocalVolumeSource{Path: "/mnt/disks/" + name}
	pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
	}}}}
	return pv
}

func rbdVolume(name string, created metav1.Time) *corev1.PersistentVolume {
	pv := inventoryVolume(name, created)
	pv.Annotations = map[string]string{storage.AnnProvisionedBy: "rbd.csi.ceph.com"}
	pv.Spec.StorageClassName = "ceph-rbd"
	pv.Spec.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("20Gi")}
	pv.Spec.CSI = &corev1.CSIPersistentVolumeSource{
		Driver: "rbd.csi.ceph.com", VolumeHandle: "0001-0009-rook-ceph-0000000000000002-" + name, FSType: "ext4",
		VolumeAttributes: map[string]string{
			"clusterID": "rook-ceph", "imageFeatures": "layering", "imageName": "csi-vol-" + name, "journalPool": "replicapool",
			"pool": "replicapool", "storage.kubernetes.io/csiProvisionerIdentity": "1700000000000-8081-rbd.csi.ceph.com",
		},
		NodeStageSecretRef: &corev1.SecretReference{Name: "rook-csi-rbd-node", Namespace: "rook-ceph"},
	}
	return pv
}

// bindPair makes the pair Bound as the PV controller leaves it.
func bindPair(pv *corev1.PersistentVolume, pvc *corev1.PersistentVolumeClaim) {
	pv.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: pvc.Namespace, Name: pvc.Name,
		UID: pvc.UID, ResourceVersion: "123400"}
	pv.Status.Phase = corev1.VolumeBound
	pvc.Spec.VolumeName = pv.Name
	if pvc.Annotations == nil {
		pvc.Annotations = map[string]string{}
	}
	pvc.Annotations[storage.AnnBindCompleted] = "yes"
	pvc.Annotations[storage.AnnBoundByController] = "yes"
	pvc.Status.Phase = corev1.ClaimBound
	pvc.Status.AccessModes = pv.Spec.AccessModes
	pvc.Status.Capacity = pv.Spec.Capacity.DeepCopy()
}

// unbindClaim leaves a claim Pending, naming no volume.
func unbindClaim(pvc *corev1.PersistentVolumeClaim) {
	pvc.Spec.VolumeName = ""
	delete(pvc.Annotations, storage.AnnBindCompleted)
	delete(pvc.Annotations, storage.AnnBoundByController)
	pvc.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}
	pvc.UID = types.UID(string(pvc.UID) + "-new")
}

// WriteYAML writes the state as multi-document YAML files of perFile objects each into dir
// (classes and nodes first), as a GitOps repository holds them, and returns the files.
func WriteYAML(s *clusterstate.State, dir string, perFile int) ([]string, error) {
	return writeFiles(s, dir, perFile, false)
}

// WriteJSON writes the state as JSON files of perFile objects each, every file a v1 List as
// `kubectl get pv,pvc -A -o json` prints one, and returns the files.
func WriteJSON(s *clusterstate.State, dir string, perFile int) ([]string, error) {
	return writeFiles(s, dir, perFile, true)
}

// WriteYAMLList writes the state as YAML files of perFile objects each, every file a v1 List
// as `kubectl get pv,pvc -A -o yaml` prints one, and returns the files.
func WriteYAMLList(s *clusterstate.State, dir string, perFile int) ([]string, error) {
	files, err := WriteJSON(s, dir, perFile)
	if err != nil {
		return nil, err
	}
	for i, name := range files {
		js, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		y, err := yaml.JSONToYAML(js)
		if err != nil {
			return nil, err
		}
		files[i] = strings.TrimSuffix(name, ".json") + ".yaml"
		if err := os.WriteFile(files[i], y, 0o644); err != nil {
			return nil, err
		}
		if err := os.Remove(name); err != nil {
			return nil, err
		}
	}
	return files, nil
}

func writeFiles(s *clusterstate.State, dir string, perFile int, asJSON bool) ([]string, error) {
	var objs []any
	for _, o := range s.Classes() {
		objs = append(objs, o)
	}
	for _, o := range s.Nodes() {
		objs = append(objs, o)
	}
	volumes, claims := s.Volumes(), s.Claims()
	for i := range max(len(volumes), len(claims)) {
		if i < len(volumes) {
			objs = append(objs, volumes[i])
		}
		if i < len(claims) {
			objs = append(objs, claims[i])
		}
	}
	var files []string
	for start := 0; start < len(objs); start += perFile {
		var buf bytes.Buffer
		chunk := objs[start:min(start+perFile, len(objs))]
		ext := "yaml"
		if asJSON {
			ext = "json"
			data, err := json.MarshalIndent(map[string]any{"apiVersion": "v1", "kind": "List", "items": chunk}, "", "    ")
			if err != nil {
				return nil, err
			}
			buf.Write(data)
		}
		for _, o := range chunk {
			if asJSON {
				break
			}
			data, err := yaml.Marshal(o)
			if err != nil {
				return nil, err
			}
			buf.WriteString("---\n")
			buf.Write(data)
		}
		name := filepath.Join(dir, fmt.Sprintf("objects-%05d.%s", start/perFile, ext))
		if err := os.WriteFile(name, buf.Bytes(), 0o644); err != nil {
			return nil, err
		}
		files = append(files, name)
	}
	return files, nil
}

// Unique makes every value of the state's volumes and claims that an inventory usually
// repeats unique to its object (labels, annotations, finalizers, sizes, node affinity), for
// measuring the audit where nothing repeats. Findings are unchanged: a pair keeps one size.
func Unique(s *clusterstate.State) {
	size := func(i int) resource.Quantity {
		return *resource.NewQuantity(20<<30+int64(i)<<20, resource.BinarySI)
	}
	for i, pv := range s.Volumes() {
		pv.Labels = map[string]string{"bench.pvguard.io/volume": pv.Name}
		pv.Annotations = map[string]string{"bench.pvguard.io/volume": pv.Name}
		pv.Finalizers = []string{"bench.pvguard.io/" + pv.Name}
		pv.Spec.Capacity = corev1.ResourceList{corev1.ResourceStorage: size(i)}
		if a := pv.Spec.NodeAffinity; a != nil {
			req := &a.Required.NodeSelectorTerms[0].MatchExpressions[0]
			req.Values = append(req.Values, "bench-"+pv.Name)
		}
	}
	for i, pvc := range s.Claims() {
		for k := range pvc.Annotations {
			pvc.Annotations[k] += "-" + pvc.Name
		}
		pvc.Labels = map[string]string{"bench.pvguard.io/claim": pvc.Name}
		pvc.Finalizers = []string{"bench.pvguard.io/" + pvc.Name}
		pvc.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceStorage: size(i)}
		if pvc.Status.Capacity != nil {
			pvc.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: size(i)}
		}
	}
}
