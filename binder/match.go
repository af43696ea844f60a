package binder

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// Annotations the binder reads and writes, shared with the upstream controller and external
// provisioners.
const (
	annBindCompleted       = "pv.kubernetes.io/bind-completed"
	annBoundByController   = "pv.kubernetes.io/bound-by-controller"
	annProvisionedBy       = "pv.kubernetes.io/provisioned-by"
	annSelectedNode        = "volume.kubernetes.io/selected-node"
	annStorageProvisioner  = "volume.kubernetes.io/storage-provisioner"
	annBetaStorageProvisnr = "volume.beta.kubernetes.io/storage-provisioner"
	annBetaStorageClass    = "volume.beta.kubernetes.io/storage-class"
	annDefaultClass        = "storageclass.kubernetes.io/is-default-class"
	annBetaDefaultClass    = "storageclass.beta.kubernetes.io/is-default-class"

	// AnnReuse on a Released volume with reclaim policy Retain makes it Available again once a
	// live read confirms its claim is gone. The data stays on the volume: that is the point.
	AnnReuse = "pvguard.io/reuse-when-released"

	noProvisioner = "kubernetes.io/no-provisioner"
)

// claimClass is the class a claim asks for: the beta annotation wins, unset means "".
func claimClass(c *corev1.PersistentVolumeClaim) string {
	if v, ok := c.Annotations[annBetaStorageClass]; ok {
		return v
	}
	if c.Spec.StorageClassName != nil {
		return *c.Spec.StorageClassName
	}
	return ""
}

// claimHasClass reports whether the claim names a class at all (even ""), so that the
// retroactive default class leaves it alone.
func claimHasClass(c *corev1.PersistentVolumeClaim) bool {
	_, beta := c.Annotations[annBetaStorageClass]
	return beta || c.Spec.StorageClassName != nil
}

func volumeClass(v *corev1.PersistentVolume) string {
	if c, ok := v.Annotations[annBetaStorageClass]; ok {
		return c
	}
	return v.Spec.StorageClassName
}

func mode(m *corev1.PersistentVolumeMode) corev1.PersistentVolumeMode {
	if m == nil || *m == "" {
		return corev1.PersistentVolumeFilesystem
	}
	return *m
}

// satisfies reports why a volume cannot serve a claim, as upstream's checks do: capacity, class,
// volume mode and access modes. It returns nil when the volume fits.
func satisfies(v *corev1.PersistentVolume, c *corev1.PersistentVolumeClaim) error {
	req := c.Spec.Resources.Requests[corev1.ResourceStorage]
	cap := v.Spec.Capacity[corev1.ResourceStorage]
	if cap.Cmp(req) < 0 {
		return fmt.Errorf("requested PV is too small")
	}
	if claimClass(c) != volumeClass(v) {
		return fmt.Errorf("storageClassName does not match")
	}
	if mode(c.Spec.VolumeMode) != mode(v.Spec.VolumeMode) {
		return fmt.Errorf("incompatible volumeMode")
	}
	for _, m := range c.Spec.AccessModes {
		if !slices.Contains(v.Spec.AccessModes, m) {
			return fmt.Errorf("incompatible accessMode")
		}
	}
	return nil
}

// selectorMatches reports whether the claim's label selector admits the volume; an invalid
// selector admits nothing.
func selectorMatches(c *corev1.PersistentVolumeClaim, v *corev1.PersistentVolume) bool {
	if c.Spec.Selector == nil {
		return true
	}
	sel, err := metav1.LabelSelectorAsSelector(c.Spec.Selector)
	if err != nil {
		return false
	}
	return sel.Matches(labels.Set(v.Labels))
}

// nodeAdmits reports whether a volume's node affinity admits the node; a volume without
// affinity is reachable from every node.
func nodeAdmits(v *corev1.PersistentVolume, node *corev1.Node) bool {
	if v.Spec.NodeAffinity == nil || v.Spec.NodeAffinity.Required == nil {
		return true
	}
	if node == nil {
		return false
	}
	sel, err := nodeaffinity.NewNodeSelector(v.Spec.NodeAffinity.Required)
	if err != nil {
		return false
	}
	return sel.Match(node)
}

// preBoundTo reports whether a volume's claimRef names the claim without being bound to another
// incarnation of it (uid empty or equal).
func preBoundTo(v *corev1.PersistentVolume, c *corev1.PersistentVolumeClaim) bool {
	ref := v.Spec.ClaimRef
	return ref != nil && ref.Namespace == c.Namespace && ref.Name == c.Name && (ref.UID == "" || ref.UID == c.UID)
}

// isDelayBinding reports whether the claim's class waits for the first consumer.
func isDelayBinding(c *corev1.PersistentVolumeClaim, class *storagev1.StorageClass) bool {
	return class != nil && class.VolumeBindingMode != nil && *class.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer
}

// fitsUnbound reports whether an unbound claim may take a volume in the pool: the volume is
// Available, not reserved for another claim, not being deleted, satisfies the claim, matches its
// selector, and, for a claim scheduled to a node, is reachable from it.
func fitsUnbound(c *corev1.PersistentVolumeClaim, v *corev1.PersistentVolume, node *corev1.Node, scheduled bool) bool {
	if v.DeletionTimestamp != nil {
		return false
	}
	if v.Spec.ClaimRef != nil && !preBoundTo(v, c) {
		return false
	}
	if v.Spec.ClaimRef == nil && v.Status.Phase != corev1.VolumeAvailable {
		return false
	}
	if satisfies(v, c) != nil || !selectorMatches(c, v) {
		return false
	}
	return !scheduled || nodeAdmits(v, node)
}

// isDefaultClass reports whether a StorageClass is marked as the cluster default.
func isDefaultClass(sc *storagev1.StorageClass) bool {
	return sc.Annotations[annDefaultClass] == "true" || sc.Annotations[annBetaDefaultClass] == "true"
}

// defaultClass picks the default class as upstream does: the newest of several, then by name.
func defaultClass(classes []*storagev1.StorageClass) *storagev1.StorageClass {
	var best *storagev1.StorageClass
	for _, sc := range classes {
		if !isDefaultClass(sc) {
			continue
		}
		if best == nil || sc.CreationTimestamp.After(best.CreationTimestamp.Time) ||
			(sc.CreationTimestamp.Equal(&best.CreationTimestamp) && sc.Name < best.Name) {
			best = sc
		}
	}
	return best
}
