package csisidecars

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
)

// The external-snapshotter's two components: the snapshot-controller, one per cluster, which
// turns VolumeSnapshots into VolumeSnapshotContents and guards source claims with a finalizer;
// and the csi-snapshotter, a sidecar of each driver, which calls CreateSnapshot and
// DeleteSnapshot for the contents of its driver.
const (
	SnapshotControllerBinary = "snapshot-controller"
	SnapshotterBinary        = "csi-snapshotter"
	// snapshotClientModule is the nested module external-snapshotter's go.mod replaces with
	// ./client: its API types, and the CRDs that serve them.
	snapshotClientModule = "github.com/kubernetes-csi/external-snapshotter/client/v8"
	// SnapshotControllerNamespace is where the snapshot-controller's ServiceAccount lives: its
	// RBAC file says a distribution installs it in kube-system, as a base component.
	SnapshotControllerNamespace = "kube-system"
)

// SnapshotCRDs are the paths of the VolumeSnapshot and VolumeGroupSnapshot CRDs of the pinned
// external-snapshotter release: the config/crd of the client module its build compiled
// against (the pin's replaces column), as that release's install instructions apply them. The
// group snapshot CRDs are included: without them both components wait half a minute at start
// and then run with group snapshots off.
func SnapshotCRDs() ([]string, error) {
	pin, err := ReadPin(SnapshotControllerBinary)
	if err != nil {
		return nil, err
	}
	dir, err := pin.ReplacementDir(snapshotClientModule)
	if err != nil {
		return nil, err
	}
	files, err := filepath.Glob(filepath.Join(dir, "config", "crd", "*.storage.k8s.io_*.yaml"))
	if err != nil {
		return nil, fmt.Errorf("listing the snapshot CRDs in %s: %w", dir, err)
	}
	want := filepath.Join(dir, "config", "crd", "snapshot.storage.k8s.io_volumesnapshots.yaml")
	if !slices.Contains(files, want) {
		return nil, fmt.Errorf("%s@%s holds no %s", snapshotClientModule, pin.Version, want)
	}
	return files, nil
}

// SnapshotControllerArgs are the snapshot-controller's flags besides --kubeconfig: no leader
// election (one replica) and --retry-interval-max 10s (default 5 minutes), a retry within a
// test's patience.
func SnapshotControllerArgs() []string {
	return []string{"--leader-election=false", "--retry-interval-max=10s"}
}

// SnapshotterArgs are the csi-snapshotter's flags besides --csi-address and --kubeconfig: no
// leader election, --timeout 30s (default 1 minute, which a stuck call would spend),
// --retry-interval-max 10s, and --extra-create-metadata so CreateSnapshot gets the
// VolumeSnapshot's and the content's names, as for the provisioner.
func SnapshotterArgs() []string {
	return []string{"--leader-election=false", "--timeout=30s", "--retry-interval-max=10s", "--extra-create-metadata"}
}

// StartSnapshotController installs the snapshot-controller's upstream RBAC in
// SnapshotControllerNamespace, mints its token and starts it. The snapshot CRDs must be
// installed: it waits for them before it starts its controller.
func StartSnapshotController(ctx context.Context, o Options) (*Sidecar, error) {
	o.Namespace = SnapshotControllerNamespace
	return launch(ctx, o, SnapshotControllerBinary, SnapshotControllerArgs())
}

// StartSnapshotter installs the csi-snapshotter's upstream RBAC, mints its token and starts it
// against the plugin's socket.
func StartSnapshotter(ctx context.Context, o Options) (*Sidecar, error) {
	return start(ctx, o, SnapshotterBinary, SnapshotterArgs())
}
