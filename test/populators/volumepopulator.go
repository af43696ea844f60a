package populators

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// lib-volume-populator's names (populator-machinery/controller.go).
const (
	populatorContainerName  = "populate"
	populatorPodPrefix      = "populate"
	populatorPodVolumeName  = "target"
	populatorPvcPrefix      = "prime"
	populatedFromAnnoSuffix = "populated-from"
	pvcFinalizerSuffix      = "populate-target-protection"
	annSelectedNode         = "volume.kubernetes.io/selected-node"
)

// HelloPopulator is hello-populator's configuration (example/hello-populator/main.go and
// deploy.yaml): namespace hello, ServiceAccount hello-account, prefix hello.example.com, source
// kind hello.example.com Hello (v1alpha1 hellos), mount path /mnt.
func HelloPopulator() VolumePopulatorConfig {
	return VolumePopulatorConfig{
		Namespace: "hello", ServiceAccount: "hello-account", Prefix: "hello.example.com",
		GK:        schema.GroupKind{Group: "hello.example.com", Kind: "Hello"},
		GVR:       schema.GroupVersionResource{Group: "hello.example.com", Version: "v1alpha1", Resource: "hellos"},
		ImageName: "registry.k8s.io/sig-storage/hello-populator:v1.0.1", MountPath: "/mnt",
	}
}

// HelloRBAC is example/hello-populator/deploy.yaml's ServiceAccount, ClusterRole and
// ClusterRoleBinding.
func HelloRBAC() []client.Object {
	subject := rbacv1.Subject{Kind: "ServiceAccount", Name: "hello-account", Namespace: "hello"}
	return []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "hello", Name: "hello-account"}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "hello-role"}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"persistentvolumes"}, Verbs: []string{"get", "list", "watch", "patch"}},
			{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"}, Verbs: []string{"get", "list", "watch", "patch", "create", "delete"}},
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch", "create", "delete"}},
			{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create"}},
			{APIGroups: []string{"storage.k8s.io"}, Resources: []string{"storageclasses"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"hello.example.com"}, Resources: []string{"hellos"}, Verbs: []string{"get", "list", "watch"}},
		}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "hello-binding"}, Subjects: []rbacv1.Subject{subject},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "hello-role"}},
	}
}

// VolumePopulatorConfig is what a populator gives lib-volume-populator's RunController (pod mode).
type VolumePopulatorConfig struct {
	Namespace, ServiceAccount, Prefix string
	GK                                schema.GroupKind
	GVR                               schema.GroupVersionResource
	ImageName, MountPath              string
}

// VolumePopulator is the stand-in for a populator built on lib-volume-populator in its populator
// pod mode (hello-populator's): VolumePopulator.sync follows syncPvc of
// populator-machinery/controller.go step by step for a target claim whose spec.dataSourceRef
// names its kind:
//
//  1. for a WaitForFirstConsumer class, wait for the scheduler's selected-node on the target;
//  2. create the prime claim prime-<target uid> in the populator's own namespace (access modes,
//     resources, class and volume mode copied; selected-node copied for WaitForFirstConsumer);
//  3. add the finalizer <prefix>/populate-target-protection to the target (a JSON patch with a
//     test of the current finalizers, ensureFinalizer);
//  4. create the pod populate-<target uid> in its namespace, mounting the prime claim (spec.nodeName
//     set to the selected node for WaitForFirstConsumer), and wait for it to succeed;
//  5. strategic-merge-patch the prime claim's volume: spec.claimRef to the target (namespace, name,
//     uid, resourceVersion) and the annotation <prefix>/populated-from = <ns>/<source name>;
//  6. wait for the prime claim to be Lost (the PV binder binds the target to the volume);
//  7. delete the pod and the prime claim, and remove the finalizer from the target (JSON patch).
//
// Where upstream reads informer caches, the stand-in reads the apiserver (each pass lists the
// claims); its writes are upstream's. Its events go through a client-go event recorder, as
// getRecorder's.
type VolumePopulator struct {
	VolumePopulatorConfig
	Conn *Conn

	recorder  record.EventRecorder
	populated string
	finalizer string
	// done are the targets cleaned up for: upstream then drops its notifications for them
	// (cleanupNotifications) and is called again only when the claim changes.
	done map[types.UID]string
	// events are the (claim, reason) pairs recorded already: see event.
	events map[string]bool
}

// StartVolumePopulator connects as the populator's ServiceAccount (rbac installed first) and runs
// the stand-in until ctx ends.
func StartVolumePopulator(ctx context.Context, admin *rest.Config, cfg VolumePopulatorConfig, rbac []client.Object, dir string) (*VolumePopulator, error) {
	conn, err := Connect(ctx, admin, rbac, cfg.Namespace, cfg.ServiceAccount, dir)
	if err != nil {
		return nil, err
	}
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: conn.Kube.CoreV1().Events("")})
	p := &VolumePopulator{VolumePopulatorConfig: cfg, Conn: conn,
		recorder:  b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: cfg.Prefix + "-populator"}),
		populated: cfg.Prefix + "/" + populatedFromAnnoSuffix, finalizer: cfg.Prefix + "/" + pvcFinalizerSuffix,
		done: map[types.UID]string{}, events: map[string]bool{}}
	go func() {
		defer b.Shutdown()
		conn.pollClaims(ctx, p.done, func(c *corev1.PersistentVolumeClaim) error { return p.sync(ctx, c) })
	}()
	return p, nil
}

// FinalizerName is the finalizer the populator puts on a target claim.
func (p *VolumePopulator) FinalizerName() string { return p.finalizer }

// PopulatedFromAnnotation is the annotation the populator puts on the volume it hands over.
func (p *VolumePopulator) PopulatedFromAnnotation() string { return p.populated }

// event records an event on a claim once per reason. Upstream records one on every call of
// syncPvc that passes the point, and is called on its informers' events; the stand-in, which polls,
// would repeat it every pass, and its recorder would turn the repeats into patches of the event,
// which hello-populator's RBAC (events: create) does not allow.
func (p *VolumePopulator) event(pvc *corev1.PersistentVolumeClaim, eventtype, reason, messageFmt string, args ...any) {
	key := string(pvc.UID) + "/" + reason
	if p.events[key] {
		return
	}
	p.events[key] = true
	p.event(pvc, eventtype, reason, messageFmt, args...)
}

// sync is syncPvc.
func (p *VolumePopulator) sync(ctx context.Context, pvc *corev1.PersistentVolumeClaim) error {
	kube := p.Conn.Kube
	if pvc.Namespace == p.Namespace {
		return nil // Ignore PVCs in our own working namespace
	}
	ref := pvc.Spec.DataSourceRef
	if ref == nil {
		return nil
	}
	group := ""
	if ref.APIGroup != nil {
		group = *ref.APIGroup
	}
	if p.GK.Group != group || p.GK.Kind != ref.Kind || ref.Name == "" {
		return nil
	}
	if ref.Namespace != nil && *ref.Namespace != pvc.Namespace {
		return nil // cross-namespace sources (ReferenceGrants) are not part of these flows
	}
	src, err := p.Conn.Dynamic.Resource(p.GVR).Namespace(pvc.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			p.event(pvc, corev1.EventTypeWarning, "PopulatorDataSourceNotFound", "Data source %s/%s not found", pvc.Namespace, ref.Name)
			return nil
		}
		return err
	}
	var wffc bool
	var nodeName string
	if pvc.Spec.StorageClassName != nil {
		sc, err := kube.StorageV1().StorageClasses().Get(ctx, *pvc.Spec.StorageClassName, metav1.GetOptions{})
		if err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		}
		if sc.VolumeBindingMode != nil && *sc.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer {
			wffc = true
			if nodeName = pvc.Annotations[annSelectedNode]; nodeName == "" {
				return nil // Wait for the PVC to get a node name before continuing
			}
		}
	}
	podName := fmt.Sprintf("%s-%s", populatorPodPrefix, pvc.UID)
	pod, err := kube.CoreV1().Pods(p.Namespace).Get(ctx, podName, metav1.GetOptions{})
	if err != nil {
		if !apierrors.IsNotFound(err) {
			return err
		}
		pod = nil
	}
	primeName := fmt.Sprintf("%s-%s", populatorPvcPrefix, pvc.UID)
	prime, err := kube.CoreV1().PersistentVolumeClaims(p.Namespace).Get(ctx, primeName, metav1.GetOptions{})
	if err != nil {
		if !apierrors.IsNotFound(err) {
			return err
		}
		prime = nil
	}

	if pvc.DeletionTimestamp == nil {
		if pvc.Spec.VolumeName == "" && prime == nil {
			prime = &corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Name: primeName, Namespace: p.Namespace},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: pvc.Spec.AccessModes, Resources: pvc.Spec.Resources,
					StorageClassName: pvc.Spec.StorageClassName, VolumeMode: pvc.Spec.VolumeMode,
				},
			}
			if wffc {
				prime.Annotations = map[string]string{annSelectedNode: nodeName}
			}
			if prime, err = kube.CoreV1().PersistentVolumeClaims(p.Namespace).Create(ctx, prime, metav1.CreateOptions{}); err != nil {
				p.event(pvc, corev1.EventTypeWarning, "PopulatorPVCPrimeCreationError", "Failed to create populator pvcPrime: %s", err)
				return err
			}
		}
		if pvc.Spec.VolumeName == "" {
			if err := p.ensureFinalizer(ctx, pvc, true); err != nil {
				return err
			}
			if pod == nil {
				pod = &corev1.Pod{
					ObjectMeta: metav1.ObjectMeta{Name: podName, Namespace: p.Namespace},
					Spec:       makePopulatePodSpec(primeName),
				}
				con := &pod.Spec.Containers[0]
				con.Image = p.ImageName
				// hello-populator's getPopulatorPodArgs: --mode=populate and the file to write.
				con.Args = []string{"--mode=populate", "--file-name=" + p.MountPath + "/" + fmt.Sprint(src.Object["spec"].(map[string]any)["fileName"]),
					"--file-contents=" + fmt.Sprint(src.Object["spec"].(map[string]any)["fileContents"])}
				con.VolumeMounts = []corev1.VolumeMount{{Name: populatorPodVolumeName, MountPath: p.MountPath}}
				if wffc {
					pod.Spec.NodeName = nodeName
				}
				if _, err := kube.CoreV1().Pods(p.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
					p.event(pvc, corev1.EventTypeWarning, "PopulatorCreationError", "Failed to create populator pod: %s", err)
					return err
				}
				p.event(pvc, corev1.EventTypeNormal, "PopulatorCreated", "Populator started")
				return nil
			}
			if pod.Status.Phase != corev1.PodSucceeded {
				if pod.Status.Phase == corev1.PodFailed {
					p.event(pvc, corev1.EventTypeWarning, "PopulatorFailed", "Populator failed: %s", pod.Status.Message)
					return kube.CoreV1().Pods(p.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{})
				}
				return nil
			}
			if prime == nil {
				return fmt.Errorf("Failed to find PVC for populator pod")
			}
			pv, err := kube.CoreV1().PersistentVolumes().Get(ctx, prime.Spec.VolumeName, metav1.GetOptions{})
			if err != nil {
				if apierrors.IsNotFound(err) || prime.Spec.VolumeName == "" {
					return nil
				}
				return err
			}
			ref := pv.Spec.ClaimRef
			if ref.Name != pvc.Name || ref.Namespace != pvc.Namespace || ref.UID != pvc.UID {
				patchPv := corev1.PersistentVolume{
					ObjectMeta: metav1.ObjectMeta{Name: pv.Name, Annotations: map[string]string{}},
					Spec: corev1.PersistentVolumeSpec{ClaimRef: &corev1.ObjectReference{
						Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID, ResourceVersion: pvc.ResourceVersion,
					}},
				}
				patchPv.Annotations[p.populated] = pvc.Namespace + "/" + pvc.Spec.DataSourceRef.Name
				data, err := json.Marshal(patchPv)
				if err != nil {
					return err
				}
				_, err = kube.CoreV1().PersistentVolumes().Patch(ctx, pv.Name, types.StrategicMergePatchType, data, metav1.PatchOptions{})
				return err // Don't start cleaning up yet: the bind controller must acknowledge the switch
			}
		}
		if prime != nil && prime.Status.Phase != corev1.ClaimLost {
			return nil // Wait for the bind controller to rebind the PV
		}
		p.event(pvc, corev1.EventTypeNormal, "PopulatorFinished", "Populator finished")
	}
	// Cleaning up.
	if pod != nil {
		if err := kube.CoreV1().Pods(p.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
			return err
		}
	}
	if prime != nil {
		if err := kube.CoreV1().PersistentVolumeClaims(p.Namespace).Delete(ctx, prime.Name, metav1.DeleteOptions{}); err != nil {
			return err
		}
	}
	if err := p.ensureFinalizer(ctx, pvc, false); err != nil {
		return err
	}
	p.done[pvc.UID] = pvc.ResourceVersion
	return nil
}

// makePopulatePodSpec is MakePopulatePodSpec.
func makePopulatePodSpec(primeName string) corev1.PodSpec {
	return corev1.PodSpec{
		Containers:    []corev1.Container{{Name: populatorContainerName, ImagePullPolicy: corev1.PullIfNotPresent}},
		RestartPolicy: corev1.RestartPolicyNever,
		Volumes: []corev1.Volume{{Name: populatorPodVolumeName, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: primeName}}}},
	}
}

// ensureFinalizer is ensureFinalizer: a JSON patch that tests the finalizers (or the one at the
// index found) before adding (or removing) the populator's.
func (p *VolumePopulator) ensureFinalizer(ctx context.Context, pvc *corev1.PersistentVolumeClaim, want bool) error {
	finalizers := pvc.GetFinalizers()
	found, idx := false, -1
	for i, f := range finalizers {
		if f == p.finalizer {
			found, idx = true, i
			break
		}
	}
	if found == want {
		return nil
	}
	type patchOp struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value,omitempty"`
	}
	var patch []patchOp
	if want {
		patch = []patchOp{{Op: "test", Path: "/metadata/finalizers", Value: finalizers}, {Op: "add", Path: "/metadata/finalizers/-", Value: p.finalizer}}
	} else {
		path := fmt.Sprintf("/metadata/finalizers/%d", idx)
		patch = []patchOp{{Op: "test", Path: path, Value: p.finalizer}, {Op: "remove", Path: path}}
	}
	data, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	_, err = p.Conn.Kube.CoreV1().PersistentVolumeClaims(pvc.Namespace).Patch(ctx, pvc.Name, types.JSONPatchType, data, metav1.PatchOptions{})
	return err
}
