package gen

import (
	"encoding/json"
	"fmt"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/test/testobj"
	"github.com/pvguard/pvguard/webhook"
)

// Admission: a realistic cluster state and the AdmissionReview bodies an apiserver would send
// for it, shared by the webhook's tests and benchmarks and hack/bench/admission, so that their
// numbers describe the same work.

// AdmissionCase is one kind of review the admission benchmarks send.
type AdmissionCase struct {
	// Name is the sub-benchmark name: pv-create, pvc-create, pvc-update.
	Name string
	// Path is the webhook endpoint.
	Path string
	// Body is the AdmissionReview JSON, as the apiserver sends it.
	Body []byte
}

// AdmissionPairs is the number of bound volume/claim pairs in AdmissionObjects besides the
// objects the reviews are about.
const AdmissionPairs = 200

var (
	nodeNames = func() []string {
		out := make([]string, 8)
		for i := range out {
			out[i] = fmt.Sprintf("node-%d", i+1)
		}
		return out
	}()
	managedTime = metav1.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
)

// meta gives an object the metadata a stored object carries: uid, resourceVersion, creation
// time, labels and a managedFields entry (the apiserver sends them all to webhooks).
func meta(m *metav1.ObjectMeta, manager string) {
	if m.UID == "" {
		m.UID = types.UID("0f3c2a9e-" + m.Name)
	}
	m.ResourceVersion = "481516"
	m.CreationTimestamp = managedTime
	if m.Labels == nil {
		m.Labels = map[string]string{}
	}
	m.Labels["app.kubernetes.io/part-of"] = "storage-import"
	m.Labels["team"] = "team-a"
	m.ManagedFields = []metav1.ManagedFieldsEntry{{
		Manager: manager, Operation: metav1.ManagedFieldsOperationApply, APIVersion: "v1", Time: &managedTime,
		FieldsType: "FieldsV1",
		FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:labels":{"f:app.kubernetes.io/part-of":{},"f:team":{}}},` +
			`"f:spec":{"f:accessModes":{},"f:capacity":{"f:storage":{}},"f:storageClassName":{},"f:volumeMode":{}}}`)},
	}}
}

func localPV(name, node string, mods ...testobj.PVMod) *corev1.PersistentVolume {
	base := []testobj.PVMod{
		testobj.Capacity("100Gi"), testobj.Class("local-ssd"), testobj.VolumeMode(corev1.PersistentVolumeFilesystem),
		testobj.NodeAffinity("kubernetes.io/hostname", node),
		func(pv *corev1.PersistentVolume) {
			pv.Spec.PersistentVolumeSource = corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/mnt/disks/" + name}}
			pv.Finalizers = []string{"kubernetes.io/pv-protection"}
			pv.Labels = map[string]string{"disk-type": "nvme"}
		},
	}
	pv := testobj.PV(name, append(base, mods...)...)
	meta(&pv.ObjectMeta, "kubectl")
	return pv
}

func csiPV(name string, mods ...testobj.PVMod) *corev1.PersistentVolume {
	base := []testobj.PVMod{
		testobj.Capacity("50Gi"), testobj.Class("ceph-rbd"), testobj.VolumeMode(corev1.PersistentVolumeFilesystem),
		testobj.CSI("rbd.csi.ceph.com", "0001-0009-rook-ceph-0000000000000002-"+name, map[string]string{
			"clusterID": "rook-ceph", "imageFeatures": "layering", "imageName": "csi-vol-" + name,
			"journalPool": "replicapool", "pool": "replicapool", "storage.kubernetes.io/csiProvisionerIdentity": "1700000000000-8081-rbd.csi.ceph.com",
		}),
		func(pv *corev1.PersistentVolume) {
			pv.Spec.CSI.FSType = "ext4"
			pv.Spec.CSI.NodeStageSecretRef = &corev1.SecretReference{Name: "rook-csi-rbd-node", Namespace: "rook-ceph"}
			pv.Finalizers = []string{"kubernetes.io/pv-protection"}
		},
	}
	pv := testobj.PV(name, append(base, mods...)...)
	meta(&pv.ObjectMeta, "kubectl")
	return pv
}

func admissionClaim(ns, name string, mods ...testobj.PVCMod) *corev1.PersistentVolumeClaim {
	pvc := testobj.PVC(ns, name, mods...)
	pvc.Finalizers = []string{"kubernetes.io/pvc-protection"}
	meta(&pvc.ObjectMeta, "kubectl")
	pvc.UID = types.UID("uid-" + ns + "-" + name)
	return pvc
}

// AdmissionObjects is the cluster state the reviews are judged against: two classes, eight nodes,
// AdmissionPairs bound volume/claim pairs (local disks with node affinity and Ceph RBD volumes), and the
// objects the three reviews refer to.
func AdmissionObjects() []runtime.Object {
	var out []runtime.Object
	out = append(out,
		testobj.StorageClass("local-ssd", "kubernetes.io/no-provisioner", func(sc *storagev1.StorageClass) {
			mode := storagev1.VolumeBindingWaitForFirstConsumer
			sc.VolumeBindingMode = &mode
		}),
		testobj.StorageClass("ceph-rbd", "rbd.csi.ceph.com", testobj.DefaultClass),
	)
	for i, n := range nodeNames {
		out = append(out, testobj.Node(n, map[string]string{"topology.kubernetes.io/zone": fmt.Sprintf("zone-%d", i%3)}))
	}
	for i := range AdmissionPairs {
		ns := fmt.Sprintf("team-%c", 'a'+i%6)
		var pv *corev1.PersistentVolume
		pvc := admissionClaim(ns, fmt.Sprintf("data-%04d", i), testobj.ClaimClass("ceph-rbd"), testobj.Request("50Gi"))
		if i%2 == 0 {
			pvc.Spec.StorageClassName = ptr("local-ssd")
			pvc.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("100Gi")
			pv = localPV(fmt.Sprintf("pv-local-%04d", i), nodeNames[i%len(nodeNames)], testobj.BoundTo(pvc))
		} else {
			pv = csiPV(fmt.Sprintf("pvc-%08x", i), testobj.BoundTo(pvc))
		}
		testobj.ClaimBoundTo(pv.Name)(pvc)
		testobj.ClaimBoundStatus(pv)(pvc)
		out = append(out, pv, pvc)
	}
	// The claim the volume import (pv-create) is pre-bound to: Pending, naming no volume.
	out = append(out, admissionClaim("team-a", "import-1", testobj.ClaimClass("ceph-rbd"), testobj.Request("50Gi"),
		testobj.ClaimPhase(corev1.ClaimPending)))
	// The volume the pre-bound claim (pvc-create) names: Available, pre-bound to it by name.
	out = append(out, localPV("pv-restore", "node-3", testobj.ClaimRef("team-a", "db-restore", ""),
		testobj.Phase(corev1.VolumeAvailable), testobj.PVMeta(func(m *metav1.ObjectMeta) { m.Labels["restore"] = "db" })))
	return out
}

// AdmissionView is the in-memory view of AdmissionObjects, indexed (each lookup a map read, as with the informer
// cache's indexes) and copying each object it returns as the cluster view's cache reads do.
func AdmissionView() policy.View {
	return CacheView{testobj.NewView(AdmissionObjects()...).State}
}

// ImportedPV is the volume the pv-create review creates: a Ceph RBD volume pre-bound by name to
// team-a/import-1.
func ImportedPV() *corev1.PersistentVolume {
	return csiPV("pv-import-1", testobj.ClaimRef("team-a", "import-1", ""))
}

// PreboundClaim is the claim the pvc-create review creates: it names pv-restore and selects it
// by label, so every at-bind rule has a pair to judge.
func PreboundClaim() *corev1.PersistentVolumeClaim {
	pvc := admissionClaim("team-a", "db-restore", testobj.ClaimClass("local-ssd"), testobj.Request("80Gi"),
		testobj.VolumeName("pv-restore"), testobj.Selector(map[string]string{"restore": "db"}),
		testobj.ClaimPhase(corev1.ClaimPending))
	pvc.ResourceVersion, pvc.ManagedFields[0].Operation = "", metav1.ManagedFieldsOperationUpdate
	return pvc
}

// ResizedClaim is the pvc-update review's pair: a bound claim (data-0001) whose request grows.
func ResizedClaim() (cur, old *corev1.PersistentVolumeClaim) {
	for _, o := range AdmissionObjects() {
		if pvc, ok := o.(*corev1.PersistentVolumeClaim); ok && pvc.Name == "data-0001" {
			old = pvc
		}
	}
	cur = old.DeepCopy()
	cur.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("80Gi")
	return cur, old
}

// AdmissionCases are the three reviews: a volume import pre-bound to a pending claim, a claim pre-bound
// to an available volume (the path that runs every at-bind rule), and a bound claim's resize.
func AdmissionCases() []AdmissionCase {
	pvcCur, pvcOld := ResizedClaim()
	return []AdmissionCase{
		{Name: "pv-create", Path: webhook.PathValidatePV, Body: reviewBody("PersistentVolume", "persistentvolumes", admissionv1.Create, ImportedPV(), nil)},
		{Name: "pvc-create", Path: webhook.PathValidatePVC, Body: reviewBody("PersistentVolumeClaim", "persistentvolumeclaims", admissionv1.Create, PreboundClaim(), nil)},
		{Name: "pvc-update", Path: webhook.PathValidatePVC, Body: reviewBody("PersistentVolumeClaim", "persistentvolumeclaims", admissionv1.Update, pvcCur, pvcOld)},
	}
}

// reviewBody encodes an AdmissionReview the way the apiserver fills one in.
func reviewBody(kind, res string, op admissionv1.Operation, obj, old runtime.Object) []byte {
	raw := func(o runtime.Object) runtime.RawExtension {
		if o == nil {
			return runtime.RawExtension{}
		}
		data, err := json.Marshal(o)
		if err != nil {
			panic(err)
		}
		return runtime.RawExtension{Raw: data}
	}
	m := obj.(metav1.Object)
	gvk := metav1.GroupVersionKind{Version: "v1", Kind: kind}
	gvr := metav1.GroupVersionResource{Version: "v1", Resource: res}
	opts := runtime.RawExtension{Raw: []byte(`{"kind":"CreateOptions","apiVersion":"meta.k8s.io/v1","fieldManager":"kubectl-client-side-apply","fieldValidation":"Strict"}`)}
	if op == admissionv1.Update {
		opts.Raw = []byte(`{"kind":"UpdateOptions","apiVersion":"meta.k8s.io/v1","fieldManager":"kubectl-edit","fieldValidation":"Strict"}`)
	}
	ar := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: types.UID("705ab4f5-6393-11e8-b7cc-42010a800002"), Kind: gvk, Resource: gvr,
			RequestKind: &gvk, RequestResource: &gvr,
			Name: m.GetName(), Namespace: m.GetNamespace(), Operation: op,
			UserInfo: authenticationv1.UserInfo{Username: "alice@example.com", UID: "b5f3c8d2-alice",
				Groups: []string{"storage-admins", "system:authenticated"}},
			Object: raw(obj), OldObject: raw(old), DryRun: ptr(false), Options: opts,
		},
	}
	data, err := json.Marshal(ar)
	if err != nil {
		panic(err)
	}
	return data
}

func ptr[T any](v T) *T { return &v }
