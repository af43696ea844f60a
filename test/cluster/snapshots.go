package cluster

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/pvguard/pvguard/test/csisidecars"
)

// startSnapshots installs the VolumeSnapshot CRDs of the pinned external-snapshotter release,
// as its install instructions do before anything else, then starts the snapshot-controller and
// the csi-snapshotter and waits until each has started its controller.
func (s *CSI) startSnapshots(ctx context.Context, admin *rest.Config, opts csisidecars.Options) error {
	crds, err := csisidecars.SnapshotCRDs()
	if err != nil {
		return err
	}
	if _, err := envtest.InstallCRDs(admin, envtest.CRDInstallOptions{Paths: crds, ErrorIfPathMissing: true}); err != nil {
		return fmt.Errorf("installing the snapshot CRDs %v: %w", crds, err)
	}
	if s.SnapshotController, err = csisidecars.StartSnapshotController(ctx, opts); err != nil {
		return err
	}
	if s.Snapshotter, err = csisidecars.StartSnapshotter(ctx, opts); err != nil {
		return err
	}
	if err := s.SnapshotController.WaitStarted(ctx, "Starting snapshot controller", 2*time.Minute); err != nil {
		return err
	}
	return s.Snapshotter.WaitStarted(ctx, "Starting CSI snapshotter", 2*time.Minute)
}
