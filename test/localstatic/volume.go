package localstatic

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	mount "k8s.io/mount-utils"
)

// volumeUtil is what discovery asks the host: upstream's util.VolumeUtil plus the mounter's list,
// reduced to what filesystem volumes need. The unit tests fake it; everything else (reading a
// directory, deleting contents) is done on real temporary directories.
type volumeUtil interface {
	// mountPoints lists the mount points of the host, as upstream's mounter.List() does from
	// /proc/mounts.
	mountPoints() (map[string]struct{}, error)
	// fsCapacity is the size of the filesystem holding path.
	fsCapacity(path string) (int64, error)
}

// hostVolumes is the real host.
type hostVolumes struct{ mounter mount.Interface }

func newHostVolumes() hostVolumes { return hostVolumes{mounter: mount.New("")} }

func (h hostVolumes) mountPoints() (map[string]struct{}, error) {
	mps, err := h.mounter.List()
	if err != nil {
		return nil, fmt.Errorf("listing mount points: %w", err)
	}
	set := make(map[string]struct{}, len(mps))
	for _, mp := range mps {
		set[mp.Path] = struct{}{}
	}
	return set, nil
}

// fsCapacity is what kubelet's fs.Info reports as capacity: total blocks times block size.
func (hostVolumes) fsCapacity(path string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", path, err)
	}
	return int64(st.Blocks) * int64(st.Bsize), nil
}

// volumeModeOf tells a filesystem volume (a directory) from a block volume (a block device), as
// upstream's common.GetVolumeMode does; anything else is an error naming the path.
func volumeModeOf(path string) (corev1.PersistentVolumeMode, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("checking the type of %s: %w", path, err)
	}
	switch {
	case fi.IsDir():
		return corev1.PersistentVolumeFilesystem, nil
	case fi.Mode()&os.ModeDevice != 0 && fi.Mode()&os.ModeCharDevice == 0:
		return corev1.PersistentVolumeBlock, nil
	}
	return "", fmt.Errorf("skipping %s: neither a directory nor a block device", path)
}

// readDirNames lists the names in dir, unsorted, as upstream's ReadDir does.
func readDirNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("reading discovery directory: %w", err)
	}
	defer func() { _ = f.Close() }()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("reading discovery directory %s: %w", dir, err)
	}
	return names, nil
}

// deleteContents removes everything under dir but not dir itself (a mount point cannot be
// removed, and the next discovery needs it), as upstream cleans a filesystem volume.
func deleteContents(dir string) error {
	names, err := readDirNames(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, name := range names {
		if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
