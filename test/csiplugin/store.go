package csiplugin

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"time"
)

// Volume is a volume's metadata, kept in <root>/<id>/volume.json beside its data directory
// <root>/<id>/data.
type Volume struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// CapacityBytes is the size it was created with or last expanded to.
	CapacityBytes int64 `json:"capacityBytes"`
	// Node is the one node it is accessible from.
	Node string `json:"node"`
	// Parameters are CreateVolume's parameters (the StorageClass's, plus the claim and volume
	// names when the provisioner runs with --extra-create-metadata).
	Parameters map[string]string `json:"parameters,omitempty"`
	// AccessModes are the CSI access modes it was created for.
	AccessModes []string `json:"accessModes,omitempty"`
	// Source is what its data was copied from, when CreateVolume named a content source.
	Source *Source `json:"source,omitempty"`
}

// Source is a volume's content source: a snapshot or another volume, by id.
type Source struct {
	// Kind is SourceSnapshot or SourceVolume.
	Kind string `json:"kind"`
	ID   string `json:"id"`
}

// The kinds of content source.
const (
	SourceSnapshot = "snapshot"
	SourceVolume   = "volume"
)

const metaFile = "volume.json"

var (
	plainID  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
	hashedID = regexp.MustCompile(`^x~[0-9a-f]{32}$`)
)

// volumeID derives a volume's id from its name, so a retried CreateVolume finds the volume it
// made: the name itself when it is a plain path element (the provisioner's "pvc-<uid>" names
// are), else a hash of it. "~" is not in a plain id, so the two forms never collide.
func volumeID(name string) string {
	if plainID.MatchString(name) {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return "x~" + hex.EncodeToString(sum[:16])
}

// validID reports whether id is one volumeID can produce; nothing else is looked up on disk,
// so an id can never name a path outside the root.
func validID(id string) bool { return plainID.MatchString(id) || hashedID.MatchString(id) }

// load reads a volume's metadata; ok is false when the volume does not exist. The caller holds
// p.mu.
func (p *Plugin) load(id string) (Volume, bool, error) {
	if !validID(id) {
		return Volume{}, false, nil
	}
	data, err := os.ReadFile(filepath.Join(p.Dir(id), metaFile))
	if errors.Is(err, os.ErrNotExist) {
		return Volume{}, false, nil
	}
	if err != nil {
		return Volume{}, false, fmt.Errorf("reading volume %s: %w", id, err)
	}
	var v Volume
	if err := json.Unmarshal(data, &v); err != nil {
		return Volume{}, false, fmt.Errorf("volume %s: %s: %w", id, metaFile, err)
	}
	return v, true, nil
}

// create makes the volume's directory with its metadata and data directory (empty, or a copy
// of the data directory from when from is set) in a work directory and renames it into place,
// so a volume is either wholly there or not at all. The caller holds p.mu.
func (p *Plugin) create(v Volume, from string) error {
	if err := p.place(p.Dir(v.ID), metaFile, v, from); err != nil {
		return fmt.Errorf("creating volume %s: %w", v.ID, err)
	}
	return nil
}

// place builds dir (a volume's or a snapshot's) in a work directory beside it, with meta
// written to metaName and a data directory that is empty or a copy of from, then renames it
// into place.
func (p *Plugin) place(dir, metaName string, meta any, from string) error {
	work, err := os.MkdirTemp(p.o.Root, ".create-")
	if err != nil {
		return err
	}
	data := filepath.Join(work, "data")
	if from == "" {
		err = os.Mkdir(data, 0o755)
	} else {
		err = copyTree(from, data)
	}
	if err == nil {
		err = writeMeta(filepath.Join(work, metaName), meta)
	}
	if err == nil {
		err = os.Rename(work, dir)
	}
	if err != nil {
		_ = os.RemoveAll(work)
	}
	return err
}

// update rewrites a volume's metadata (write and rename: a reader sees the old or the new).
// The caller holds p.mu.
func (p *Plugin) update(v Volume) error {
	tmp := filepath.Join(p.Dir(v.ID), "."+metaFile+".tmp")
	if err := writeMeta(tmp, v); err != nil {
		return fmt.Errorf("updating volume %s: %w", v.ID, err)
	}
	if err := os.Rename(tmp, filepath.Join(p.Dir(v.ID), metaFile)); err != nil {
		return fmt.Errorf("updating volume %s: %w", v.ID, err)
	}
	return nil
}

// remove takes the volume's directory out of place with one rename, then deletes it. The
// caller holds p.mu.
func (p *Plugin) remove(id string) error {
	if err := p.discard(p.Dir(id), id); err != nil {
		return fmt.Errorf("deleting volume %s: %w", id, err)
	}
	return nil
}

// discard renames dir (a volume's or a snapshot's) out of place, then deletes it; a missing
// dir is already gone.
func (p *Plugin) discard(dir, id string) error {
	gone := filepath.Join(p.o.Root, ".delete-"+id+"-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	if err := os.Rename(dir, gone); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	if err := os.RemoveAll(gone); err != nil {
		return fmt.Errorf("moved to %s: %w", gone, err)
	}
	return nil
}

func writeMeta(file string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(file, append(data, '\n'), 0o644)
}
