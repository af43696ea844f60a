package localstatic

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PVName is the name upstream gives the volume found at file (an entry of the discovery
// directory) on node for class: "local-pv-" and the hex FNV-1a 32-bit hash of the three strings
// written one after the other. The name is stable, so a volume deleted and found again comes
// back under the same name.
func PVName(file, node, class string) string {
	h := fnv.New32a()
	for _, s := range []string{file, node, class} {
		_, _ = h.Write([]byte(s))
	}
	return fmt.Sprintf("local-pv-%x", h.Sum32())
}

// discover is one discovery pass over every class; errors of one class or volume do not stop
// the others.
func (np *nodeProvisioner) discover(ctx context.Context) error {
	var errs []error
	for _, class := range sortedKeys(np.classes) {
		if err := np.discoverClass(ctx, class, np.classes[class]); err != nil {
			errs = append(errs, fmt.Errorf("discovering class %s in %s on node %s: %w", class, np.classes[class].dir, np.node.Name, err))
		}
	}
	return errors.Join(errs...)
}

func (np *nodeProvisioner) discoverClass(ctx context.Context, class string, mc mountConfig) error {
	sc, err := np.classLister.Get(class)
	if err != nil {
		return fmt.Errorf("reading the reclaim policy of StorageClass %s: %w", class, err)
	}
	reclaim := corev1.PersistentVolumeReclaimDelete
	if sc.ReclaimPolicy != nil {
		reclaim = *sc.ReclaimPolicy
	}
	if reclaim != corev1.PersistentVolumeReclaimRetain && reclaim != corev1.PersistentVolumeReclaimDelete {
		return fmt.Errorf("StorageClass %s: reclaimPolicy %q is not supported, only Retain and Delete", class, reclaim)
	}

	files, err := readDirNames(mc.dir)
	if err != nil {
		return err
	}
	mounts, err := np.vol.mountPoints()
	if err != nil {
		return err
	}

	var errs []error
	for _, file := range files {
		if !matchesAny(mc.NamePattern, file) {
			continue
		}
		path := filepath.Join(mc.dir, file)
		mode, err := volumeModeOf(path)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		name := PVName(file, np.node.Name, class)
		if pv, ok := np.cache.get(name); ok {
			if pv.Spec.VolumeMode != nil && *pv.Spec.VolumeMode == corev1.PersistentVolumeBlock && mode == corev1.PersistentVolumeFilesystem {
				err := fmt.Errorf("PV %s is a Block volume but %s is a filesystem", name, path)
				errs = append(errs, err)
				np.recorder.Event(pv, corev1.EventTypeWarning, reasonFailedDelete, err.Error())
			}
			continue
		}
		// One path, one volume: upstream only logs this one and moves on.
		if others := np.cache.namesByPath(path); len(others) > 0 {
			np.log.Error(nil, "volume path already in use", "pv", name, "path", path, "by", others)
			continue
		}
		// A volume still being cleaned is not offered again; a finished cleaning record is
		// dropped (it belonged to the PV that was deleted).
		if np.procs.running(name) {
			continue
		}
		if _, err := np.procs.take(name); err != nil {
			np.log.Error(err, "dropping an old cleaning record", "pv", name)
			continue
		}
		if mode == corev1.PersistentVolumeBlock {
			errs = append(errs, fmt.Errorf("%s is a block device: the stand-in does not model block volumes", path))
			continue
		}
		if mc.VolumeMode == corev1.PersistentVolumeBlock {
			errs = append(errs, fmt.Errorf("%s is a filesystem and cannot become a Block volume", path))
			continue
		}
		if _, ok := mounts[path]; !ok {
			errs = append(errs, fmt.Errorf("%s is not a mount point (not in /proc/mounts)", path))
			continue
		}
		capacity, err := np.vol.fsCapacity(path)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		pv := np.newPV(name, path, class, reclaim, sc.MountOptions, mc, capacity)
		if _, err := np.client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
			errs = append(errs, fmt.Errorf("creating PV %s for %s: %w", name, path, err))
			continue
		}
		np.log.Info("created PV for a discovered volume", "pv", name, "path", path, "bytes", capacity)
	}
	return errors.Join(errs...)
}

// matchesAny is upstream's name filter: patterns is a comma-separated list of filepath.Match
// patterns; a bad pattern matches nothing.
func matchesAny(patterns, file string) bool {
	for _, p := range strings.Split(patterns, ",") {
		if p == "" {
			continue
		}
		if ok, err := filepath.Match(p, file); err == nil && ok {
			return true
		}
	}
	return false
}

// newPV shapes the volume as upstream's CreateLocalPVSpec does.
func (np *nodeProvisioner) newPV(name, path, class string, reclaim corev1.PersistentVolumeReclaimPolicy, mountOptions []string, mc mountConfig, capacity int64) *corev1.PersistentVolume {
	mode := mc.VolumeMode
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      copyLabels(np.labels),
			Annotations: map[string]string{annProvisionedBy: np.name},
		},
		Spec: corev1.PersistentVolumeSpec{
			PersistentVolumeReclaimPolicy: reclaim,
			Capacity: corev1.ResourceList{
				corev1.ResourceStorage: *resource.NewQuantity(roundDownCapacityPretty(capacity), resource.BinarySI),
			},
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				Local: &corev1.LocalVolumeSource{Path: path},
			},
			AccessModes:      []corev1.PersistentVolumeAccessMode{mc.AccessMode},
			StorageClassName: class,
			VolumeMode:       &mode,
			MountOptions:     slices.Clone(mountOptions),
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{
				NodeSelectorTerms: slices.Concat(np.nodeSelector.NodeSelectorTerms, mc.Selector),
			}},
		},
	}
	if mc.FsType != "" {
		fsType := mc.FsType
		pv.Spec.Local.FSType = &fsType
	}
	if np.setOwnerRef {
		pv.OwnerReferences = []metav1.OwnerReference{*np.ownerRef}
	}
	return pv
}

// copyLabels copies a label map, keeping an empty one nil (upstream's empty map serialises to none).
func copyLabels(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Units upstream rounds to.
const (
	mib = int64(1) << 20
	gib = int64(1) << 30
)

// roundDownCapacityPretty rounds a size down to whole GiB when that leaves at least ten of them,
// else to whole MiB when that does, else keeps it as is: a 1 MiB tmpfs stays 1048576 bytes.
func roundDownCapacityPretty(bytes int64) int64 {
	for _, unit := range []int64{gib, mib} {
		if n := bytes / unit; n >= 10 {
			return n * unit
		}
	}
	return bytes
}
