package localstatic

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// deletePVs is one pass of upstream's Deleter over this provisioner's cached PVs: only a Released
// volume that is not already being deleted is considered, and only Delete acts on it.
func (np *nodeProvisioner) deletePVs(ctx context.Context) error {
	var errs []error
	for _, pv := range np.cache.list() {
		if pv.Status.Phase != corev1.VolumeReleased || pv.DeletionTimestamp != nil {
			continue
		}
		switch pv.Spec.PersistentVolumeReclaimPolicy {
		case corev1.PersistentVolumeReclaimRetain:
			// The administrator's to clean up.
		case corev1.PersistentVolumeReclaimRecycle:
			np.recorder.Event(pv, corev1.EventTypeWarning, reasonUnsupported, "the Recycle reclaim policy is not supported for local volumes")
		case corev1.PersistentVolumeReclaimDelete:
			if err := np.deletePV(ctx, pv); err != nil {
				err = fmt.Errorf("cleaning PV %s: %w", pv.Name, err)
				np.recorder.Event(pv, corev1.EventTypeWarning, reasonFailedDelete, err.Error())
				errs = append(errs, err)
			}
		default:
			np.recorder.Event(pv, corev1.EventTypeWarning, reasonUnknown, fmt.Sprintf("unrecognised reclaim policy %q", pv.Spec.PersistentVolumeReclaimPolicy))
		}
	}
	return errors.Join(errs...)
}

// deletePV advances one Released Delete volume by a step: start cleaning it in the background, or,
// once a cleaning has succeeded, delete the PV (a failed cleaning is started again). Deleting
// only after a later pass sees the cleaning done is upstream's order: the PV, and with it the
// volume's name, stays until the data is gone.
func (np *nodeProvisioner) deletePV(ctx context.Context, pv *corev1.PersistentVolume) error {
	if pv.Spec.Local == nil {
		return errors.New("not a local volume")
	}
	mc, ok := np.classes[pv.Spec.StorageClassName]
	if !ok {
		return fmt.Errorf("storage class %q is not in this provisioner's configuration", pv.Spec.StorageClassName)
	}
	mountPath, err := mountPathOf(pv, mc)
	if err != nil {
		return err
	}
	mode, err := volumeModeOf(mountPath)
	if err != nil {
		return err
	}
	if np.procs.running(pv.Name) {
		return nil
	}
	state, err := np.procs.take(pv.Name)
	if err != nil {
		return err
	}
	switch state {
	case cleanSucceeded:
		np.log.Info("deleting PV after its volume was cleaned", "pv", pv.Name)
		err := np.client.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			np.recorder.Event(pv, corev1.EventTypeWarning, reasonFailedDelete, err.Error())
			return fmt.Errorf("deleting PV: %w", err)
		}
		return nil
	case cleanFailed:
		np.log.Info("cleaning failed before; cleaning again", "pv", pv.Name)
	default:
		np.log.Info("cleaning volume", "pv", pv.Name, "path", mountPath)
	}
	if mode == corev1.PersistentVolumeBlock {
		return fmt.Errorf("%s is a block device: the stand-in does not model block cleaning", mountPath)
	}
	if err := np.procs.markRunning(pv.Name); err != nil {
		return err
	}
	np.cleaners.Add(1)
	go func() {
		defer np.cleaners.Done()
		err := deleteContents(mountPath)
		if err != nil {
			np.log.Error(err, "cleaning volume failed", "pv", pv.Name, "path", mountPath)
		}
		np.procs.finish(pv.Name, err)
	}()
	return nil
}

// mountPathOf is where this provisioner sees the volume's directory (upstream's
// GetContainerPath). It refuses a path outside the class's directory, so nothing outside it is
// ever emptied; upstream checks the same with a string prefix.
func mountPathOf(pv *corev1.PersistentVolume, mc mountConfig) (string, error) {
	rel, err := filepath.Rel(mc.dir, pv.Spec.Local.Path)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("spec.local.path %q is not inside the class's directory %s", pv.Spec.Local.Path, mc.dir)
	}
	return filepath.Join(mc.dir, rel), nil
}
