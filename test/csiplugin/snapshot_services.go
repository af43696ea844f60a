package csiplugin

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// CreateSnapshot copies the source volume's data into a snapshot, which is ready at once (the
// copy is done when the call returns). A repeated call with the same name returns the snapshot
// it made when the source is the same, and ALREADY_EXISTS when it is not, as the spec requires.
func (s *controllerServer) CreateSnapshot(_ context.Context, req *csi.CreateSnapshotRequest) (*csi.CreateSnapshotResponse, error) {
	p := s.p
	name, source := req.GetName(), req.GetSourceVolumeId()
	if name == "" {
		return nil, status.Error(codes.InvalidArgument, "CreateSnapshot: name is required")
	}
	if source == "" {
		return nil, status.Errorf(codes.InvalidArgument, "CreateSnapshot %s: source_volume_id is required", name)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	id := volumeID(name)
	snap, ok, err := p.loadSnapshot(id)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "CreateSnapshot %s: %v", name, err)
	}
	if ok {
		if snap.SourceVolumeID != source {
			return nil, status.Errorf(codes.AlreadyExists, "CreateSnapshot %s: snapshot %s exists and is of volume %s, not %s", name, id, snap.SourceVolumeID, source)
		}
		return &csi.CreateSnapshotResponse{Snapshot: csiSnapshot(snap)}, nil
	}
	v, ok, err := p.load(source)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "CreateSnapshot %s: %v", name, err)
	}
	if !ok {
		return nil, status.Errorf(codes.NotFound, "CreateSnapshot %s: source volume %s does not exist", name, source)
	}
	snap = Snapshot{ID: id, Name: name, SourceVolumeID: v.ID, SizeBytes: v.CapacityBytes, CreatedAt: time.Now().UTC(), Parameters: req.GetParameters()}
	if err := p.createSnapshot(snap); err != nil {
		return nil, status.Errorf(codes.Internal, "CreateSnapshot %s: %v", name, err)
	}
	return &csi.CreateSnapshotResponse{Snapshot: csiSnapshot(snap)}, nil
}

// DeleteSnapshot removes the snapshot's directory; an unknown id has nothing to delete and
// succeeds, as the spec requires. Volumes restored from it keep their data: each is a copy.
func (s *controllerServer) DeleteSnapshot(_ context.Context, req *csi.DeleteSnapshotRequest) (*csi.DeleteSnapshotResponse, error) {
	p := s.p
	id := req.GetSnapshotId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "DeleteSnapshot: snapshot_id is required")
	}
	if !validID(id) {
		return &csi.DeleteSnapshotResponse{}, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.removeSnapshot(id); err != nil {
		return nil, status.Errorf(codes.Internal, "DeleteSnapshot: %v", err)
	}
	return &csi.DeleteSnapshotResponse{}, nil
}

// ListSnapshots lists the snapshots by id, filtered by snapshot_id and source_volume_id (an
// unknown one matches nothing: an empty answer, not an error, as the spec says), max_entries at
// a time. The token is the index of the next entry; one that does not fit the list is ABORTED,
// as the spec asks.
func (s *controllerServer) ListSnapshots(_ context.Context, req *csi.ListSnapshotsRequest) (*csi.ListSnapshotsResponse, error) {
	p := s.p
	if req.GetMaxEntries() < 0 {
		return nil, status.Errorf(codes.InvalidArgument, "ListSnapshots: max_entries %d is negative", req.GetMaxEntries())
	}
	p.mu.Lock()
	all, err := p.listSnapshots()
	p.mu.Unlock()
	if err != nil {
		return nil, status.Errorf(codes.Internal, "ListSnapshots: %v", err)
	}
	var match []Snapshot
	for _, snap := range all {
		if id := req.GetSnapshotId(); id != "" && snap.ID != id {
			continue
		}
		if src := req.GetSourceVolumeId(); src != "" && snap.SourceVolumeID != src {
			continue
		}
		match = append(match, snap)
	}
	start := 0
	if tok := req.GetStartingToken(); tok != "" {
		n, err := strconv.Atoi(tok)
		if err != nil || n < 0 || n > len(match) {
			return nil, status.Errorf(codes.Aborted, "ListSnapshots: starting_token %q does not fit the %d snapshots listed", tok, len(match))
		}
		start = n
	}
	end := len(match)
	if m := int(req.GetMaxEntries()); m > 0 && start+m < end {
		end = start + m
	}
	resp := &csi.ListSnapshotsResponse{}
	for _, snap := range match[start:end] {
		resp.Entries = append(resp.Entries, &csi.ListSnapshotsResponse_Entry{Snapshot: csiSnapshot(snap)})
	}
	if end < len(match) {
		resp.NextToken = strconv.Itoa(end)
	}
	return resp, nil
}

// csiSnapshot is a snapshot as the spec answers it: always ready to use.
func csiSnapshot(s Snapshot) *csi.Snapshot {
	return &csi.Snapshot{
		SnapshotId:     s.ID,
		SourceVolumeId: s.SourceVolumeID,
		SizeBytes:      s.SizeBytes,
		CreationTime:   timestamppb.New(s.CreatedAt),
		ReadyToUse:     true,
	}
}

// contentSource resolves CreateVolume's content source: the data directory to copy, the size
// the new volume needs at least, and the source as the volume records it. NOT_FOUND when the
// snapshot or volume does not exist, as the spec says. The caller holds p.mu.
func (p *Plugin) contentSource(cs *csi.VolumeContentSource) (dir string, size int64, src *Source, code codes.Code, err error) {
	switch {
	case cs.GetSnapshot() != nil:
		id := cs.GetSnapshot().GetSnapshotId()
		if id == "" {
			return "", 0, nil, codes.InvalidArgument, fmt.Errorf("content source: snapshot_id is required")
		}
		snap, ok, err := p.loadSnapshot(id)
		if err != nil {
			return "", 0, nil, codes.Internal, err
		}
		if !ok {
			return "", 0, nil, codes.NotFound, fmt.Errorf("source snapshot %s does not exist", id)
		}
		return filepath.Join(p.SnapshotDir(id), "data"), snap.SizeBytes, &Source{Kind: SourceSnapshot, ID: id}, codes.OK, nil
	case cs.GetVolume() != nil:
		id := cs.GetVolume().GetVolumeId()
		if id == "" {
			return "", 0, nil, codes.InvalidArgument, fmt.Errorf("content source: volume_id is required")
		}
		v, ok, err := p.load(id)
		if err != nil {
			return "", 0, nil, codes.Internal, err
		}
		if !ok {
			return "", 0, nil, codes.NotFound, fmt.Errorf("source volume %s does not exist", id)
		}
		return filepath.Join(p.Dir(id), "data"), v.CapacityBytes, &Source{Kind: SourceVolume, ID: id}, codes.OK, nil
	default:
		return "", 0, nil, codes.InvalidArgument, fmt.Errorf("content source names neither a snapshot nor a volume")
	}
}

// csiSource is a volume's recorded source as CreateVolume answers it.
func csiSource(s *Source) *csi.VolumeContentSource {
	switch {
	case s == nil:
		return nil
	case s.Kind == SourceSnapshot:
		return &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: s.ID}}}
	default:
		return &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: s.ID}}}
	}
}

// sameSource reports whether a volume's recorded source is the one a request names.
func sameSource(s *Source, cs *csi.VolumeContentSource) bool {
	want := csiSource(s)
	return want.GetSnapshot().GetSnapshotId() == cs.GetSnapshot().GetSnapshotId() &&
		want.GetVolume().GetVolumeId() == cs.GetVolume().GetVolumeId()
}
