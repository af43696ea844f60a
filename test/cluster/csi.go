package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/pvguard/pvguard/test/csiplugin"
	"github.com/pvguard/pvguard/test/csisidecars"
)

// CSI is the CSI storage path: our plugin (test/csiplugin) standing in for a storage backend
// behind the real external-provisioner and external-resizer (test/csisidecars), each under its
// upstream ServiceAccount and RBAC (which pvguard's policy does not list), with the CSIDriver,
// CSINode topology keys and Node labels a kubelet would have published for the fake nodes.
// It runs in both modes: the sidecars do not depend on which binder binds.
//
// With Options.Snapshots the snapshot path runs too: the VolumeSnapshot CRDs, the
// snapshot-controller and the csi-snapshotter, all of one external-snapshotter release.
type CSI struct {
	Plugin      *csiplugin.Plugin
	Provisioner *csisidecars.Sidecar
	Resizer     *csisidecars.Sidecar
	// SnapshotController and Snapshotter are nil unless Options.Snapshots asked for them.
	SnapshotController *csisidecars.Sidecar
	Snapshotter        *csisidecars.Sidecar

	server  *csiplugin.Server
	sockDir string
	mu      sync.Mutex
	hook    func(method string, req any) error
}

// Driver is the driver (and provisioner) name.
func (c *CSI) Driver() string { return c.Plugin.Name() }

// TopologyKey is the label key naming the node a volume is accessible from.
func (c *CSI) TopologyKey() string { return c.Plugin.TopologyKey() }

// SetHook makes hook see (and may answer) every CSI call until it is set again; nil removes it.
// A test blocks CreateVolume with it to hold a provisioning open.
func (c *CSI) SetHook(hook func(method string, req any) error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hook = hook
}

func (c *CSI) callHook(method string, req any) error {
	c.mu.Lock()
	h := c.hook
	c.mu.Unlock()
	if h == nil {
		return nil
	}
	return h(method, req)
}

// Sidecars are the running components of the CSI path, the snapshot ones included.
func (c *CSI) Sidecars() []*csisidecars.Sidecar {
	var out []*csisidecars.Sidecar
	for _, s := range []*csisidecars.Sidecar{c.Provisioner, c.Resizer, c.SnapshotController, c.Snapshotter} {
		if s != nil {
			out = append(out, s)
		}
	}
	return out
}

// startCSI starts the plugin and the sidecars (and, with snapshots, the snapshot CRDs and
// components) and waits until each works.
func (c *Cluster) startCSI(ctx context.Context, snapshots bool) (_ *CSI, err error) {
	s := &CSI{}
	defer func() {
		if err != nil {
			err = errors.Join(err, s.stop())
		}
	}()
	if s.Plugin, err = csiplugin.New(csiplugin.Options{Root: filepath.Join(c.LogDir, "csi-volumes"), Hook: s.callHook}); err != nil {
		return s, err
	}
	// A short path: a unix socket's must stay under 108 bytes.
	if s.sockDir, err = os.MkdirTemp("", "csi"); err != nil {
		return s, err
	}
	if s.server, err = s.Plugin.Serve(filepath.Join(s.sockDir, "csi.sock")); err != nil {
		return s, err
	}
	if err := csisidecars.RegisterDriver(ctx, c.Client, csisidecars.Driver{Name: s.Plugin.Name(), TopologyKey: s.Plugin.TopologyKey(), Nodes: c.Nodes}); err != nil {
		return s, err
	}
	opts := csisidecars.Options{Admin: c.Admin, CSIAddress: s.server.Address, Dir: c.LogDir, BinDir: c.assets}
	// The CRDs come first: the provisioner looks VolumeSnapshots up to restore from them, and
	// the snapshot components wait for the CRDs before they start.
	if snapshots {
		if err := s.startSnapshots(ctx, c.Admin, opts); err != nil {
			return s, err
		}
	}
	if s.Provisioner, err = csisidecars.StartProvisioner(ctx, opts); err != nil {
		return s, err
	}
	if s.Resizer, err = csisidecars.StartResizer(ctx, opts); err != nil {
		return s, err
	}
	if err := s.Provisioner.WaitStarted(ctx, "Started provisioner controller", 2*time.Minute); err != nil {
		return s, err
	}
	if err := s.Resizer.WaitStarted(ctx, "Starting external resizer", 2*time.Minute); err != nil {
		return s, err
	}
	return s, nil
}

// alive returns an error naming the log of a sidecar that stopped on its own.
func (c *CSI) alive() error {
	var errs []error
	for _, s := range c.Sidecars() {
		if exited, err := s.Exited(); exited {
			errs = append(errs, fmt.Errorf("%s exited (%v); see %s", s.Name, err, s.LogPath))
		}
	}
	return errors.Join(errs...)
}

func (c *CSI) stop() error {
	var errs []error
	for _, s := range c.Sidecars() {
		if exited, _ := s.Exited(); !exited {
			errs = append(errs, s.Stop())
		}
	}
	if c.server != nil {
		errs = append(errs, c.server.Stop())
	}
	if c.sockDir != "" {
		errs = append(errs, os.RemoveAll(c.sockDir))
	}
	return errors.Join(errs...)
}
