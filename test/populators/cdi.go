package populators

import (
	"context"
	"fmt"
	"maps"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CDI's names (pkg/controller/common, pkg/common, pkg/controller/populators).
const (
	CDINamespace      = "cdi"
	CDIServiceAccount = "cdi-sa"
	cdiGroup          = "cdi.kubevirt.io"

	AnnDataSourceNamespace = cdiGroup + "/dataSourceNamespace"
	annImmediateBinding    = cdiGroup + "/storage.bind.immediate.requested"
	annPodPhase            = cdiGroup + "/storage.pod.phase"
	annPodRestarts         = cdiGroup + "/storage.pod.restarts"
	annPVCPrimeName        = cdiGroup + "/storage.populator.pvcPrime"
	annPopulatorKind       = cdiGroup + "/storage.populator.kind"
	annContentType         = cdiGroup + "/storage.contentType"
	annPreallocationReq    = cdiGroup + "/storage.preallocation.requested"
	annSource              = cdiGroup + "/storage.import.source"
	annEndpoint            = cdiGroup + "/storage.import.endpoint"
	annImportPod           = cdiGroup + "/storage.import.importPodName"
	annOwnerUID            = cdiGroup + "/ownerUID"
	annCloneRequest        = "k8s.io/CloneRequest"
	annEventSourceKind     = cdiGroup + "/events.source.kind"
	annEventSource         = cdiGroup + "/events.source"
	labelExcludeFromVelero = "velero.io/exclude-from-backup"
	cdiLabelKey            = "app"
	cdiLabelValue          = "containerized-data-importer"

	VolumeImportSourceKind = "VolumeImportSource"
	VolumeCloneSourceKind  = "VolumeCloneSource"
)

// VolumeImportSources and VolumeCloneSources are CDI's populator source resources.
var (
	VolumeImportSources = schema.GroupVersionResource{Group: cdiGroup, Version: "v1beta1", Resource: "volumeimportsources"}
	VolumeCloneSources  = schema.GroupVersionResource{Group: cdiGroup, Version: "v1beta1", Resource: "volumeclonesources"}
)

// desiredAnnotations are populator-base.go's: the prime claim's import progress copied onto the
// target (those the stand-in's importer sets).
var desiredAnnotations = []string{annPodPhase, annPodRestarts, annPreallocationReq}

// CDIRBAC is the cdi-controller's ServiceAccount cdi/cdi-sa and the ClusterRole "cdi"
// (getControllerClusterPolicyRules of pkg/operator/resources/cluster/controller.go: its rules on
// core and storage objects and on CDI's own group; those on OpenShift, KubeVirt, snapshot and
// authentication objects play no part here) bound to it as the operator binds it.
func CDIRBAC() []client.Object {
	return []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: CDINamespace, Name: CDIServiceAccount}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "cdi"}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch", "get", "list", "watch"}},
			{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"}, Verbs: []string{"get", "list", "watch", "create", "update", "delete", "deletecollection", "patch"}},
			{APIGroups: []string{""}, Resources: []string{"persistentvolumes"}, Verbs: []string{"get", "list", "watch", "update"}},
			{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims/finalizers", "pods/finalizers"}, Verbs: []string{"update"}},
			{APIGroups: []string{""}, Resources: []string{"pods", "services"}, Verbs: []string{"get", "list", "watch", "create", "delete"}},
			{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "create"}},
			{APIGroups: []string{"storage.k8s.io"}, Resources: []string{"storageclasses", "csidrivers"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{cdiGroup, "forklift.cdi.kubevirt.io"}, Resources: []string{"*"}, Verbs: []string{"*"}},
		}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: CDIServiceAccount},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: CDINamespace, Name: CDIServiceAccount}},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cdi"}},
	}
}

// CDI is the stand-in for the cdi-controller's paths that hand a volume over, each pass of it
// reconciling every claim as these controllers of CDI do:
//
// Import (a target claim whose dataSourceRef is a VolumeImportSource):
//
//  1. the import populator (populator-base.go reconcileCommon, createPVCPrime): once the target is
//     ready for population (WaitForFirstConsumer: the scheduler's selected-node on it), create
//     the prime claim prime-<target uid> (PVCPrimeName) in the target's namespace, owned by the
//     target: CDI's labels, the immediate-binding annotation, selected-node copied for
//     WaitForFirstConsumer, the import annotations (updatePVCForPopulation), access modes,
//     resources, class and volume mode copied;
//  2. the import controller: create the importer pod importer-prime-<uid> mounting the prime
//     claim (spec.nodeName = the prime's selected-node, SetNodeNameIfPopulator); once it has run,
//     Update the prime claim with the pod's phase (updatePvcFromPod) and delete the pod;
//  3. the import populator (import-populator.go reconcileTargetPVC): Update the target with the
//     prime's name (updatePVCPrimeNameAnnotation), then, the prime complete and the target
//     unbound, with the prime's progress annotations (updatePVCWithPVCPrimeAnnotations), and
//     Rebind: a full Update of the volume with spec.claimRef = {namespace, name, uid,
//     resourceVersion} of the target (kind and apiVersion dropped);
//  4. reconcileCleanup: once the prime claim is Lost, delete it.
//
// Host-assisted clone across namespaces (a target claim whose dataSourceRef is a
// VolumeCloneSource in the namespace its cdi.kubevirt.io/dataSourceNamespace annotation names,
// as the DataVolume controller makes it for a cross-namespace clone):
//
//  1. planner.go createDesiredClaim and host-clone.go createClaim: create tmp-pvc-<target uid> in
//     the source namespace: the target's labels and annotations copied, plus the clone's, and its
//     spec with dataSource and dataSourceRef cleared;
//  2. the clone controller: the source and target pods (mounting the source claim and the
//     tmp-pvc), run to completion, then the tmp-pvc Updated with the pod phase, the pods deleted;
//  3. rebind.go RebindPhase: the target unbound, Rebind the tmp-pvc's volume to the target;
//  4. once the tmp-pvc is Lost, delete it (the planner's cleanup).
//
// Where CDI reads its caches the stand-in reads the apiserver; events are not recorded.
type CDI struct {
	Conn *Conn

	done map[types.UID]string
}

// StartCDI connects as cdi/cdi-sa (its RBAC installed first) and runs the stand-in until ctx
// ends.
func StartCDI(ctx context.Context, admin *rest.Config, dir string) (*CDI, error) {
	conn, err := Connect(ctx, admin, CDIRBAC(), CDINamespace, CDIServiceAccount, dir)
	if err != nil {
		return nil, err
	}
	c := &CDI{Conn: conn, done: map[types.UID]string{}}
	go conn.pollClaims(ctx, c.done, func(pvc *corev1.PersistentVolumeClaim) error {
		switch {
		case isDataSourceRefKind(pvc, VolumeImportSourceKind):
			return c.syncImport(ctx, pvc)
		case isDataSourceRefKind(pvc, VolumeCloneSourceKind):
			return c.syncClone(ctx, pvc)
		case pvc.Annotations[annPopulatorKind] != "":
			return c.syncWorker(ctx, pvc)
		}
		return nil
	})
	return c, nil
}

func isDataSourceRefKind(pvc *corev1.PersistentVolumeClaim, kind string) bool {
	ref := pvc.Spec.DataSourceRef
	return ref != nil && ref.APIGroup != nil && *ref.APIGroup == cdiGroup && ref.Kind == kind
}

func (c *CDI) getClaim(ctx context.Context, ns, name string) (*corev1.PersistentVolumeClaim, error) {
	pvc, err := c.Conn.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return pvc, err
}

// readyForPopulation is util.go claimReadyForPopulation: a WaitForFirstConsumer claim waits for
// its selected node.
func (c *CDI) readyForPopulation(ctx context.Context, pvc *corev1.PersistentVolumeClaim) (bool, string, error) {
	if pvc.Spec.StorageClassName == nil {
		return true, "", nil
	}
	sc, err := c.Conn.Kube.StorageV1().StorageClasses().Get(ctx, *pvc.Spec.StorageClassName, metav1.GetOptions{})
	if err != nil {
		return false, "", err
	}
	if sc.VolumeBindingMode != nil && *sc.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer {
		node := pvc.Annotations[annSelectedNode]
		return node != "", node, nil
	}
	return true, "", nil
}

// syncImport is the import populator's reconcile of a target claim.
func (c *CDI) syncImport(ctx context.Context, pvc *corev1.PersistentVolumeClaim) error {
	kube := c.Conn.Kube
	if pvc.DeletionTimestamp != nil {
		return nil
	}
	primeName := fmt.Sprintf("prime-%s", pvc.UID) // PVCPrimeName
	prime, err := c.getClaim(ctx, pvc.Namespace, primeName)
	if err != nil {
		return err
	}
	if prime == nil {
		if pvc.Spec.DataSourceRef.Namespace != nil {
			return nil // cross-namespace dataSourceRef not supported yet
		}
		src, err := c.Conn.Dynamic.Resource(VolumeImportSources).Namespace(pvc.Namespace).Get(ctx, pvc.Spec.DataSourceRef.Name, metav1.GetOptions{})
		if err != nil {
			return client.IgnoreNotFound(err)
		}
		ready, node, err := c.readyForPopulation(ctx, pvc)
		if !ready || err != nil {
			return err
		}
		if pvc.Spec.VolumeName != "" || pvc.Status.Phase == corev1.ClaimLost {
			return nil
		}
		// createPVCPrime
		labels := map[string]string{cdiLabelKey: cdiLabelValue, labelExcludeFromVelero: "true"}
		anns := map[string]string{annImmediateBinding: ""}
		if node != "" {
			anns[annSelectedNode] = pvc.Annotations[annSelectedNode]
		}
		prime = &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: primeName, Namespace: pvc.Namespace, Labels: labels, Annotations: anns,
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(pvc, corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaim"))}},
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: pvc.Spec.AccessModes, Resources: pvc.Spec.Resources,
				StorageClassName: pvc.Spec.StorageClassName, VolumeMode: pvc.Spec.VolumeMode},
		}
		// updatePVCForPopulation (an HTTP source).
		anns[annPopulatorKind] = VolumeImportSourceKind
		anns[annContentType] = "kubevirt"
		anns[annPreallocationReq] = "false"
		anns[annSource] = "http"
		if spec, ok := src.Object["spec"].(map[string]any); ok {
			if s, ok := spec["source"].(map[string]any); ok {
				if h, ok := s["http"].(map[string]any); ok {
					anns[annEndpoint] = fmt.Sprint(h["url"])
				}
			}
		}
		_, err = kube.CoreV1().PersistentVolumeClaims(pvc.Namespace).Create(ctx, prime, metav1.CreateOptions{})
		return err
	}

	// reconcileTargetPVC
	pvcCopy := pvc.DeepCopy()
	if _, ok := pvcCopy.Annotations[annPVCPrimeName]; !ok {
		if pvcCopy.Annotations == nil {
			pvcCopy.Annotations = map[string]string{}
		}
		pvcCopy.Annotations[annPVCPrimeName] = prime.Name
		if pvcCopy, err = kube.CoreV1().PersistentVolumeClaims(pvc.Namespace).Update(ctx, pvcCopy, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	if prime.Annotations[annPodPhase] == string(corev1.PodSucceeded) && pvcCopy.Spec.VolumeName == "" {
		if pvcCopy, err = c.updateWithPrimeAnnotations(ctx, pvcCopy, prime); err != nil {
			return err
		}
		if err := c.rebind(ctx, prime, pvcCopy); err != nil {
			return err
		}
	}
	if pvcCopy, err = c.updateWithPrimeAnnotations(ctx, pvcCopy, prime); err != nil {
		return err
	}
	// reconcileCleanup, once the target is complete and bound.
	if pvcCopy.Annotations[annPodPhase] == string(corev1.PodSucceeded) && pvcCopy.Status.Phase == corev1.ClaimBound {
		if prime.Status.Phase != corev1.ClaimLost {
			return nil
		}
		if err := kube.CoreV1().PersistentVolumeClaims(prime.Namespace).Delete(ctx, prime.Name, metav1.DeleteOptions{}); err != nil {
			return err
		}
		c.done[pvc.UID] = pvcCopy.ResourceVersion
	}
	return nil
}

// updateWithPrimeAnnotations is updatePVCWithPVCPrimeAnnotations: an Update when the copied
// annotations change the target.
func (c *CDI) updateWithPrimeAnnotations(ctx context.Context, pvc, prime *corev1.PersistentVolumeClaim) (*corev1.PersistentVolumeClaim, error) {
	cp := pvc.DeepCopy()
	for _, ann := range desiredAnnotations {
		if v, ok := prime.Annotations[ann]; ok {
			if cp.Annotations == nil {
				cp.Annotations = map[string]string{}
			}
			cp.Annotations[ann] = v
		} else {
			delete(cp.Annotations, ann)
		}
	}
	if reflect.DeepEqual(pvc.ObjectMeta, cp.ObjectMeta) {
		return pvc, nil
	}
	return c.Conn.Kube.CoreV1().PersistentVolumeClaims(pvc.Namespace).Update(ctx, cp, metav1.UpdateOptions{})
}

// rebind is common/util.go Rebind.
func (c *CDI) rebind(ctx context.Context, source, target *corev1.PersistentVolumeClaim) error {
	pv, err := c.Conn.Kube.CoreV1().PersistentVolumes().Get(ctx, source.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if pv.Spec.ClaimRef == nil {
		return fmt.Errorf("PV %s claimRef is nil", pv.Name)
	}
	if !boundTo(pv, source) {
		if !boundTo(pv, target) {
			return fmt.Errorf("PV %s bound to unexpected claim %s", pv.Name, pv.Spec.ClaimRef.Name)
		}
		return nil
	}
	pv.Spec.ClaimRef = &corev1.ObjectReference{Namespace: target.Namespace, Name: target.Name, UID: target.UID, ResourceVersion: target.ResourceVersion}
	_, err = c.Conn.Kube.CoreV1().PersistentVolumes().Update(ctx, pv, metav1.UpdateOptions{})
	return err
}

// boundTo is IsPVBoundToPVC.
func boundTo(pv *corev1.PersistentVolume, pvc *corev1.PersistentVolumeClaim) bool {
	ref := pv.Spec.ClaimRef
	return ref != nil && ref.Name == pvc.Name && ref.Namespace == pvc.Namespace && ref.UID == pvc.UID
}

// syncWorker is the import controller (for a prime claim) and the clone controller (for a
// tmp-pvc): the worker pod, then the claim's pod-phase annotation, then the pod deleted.
func (c *CDI) syncWorker(ctx context.Context, pvc *corev1.PersistentVolumeClaim) error {
	kube := c.Conn.Kube
	if pvc.DeletionTimestamp != nil || pvc.Annotations[annPodPhase] == string(corev1.PodSucceeded) || pvc.Status.Phase != corev1.ClaimBound {
		return nil
	}
	var pods []*corev1.Pod
	switch pvc.Annotations[annPopulatorKind] {
	case VolumeImportSourceKind:
		p := workerPod(pvc.Namespace, "importer-"+pvc.Name, "importer", pvc.Name)
		p.Spec.NodeName = pvc.Annotations[annSelectedNode] // SetNodeNameIfPopulator
		pods = append(pods, p)
	case VolumeCloneSourceKind:
		ns, src, _ := cutSlash(pvc.Annotations[annCloneRequest])
		pods = append(pods, workerPod(ns, fmt.Sprintf("%s-source-pod", pvc.Annotations[annOwnerUID]), "cdi-clone-source", src),
			workerPod(pvc.Namespace, "cdi-upload-"+pvc.Name, "cdi-upload-server", pvc.Name))
	default:
		return nil
	}
	succeeded := true
	for _, want := range pods {
		got, err := kube.CoreV1().Pods(want.Namespace).Get(ctx, want.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			if _, err := kube.CoreV1().Pods(want.Namespace).Create(ctx, want, metav1.CreateOptions{}); err != nil {
				return err
			}
			succeeded = false
			continue
		}
		if err != nil {
			return err
		}
		if got.Status.Phase != corev1.PodSucceeded {
			succeeded = false
		}
	}
	if !succeeded {
		return nil
	}
	cp := pvc.DeepCopy()
	anns := maps.Clone(cp.Annotations)
	anns[annPodPhase] = string(corev1.PodSucceeded)
	anns[annPodRestarts] = "0"
	if pvc.Annotations[annPopulatorKind] == VolumeImportSourceKind {
		anns[annImportPod] = pods[0].Name
	}
	cp.Annotations = anns
	if _, err := kube.CoreV1().PersistentVolumeClaims(pvc.Namespace).Update(ctx, cp, metav1.UpdateOptions{}); err != nil {
		return err
	}
	for _, p := range pods {
		if err := kube.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{}); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}

func workerPod(ns, name, container, claim string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{cdiLabelKey: cdiLabelValue}},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyOnFailure,
			Containers: []corev1.Container{{Name: container, Image: "quay.io/kubevirt/cdi-importer:v1.66.0",
				VolumeMounts: []corev1.VolumeMount{{Name: "cdi-data-vol", MountPath: "/data"}}}},
			Volumes: []corev1.Volume{{Name: "cdi-data-vol", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}},
		},
	}
}

func cutSlash(s string) (string, string, bool) {
	for i := range len(s) {
		if s[i] == '/' {
			return s[:i], s[i+1:], true
		}
	}
	return "", s, false
}

// syncClone is the clone populator's plan for a cross-namespace host-assisted clone.
func (c *CDI) syncClone(ctx context.Context, pvc *corev1.PersistentVolumeClaim) error {
	kube := c.Conn.Kube
	if pvc.DeletionTimestamp != nil {
		return nil
	}
	srcNS := pvc.Namespace
	if ns := pvc.Annotations[AnnDataSourceNamespace]; ns != "" {
		srcNS = ns // getPopulationSourceNamespace
	}
	vcs, err := c.Conn.Dynamic.Resource(VolumeCloneSources).Namespace(srcNS).Get(ctx, pvc.Spec.DataSourceRef.Name, metav1.GetOptions{})
	if err != nil {
		return client.IgnoreNotFound(err)
	}
	source, _ := vcs.Object["spec"].(map[string]any)["source"].(map[string]any)
	sourceName := fmt.Sprint(source["name"])
	tmpName := fmt.Sprintf("tmp-pvc-%s", pvc.UID)
	tmp, err := c.getClaim(ctx, srcNS, tmpName)
	if err != nil {
		return err
	}
	if pvc.Spec.VolumeName == "" {
		ready, _, err := c.readyForPopulation(ctx, pvc)
		if !ready || err != nil {
			return err
		}
		if tmp == nil {
			// createDesiredClaim, then HostClonePhase.createClaim.
			t := pvc.DeepCopy()
			claim := &corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Namespace: srcNS, Name: tmpName, Labels: t.Labels, Annotations: t.Annotations},
				Spec:       t.Spec,
			}
			claim.Spec.DataSource, claim.Spec.DataSourceRef = nil, nil
			if claim.Annotations == nil {
				claim.Annotations = map[string]string{}
			}
			if claim.Labels == nil {
				claim.Labels = map[string]string{}
			}
			claim.Annotations[annPreallocationReq] = "false"
			claim.Annotations[annOwnerUID] = string(pvc.UID)
			claim.Annotations[annPodRestarts] = "0"
			claim.Annotations[annCloneRequest] = srcNS + "/" + sourceName
			claim.Annotations[annPopulatorKind] = VolumeCloneSourceKind
			claim.Annotations[annEventSourceKind] = "PersistentVolumeClaim"
			claim.Annotations[annEventSource] = pvc.Namespace + "/" + pvc.Name
			claim.Annotations[annImmediateBinding] = ""
			claim.Labels[labelExcludeFromVelero] = "true"
			_, err := kube.CoreV1().PersistentVolumeClaims(srcNS).Create(ctx, claim, metav1.CreateOptions{})
			return err
		}
		if tmp.Annotations[annPodPhase] != string(corev1.PodSucceeded) {
			return nil // hostCloneComplete
		}
		return c.rebind(ctx, tmp, pvc) // RebindPhase
	}
	if tmp != nil {
		if tmp.Status.Phase != corev1.ClaimLost {
			return nil
		}
		return kube.CoreV1().PersistentVolumeClaims(srcNS).Delete(ctx, tmp.Name, metav1.DeleteOptions{})
	}
	c.done[pvc.UID] = pvc.ResourceVersion
	return nil
}
