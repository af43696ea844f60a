package csiplugin

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// Snapshot is a snapshot's metadata, kept in <root>/.snapshots/<id>/snapshot.json beside a copy
// of its source volume's data directory, <root>/.snapshots/<id>/data. The directory name begins
// with a dot, which no volume id does, so snapshots never mix with volumes.
type Snapshot struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// SourceVolumeID is the volume it was taken of.
	SourceVolumeID string `json:"sourceVolumeID"`
	// SizeBytes is the source volume's size when it was taken: the least a volume restored from
	// it can have.
	SizeBytes int64 `json:"sizeBytes"`
	// CreatedAt is when it was taken.
	CreatedAt time.Time `json:"createdAt"`
	// Parameters are CreateSnapshot's parameters (the VolumeSnapshotClass's, plus the names the
	// csi-snapshotter adds with --extra-create-metadata).
	Parameters map[string]string `json:"parameters,omitempty"`
}

const (
	snapshotsDir     = ".snapshots"
	snapshotMetaFile = "snapshot.json"
)

// SnapshotDir is the directory a snapshot id lives in (whether or not it exists).
func (p *Plugin) SnapshotDir(id string) string { return filepath.Join(p.o.Root, snapshotsDir, id) }

// Snapshots lists the snapshots in the store, by id.
func (p *Plugin) Snapshots() ([]Snapshot, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.listSnapshots()
}

// listSnapshots is Snapshots for a caller that holds p.mu.
func (p *Plugin) listSnapshots() ([]Snapshot, error) {
	entries, err := os.ReadDir(filepath.Join(p.o.Root, snapshotsDir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("csiplugin: listing snapshots: %w", err)
	}
	var out []Snapshot
	for _, e := range entries {
		if !e.IsDir() || !validID(e.Name()) {
			continue
		}
		s, ok, err := p.loadSnapshot(e.Name())
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// loadSnapshot reads a snapshot's metadata; ok is false when it does not exist. The caller
// holds p.mu.
func (p *Plugin) loadSnapshot(id string) (Snapshot, bool, error) {
	if !validID(id) {
		return Snapshot{}, false, nil
	}
	data, err := os.ReadFile(filepath.Join(p.SnapshotDir(id), snapshotMetaFile))
	if errors.Is(err, os.ErrNotExist) {
		return Snapshot{}, false, nil
	}
	if err != nil {
		return Snapshot{}, false, fmt.Errorf("reading snapshot %s: %w", id, err)
	}
	var s Snapshot
	if err := json.Unmarshal(data, &s); err != nil {
		return Snapshot{}, false, fmt.Errorf("snapshot %s: %s: %w", id, snapshotMetaFile, err)
	}
	return s, true, nil
}

// createSnapshot copies the source volume's data into a new snapshot directory, placed with one
// rename like a volume's. The caller holds p.mu.
func (p *Plugin) createSnapshot(s Snapshot) error {
	if err := os.MkdirAll(filepath.Join(p.o.Root, snapshotsDir), 0o755); err != nil {
		return fmt.Errorf("creating snapshot %s: %w", s.ID, err)
	}
	if err := p.place(p.SnapshotDir(s.ID), snapshotMetaFile, s, filepath.Join(p.Dir(s.SourceVolumeID), "data")); err != nil {
		return fmt.Errorf("creating snapshot %s of volume %s: %w", s.ID, s.SourceVolumeID, err)
	}
	return nil
}

// removeSnapshot deletes a snapshot's directory; a missing one is already gone. The caller
// holds p.mu.
func (p *Plugin) removeSnapshot(id string) error {
	if err := p.discard(p.SnapshotDir(id), "snapshot-"+id); err != nil {
		return fmt.Errorf("deleting snapshot %s: %w", id, err)
	}
	return nil
}
