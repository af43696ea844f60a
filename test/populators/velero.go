package populators

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Velero's names (pkg/apis/velero/v1/labels_annotations.go, pkg/util/kube, pkg/install).
const (
	VeleroNamespace       = "velero"
	VeleroServiceAccount  = "velero"
	DynamicPVRestoreLabel = "velero.io/dynamic-pv-restore"
	annBindCompleted      = "pv.kubernetes.io/bind-completed"
	annBoundByController  = "pv.kubernetes.io/bound-by-controller"
)

// VeleroRBAC is what `velero install` creates for the server and the node-agent: the
// ServiceAccount velero/velero bound to cluster-admin by the ClusterRoleBinding "velero"
// (pkg/install/resources.go ClusterRoleBinding).
func VeleroRBAC() []client.Object {
	return []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: VeleroNamespace, Name: VeleroServiceAccount}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "velero"},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: VeleroNamespace, Name: VeleroServiceAccount}},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"}},
	}
}

// Velero is the stand-in for Velero's data-mover restore of one volume: the restore's claim
// (RestoreTargetClaim), the node-agent's exposer (Expose) and its hand-over (RebindVolume). The
// test runs the data path itself (writes the data into the restore volume) between Expose and
// RebindVolume. Every write is upstream's, as the velero ServiceAccount.
type Velero struct {
	Conn *Conn
}

// ConnectVelero installs Velero's RBAC and connects as velero/velero.
func ConnectVelero(ctx context.Context, admin *rest.Config, dir string) (*Velero, error) {
	conn, err := Connect(ctx, admin, VeleroRBAC(), VeleroNamespace, VeleroServiceAccount, dir)
	if err != nil {
		return nil, err
	}
	return &Velero{Conn: conn}, nil
}

func (v *Velero) record(err error) error {
	v.Conn.recordErr(err)
	return err
}

// RestoreTargetClaim creates the restored claim as pkg/restore/actions/csi/pvc_action.go
// restoreFromDataUploadResult leaves it for a data-mover restore: no volumeName and a selector
// on velero.io/dynamic-pv-restore (<namespace>.<name>.<random>, GetValidName), so that no
// provisioner and no binder give it a volume of its own.
func (v *Velero) RestoreTargetClaim(ctx context.Context, pvc *corev1.PersistentVolumeClaim) (*corev1.PersistentVolumeClaim, error) {
	pvc = pvc.DeepCopy()
	pvc.Spec.VolumeName = ""
	if pvc.Spec.Selector == nil {
		pvc.Spec.Selector = &metav1.LabelSelector{}
	}
	if pvc.Spec.Selector.MatchLabels == nil {
		pvc.Spec.Selector.MatchLabels = map[string]string{}
	}
	value := fmt.Sprintf("%s.%s.%s", pvc.Namespace, pvc.Name, utilrand.String(5))
	if len(value) > 63 {
		value = value[:57] + utilrand.String(6) // GetValidName shortens with a hash; any valid value does here
	}
	pvc.Spec.Selector.MatchLabels[DynamicPVRestoreLabel] = value
	out, err := v.Conn.Kube.CoreV1().PersistentVolumeClaims(pvc.Namespace).Create(ctx, pvc, metav1.CreateOptions{})
	return out, v.record(err)
}

// Expose is generic_restore.go Expose without a cache volume: wait until the target claim is
// consumed (WaitPVCConsumed: a WaitForFirstConsumer claim waits for its selected node), refuse a
// bound target, create the restore pod (createRestorePod: named after the owner, a node selector
// on the selected node) and the restore claim (createRestorePVC: named after the owner, the
// target's labels and annotations, access modes, class, volume mode and resources, the selected
// node as its only annotation when there is one), both owned by owner (the DataDownload).
func (v *Velero) Expose(ctx context.Context, owner corev1.ObjectReference, targetNS, targetName string, timeout time.Duration) error {
	kube := v.Conn.Kube
	var target *corev1.PersistentVolumeClaim
	var selectedNode string
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		pvc, err := kube.CoreV1().PersistentVolumeClaims(targetNS).Get(ctx, targetName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		target = pvc
		if pvc.Spec.StorageClassName == nil {
			return true, nil
		}
		sc, err := kube.StorageV1().StorageClasses().Get(ctx, *pvc.Spec.StorageClassName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if sc.VolumeBindingMode != nil && *sc.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer {
			selectedNode = pvc.Annotations[annSelectedNode]
			return selectedNode != "", nil
		}
		return true, nil
	})
	if err != nil {
		return v.record(fmt.Errorf("error to wait target PVC consumed, %s/%s: %w", targetNS, targetName, err))
	}
	if target.Status.Phase == corev1.ClaimBound {
		return v.record(fmt.Errorf("Target PVC %s/%s has already been bound, abort", targetNS, targetName))
	}
	ownerRefs := []metav1.OwnerReference{{APIVersion: owner.APIVersion, Kind: owner.Kind, Name: owner.Name, UID: owner.UID, Controller: new(bool)}}
	*ownerRefs[0].Controller = true
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: owner.Namespace, Name: owner.Name, OwnerReferences: ownerRefs,
			Labels: map[string]string{"velero.io/data-download": owner.Name}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: string(owner.UID), Image: "velero/velero:v1.18.1", Command: []string{"/velero", "data-mover", "restore"},
				VolumeMounts: []corev1.VolumeMount{{Name: string(owner.UID), MountPath: "/" + string(owner.UID)}}}},
			ServiceAccountName: VeleroServiceAccount,
			RestartPolicy:      corev1.RestartPolicyNever,
			Volumes: []corev1.Volume{{Name: string(owner.UID), VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: owner.Name}}}},
		},
	}
	if selectedNode != "" {
		pod.Spec.NodeSelector = map[string]string{corev1.LabelHostname: selectedNode}
	}
	if _, err := kube.CoreV1().Pods(owner.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return v.record(fmt.Errorf("error to create restore pod: %w", err))
	}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: owner.Namespace, Name: owner.Name, Labels: target.Labels, Annotations: target.Annotations,
			OwnerReferences: ownerRefs},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: target.Spec.AccessModes, StorageClassName: target.Spec.StorageClassName,
			VolumeMode: target.Spec.VolumeMode, Resources: target.Spec.Resources},
	}
	if selectedNode != "" {
		pvc.Annotations = map[string]string{annSelectedNode: selectedNode}
	}
	if _, err := kube.CoreV1().PersistentVolumeClaims(owner.Namespace).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		return v.record(fmt.Errorf("error to create restore pvc: %w", err))
	}
	return nil
}

// RebindVolume is generic_restore.go RebindVolume: wait for the restore claim's volume, set it
// Retain, delete the restore pod and claim (waiting for each to go), point the target claim at
// the volume (RebindPVC), point the volume at the target claim without a uid and give it the
// selector's labels (ResetPVBinding), wait for it Bound (WaitPVBound), and restore its reclaim
// policy. All patches are JSON merge patches from jsonpatch.CreateMergePatch of the object
// before and after.
func (v *Velero) RebindVolume(ctx context.Context, owner corev1.ObjectReference, targetName, targetNS string, timeout time.Duration) error {
	kube := v.Conn.Kube.CoreV1()
	target, err := kube.PersistentVolumeClaims(targetNS).Get(ctx, targetName, metav1.GetOptions{})
	if err != nil {
		return v.record(err)
	}
	var pv *corev1.PersistentVolume
	err = wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) { // WaitPVCBound
		pvc, err := kube.PersistentVolumeClaims(owner.Namespace).Get(ctx, owner.Name, metav1.GetOptions{})
		if err != nil || pvc.Spec.VolumeName == "" {
			return false, err
		}
		pv, err = kube.PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
		return err == nil, err
	})
	if err != nil {
		return v.record(fmt.Errorf("error to get PV from restore PVC %s: %w", owner.Name, err))
	}
	orgReclaim := pv.Spec.PersistentVolumeReclaimPolicy
	retained, err := v.setReclaimPolicy(ctx, pv, corev1.PersistentVolumeReclaimRetain)
	if err != nil {
		return v.record(fmt.Errorf("error to retain PV %s: %w", pv.Name, err))
	}
	if retained != nil {
		pv = retained
	}
	// EnsureDeletePod, EnsureDeletePVC
	if err := kube.Pods(owner.Namespace).Delete(ctx, owner.Name, metav1.DeleteOptions{}); err != nil {
		return v.record(err)
	}
	if err := waitGone(ctx, timeout, func(ctx context.Context) error {
		_, err := kube.Pods(owner.Namespace).Get(ctx, owner.Name, metav1.GetOptions{})
		return err
	}); err != nil {
		return v.record(fmt.Errorf("error to delete restore pod %s: %w", owner.Name, err))
	}
	if err := kube.PersistentVolumeClaims(owner.Namespace).Delete(ctx, owner.Name, metav1.DeleteOptions{}); err != nil {
		return v.record(err)
	}
	if err := waitGone(ctx, timeout, func(ctx context.Context) error {
		_, err := kube.PersistentVolumeClaims(owner.Namespace).Get(ctx, owner.Name, metav1.GetOptions{})
		return err
	}); err != nil {
		return v.record(fmt.Errorf("error to delete restore PVC %s: %w", owner.Name, err))
	}
	// RebindPVC
	updated := target.DeepCopy()
	updated.Spec.VolumeName = pv.Name
	delete(updated.Annotations, annBindCompleted)
	delete(updated.Annotations, annBoundByController)
	if err := mergePatch(target, updated, func(p []byte) error {
		_, err := kube.PersistentVolumeClaims(target.Namespace).Patch(ctx, target.Name, types.MergePatchType, p, metav1.PatchOptions{})
		return err
	}); err != nil {
		return v.record(fmt.Errorf("error to rebind target PVC %s/%s to %s: %w", target.Namespace, target.Name, pv.Name, err))
	}
	// ResetPVBinding
	var matchLabel map[string]string
	if target.Spec.Selector != nil {
		matchLabel = target.Spec.Selector.MatchLabels
	}
	reset := pv.DeepCopy()
	reset.Spec.ClaimRef = &corev1.ObjectReference{Kind: target.Kind, Namespace: target.Namespace, Name: target.Name}
	delete(reset.Annotations, annBoundByController)
	if matchLabel != nil {
		if reset.Labels == nil {
			reset.Labels = map[string]string{}
		}
		for k, val := range matchLabel {
			if _, ok := reset.Labels[k]; !ok {
				reset.Labels[k] = val
			}
		}
	}
	if err := mergePatch(pv, reset, func(p []byte) error {
		_, err := kube.PersistentVolumes().Patch(ctx, pv.Name, types.MergePatchType, p, metav1.PatchOptions{})
		return err
	}); err != nil {
		return v.record(fmt.Errorf("error to reset binding info for restore PV %s: %w", pv.Name, err))
	}
	// WaitPVBound
	err = wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		got, err := kube.PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if got.Spec.ClaimRef == nil || got.Status.Phase != corev1.VolumeBound {
			return false, nil
		}
		if got.Spec.ClaimRef.Name != target.Name || got.Spec.ClaimRef.Namespace != target.Namespace {
			return false, fmt.Errorf("pv has been bound by unexpected pvc %s/%s", got.Spec.ClaimRef.Namespace, got.Spec.ClaimRef.Name)
		}
		pv = got
		return true, nil
	})
	if err != nil {
		return v.record(fmt.Errorf("error to wait restore PV bound, restore PV %s: %w", pv.Name, err))
	}
	// Upstream only logs a warning when this fails ("Restore PV's reclaim policy is not
	// restored"); the stand-in returns it so the test sees it.
	if _, err := v.setReclaimPolicy(ctx, pv, orgReclaim); err != nil {
		return v.record(fmt.Errorf("Restore PV's reclaim policy is not restored: %w", err))
	}
	return nil
}

// setReclaimPolicy is SetPVReclaimPolicy.
func (v *Velero) setReclaimPolicy(ctx context.Context, pv *corev1.PersistentVolume, policy corev1.PersistentVolumeReclaimPolicy) (*corev1.PersistentVolume, error) {
	if pv.Spec.PersistentVolumeReclaimPolicy == policy {
		return nil, nil
	}
	updated := pv.DeepCopy()
	updated.Spec.PersistentVolumeReclaimPolicy = policy
	var out *corev1.PersistentVolume
	err := mergePatch(pv, updated, func(p []byte) error {
		var err error
		out, err = v.Conn.Kube.CoreV1().PersistentVolumes().Patch(ctx, pv.Name, types.MergePatchType, p, metav1.PatchOptions{})
		return err
	})
	return out, err
}

func mergePatch(orig, updated any, send func([]byte) error) error {
	o, err := json.Marshal(orig)
	if err != nil {
		return err
	}
	u, err := json.Marshal(updated)
	if err != nil {
		return err
	}
	p, err := jsonpatch.CreateMergePatch(o, u)
	if err != nil {
		return err
	}
	return send(p)
}

func waitGone(ctx context.Context, timeout time.Duration, get func(context.Context) error) error {
	return wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		err := get(ctx)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}
