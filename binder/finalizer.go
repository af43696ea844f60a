package binder

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/pvguard/pvguard/storage"
)

// The binder manages the deletion protection finalizers on volumes (storage.FinalizerPVController
// and its CSI equivalent, storage.FinalizerExternalProvisioner) as kube-controller-manager's
// PersistentVolume controller does (pv_controller_base.go, modifyDeletionFinalizers): that
// controller adds the in-tree one when it creates the volume (and on every sync), and removes it
// once its in-tree deleter has deleted the storage.

// inTreePluginPrefix begins the names of the in-tree volume plugins.
const inTreePluginPrefix = "kubernetes.io/"

// migratedPlugins are the in-tree provisioners whose volumes are handled by a CSI driver (CSI
// migration, GA): upstream reports migration on for exactly these, and drops the in-tree
// finalizer from their volumes because the driver's external-provisioner deletes them.
var migratedPlugins = map[string]bool{
	"kubernetes.io/aws-ebs":         true,
	"kubernetes.io/gce-pd":          true,
	"kubernetes.io/azure-disk":      true,
	"kubernetes.io/azure-file":      true,
	"kubernetes.io/cinder":          true,
	"kubernetes.io/vsphere-volume":  true,
	"kubernetes.io/portworx-volume": true,
}

// provisionedInTree reports whether an in-tree plugin that is not migrated to CSI provisioned
// the volume (pv.kubernetes.io/provisioned-by names it), and which. In Kubernetes 1.37 the only
// such plugin upstream still has is kubernetes.io/host-path (behind
// --enable-hostpath-provisioner, for single-node test clusters).
func provisionedInTree(v *corev1.PersistentVolume) (string, bool) {
	plugin, ok := v.Annotations[storage.AnnProvisionedBy]
	return plugin, ok && strings.HasPrefix(plugin, inTreePluginPrefix) && !migratedPlugins[plugin]
}

// deletionFinalizers returns the finalizers the volume should carry, and whether that differs
// from what it has. Like upstream, it touches only dynamically provisioned volumes: one a
// migrated plugin made loses the in-tree finalizer; one an in-tree plugin made carries it while
// its reclaim policy is Delete, loses it under Retain or Recycle, and loses the external
// provisioner's finalizer (left from a CSI migration that was rolled back). Unlike upstream, it
// does not add the finalizer to a volume being deleted: the apiserver refuses new finalizers on
// such an object, and upstream would retry that write on every sync.
func deletionFinalizers(v *corev1.PersistentVolume) ([]string, bool) {
	plugin, ok := v.Annotations[storage.AnnProvisionedBy]
	if !ok {
		return nil, false
	}
	out := slices.Clone(v.Finalizers)
	drop := func(f string) { out = slices.DeleteFunc(out, func(s string) bool { return s == f }) }
	switch {
	case migratedPlugins[plugin]:
		drop(storage.FinalizerPVController)
	case !strings.HasPrefix(plugin, inTreePluginPrefix):
		return nil, false
	default:
		switch v.Spec.PersistentVolumeReclaimPolicy {
		case corev1.PersistentVolumeReclaimDelete:
			if !slices.Contains(out, storage.FinalizerPVController) && v.DeletionTimestamp == nil {
				out = append(out, storage.FinalizerPVController)
			}
		case corev1.PersistentVolumeReclaimRetain, corev1.PersistentVolumeReclaimRecycle:
			drop(storage.FinalizerPVController)
		}
		drop(storage.FinalizerExternalProvisioner)
	}
	if slices.Equal(out, v.Finalizers) {
		return nil, false
	}
	return out, true
}
