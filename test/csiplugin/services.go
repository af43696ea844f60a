package csiplugin

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// identityServer is the Identity service.
type identityServer struct {
	csi.UnimplementedIdentityServer
	p *Plugin
}

var _ csi.IdentityServer = &identityServer{}

func (s *identityServer) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: s.p.o.Name, VendorVersion: s.p.o.Version}, nil
}

// GetPluginCapabilities advertises the controller service, topology (the provisioner then
// passes accessibility requirements built from CSINode topology keys and Node labels, and
// writes the volume's node affinity from the answer) and online expansion (the resizer needs a
// VolumeExpansion capability to start).
func (s *identityServer) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	service := func(t csi.PluginCapability_Service_Type) *csi.PluginCapability {
		return &csi.PluginCapability{Type: &csi.PluginCapability_Service_{Service: &csi.PluginCapability_Service{Type: t}}}
	}
	return &csi.GetPluginCapabilitiesResponse{Capabilities: []*csi.PluginCapability{
		service(csi.PluginCapability_Service_CONTROLLER_SERVICE),
		service(csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS),
		{Type: &csi.PluginCapability_VolumeExpansion_{VolumeExpansion: &csi.PluginCapability_VolumeExpansion{Type: csi.PluginCapability_VolumeExpansion_ONLINE}}},
	}}, nil
}

func (s *identityServer) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(true)}, nil
}

// controllerServer is the Controller service.
type controllerServer struct {
	csi.UnimplementedControllerServer
	p *Plugin
}

var _ csi.ControllerServer = &controllerServer{}

// ControllerGetCapabilities: create/delete and expand; snapshots (taken, listed, restored from)
// and clones, each a copy of the data. SINGLE_NODE_MULTI_WRITER lets the sidecars
// map ReadWriteOncePod to SINGLE_NODE_SINGLE_WRITER instead of refusing it. No
// PUBLISH_UNPUBLISH_VOLUME: nothing attaches a directory, so no external-attacher is needed and
// the provisioner does not wait on VolumeAttachments before deleting.
func (s *controllerServer) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	var caps []*csi.ControllerServiceCapability
	for _, t := range []csi.ControllerServiceCapability_RPC_Type{
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
		csi.ControllerServiceCapability_RPC_EXPAND_VOLUME,
		csi.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER,
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT,
		csi.ControllerServiceCapability_RPC_LIST_SNAPSHOTS,
		csi.ControllerServiceCapability_RPC_CLONE_VOLUME,
	} {
		caps = append(caps, &csi.ControllerServiceCapability{Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: t}}})
	}
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: caps}, nil
}

func (s *controllerServer) CreateVolume(_ context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	p := s.p
	name := req.GetName()
	if name == "" {
		return nil, status.Error(codes.InvalidArgument, "CreateVolume: name is required")
	}
	modes, err := checkCapabilities(req.GetVolumeCapabilities())
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "CreateVolume %s: %v", name, err)
	}
	if len(req.GetMutableParameters()) > 0 {
		return nil, status.Errorf(codes.InvalidArgument, "CreateVolume %s: mutable parameters need MODIFY_VOLUME, which this plugin does not advertise", name)
	}
	if v, ok := req.GetParameters()[ParamNodeExpansionRequired]; ok && v != "true" && v != "false" {
		return nil, status.Errorf(codes.InvalidArgument, "CreateVolume %s: parameter %s is %q, want true or false", name, ParamNodeExpansionRequired, v)
	}
	size, err := p.createSize(req.GetCapacityRange())
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "CreateVolume %s: %v", name, err)
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	id := volumeID(name)
	v, ok, err := p.load(id)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "CreateVolume %s: %v", name, err)
	}
	if ok {
		// A retry (the provisioner retries after a timeout): the spec wants the same volume back
		// when it fits the request, and ALREADY_EXISTS when it does not.
		if reason := p.incompatible(v, req); reason != "" {
			return nil, status.Errorf(codes.AlreadyExists, "CreateVolume %s: volume %s exists and %s", name, id, reason)
		}
		return &csi.CreateVolumeResponse{Volume: p.csiVolume(v)}, nil
	}
	// A restore or a clone starts as a copy of its source's data, and is at least as large.
	var from string
	var source *Source
	if cs := req.GetVolumeContentSource(); cs != nil {
		var least int64
		var code codes.Code
		if from, least, source, code, err = p.contentSource(cs); err != nil {
			return nil, status.Errorf(code, "CreateVolume %s: %v", name, err)
		}
		if limit := req.GetCapacityRange().GetLimitBytes(); limit > 0 && limit < least {
			return nil, status.Errorf(codes.OutOfRange, "CreateVolume %s: the source has %d bytes, more than limit_bytes %d", name, least, limit)
		}
		size = max(size, least)
	}
	node, code, err := p.chooseNode(req.GetAccessibilityRequirements())
	if err != nil {
		return nil, status.Errorf(code, "CreateVolume %s: %v", name, err)
	}
	v = Volume{ID: id, Name: name, CapacityBytes: size, Node: node, Parameters: req.GetParameters(), AccessModes: modes, Source: source}
	if err := p.create(v, from); err != nil {
		return nil, status.Errorf(codes.Internal, "CreateVolume %s: %v", name, err)
	}
	return &csi.CreateVolumeResponse{Volume: p.csiVolume(v)}, nil
}

// DeleteVolume removes the volume's directory; an unknown id has nothing to delete and
// succeeds, as the spec requires.
func (s *controllerServer) DeleteVolume(_ context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	p := s.p
	id := req.GetVolumeId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "DeleteVolume: volume_id is required")
	}
	if !validID(id) {
		return &csi.DeleteVolumeResponse{}, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.remove(id); err != nil {
		return nil, status.Errorf(codes.Internal, "DeleteVolume: %v", err)
	}
	return &csi.DeleteVolumeResponse{}, nil
}

// ControllerExpandVolume records the new size. It never shrinks: a request at or below the
// current size returns the current size (the retry of an expansion that already happened).
func (s *controllerServer) ControllerExpandVolume(_ context.Context, req *csi.ControllerExpandVolumeRequest) (*csi.ControllerExpandVolumeResponse, error) {
	p := s.p
	id := req.GetVolumeId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "ControllerExpandVolume: volume_id is required")
	}
	cr := req.GetCapacityRange()
	if cr == nil || (cr.GetRequiredBytes() == 0 && cr.GetLimitBytes() == 0) {
		return nil, status.Errorf(codes.InvalidArgument, "ControllerExpandVolume %s: capacity_range is required", id)
	}
	if err := checkRange(cr); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "ControllerExpandVolume %s: %v", id, err)
	}
	if c := req.GetVolumeCapability(); c != nil {
		if _, err := checkCapabilities([]*csi.VolumeCapability{c}); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "ControllerExpandVolume %s: %v", id, err)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	v, ok, err := p.load(id)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "ControllerExpandVolume %s: %v", id, err)
	}
	if !ok {
		return nil, status.Errorf(codes.NotFound, "ControllerExpandVolume: volume %s does not exist", id)
	}
	if limit := cr.GetLimitBytes(); limit > 0 && v.CapacityBytes > limit {
		return nil, status.Errorf(codes.OutOfRange, "ControllerExpandVolume %s: the volume has %d bytes, more than limit_bytes %d, and cannot shrink", id, v.CapacityBytes, limit)
	}
	if want := cr.GetRequiredBytes(); want > v.CapacityBytes {
		v.CapacityBytes = want
		if err := p.update(v); err != nil {
			return nil, status.Errorf(codes.Internal, "ControllerExpandVolume %s: %v", id, err)
		}
	}
	nodeStep := p.o.NodeExpansionRequired
	if s, ok := v.Parameters[ParamNodeExpansionRequired]; ok {
		nodeStep = s == "true"
	}
	return &csi.ControllerExpandVolumeResponse{CapacityBytes: v.CapacityBytes, NodeExpansionRequired: nodeStep}, nil
}

// ValidateVolumeCapabilities is required of every controller plugin by the spec.
func (s *controllerServer) ValidateVolumeCapabilities(_ context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	p := s.p
	id := req.GetVolumeId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "ValidateVolumeCapabilities: volume_id is required")
	}
	if len(req.GetVolumeCapabilities()) == 0 {
		return nil, status.Errorf(codes.InvalidArgument, "ValidateVolumeCapabilities %s: volume_capabilities is required", id)
	}
	p.mu.Lock()
	v, ok, err := p.load(id)
	p.mu.Unlock()
	if err != nil {
		return nil, status.Errorf(codes.Internal, "ValidateVolumeCapabilities %s: %v", id, err)
	}
	if !ok {
		return nil, status.Errorf(codes.NotFound, "ValidateVolumeCapabilities: volume %s does not exist", id)
	}
	if _, err := checkCapabilities(req.GetVolumeCapabilities()); err != nil {
		return &csi.ValidateVolumeCapabilitiesResponse{Message: err.Error()}, nil
	}
	if params := req.GetParameters(); len(params) > 0 && !maps.Equal(params, v.Parameters) {
		return &csi.ValidateVolumeCapabilitiesResponse{Message: fmt.Sprintf("parameters %v differ from the volume's %v", params, v.Parameters)}, nil
	}
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeContext:      req.GetVolumeContext(),
		VolumeCapabilities: req.GetVolumeCapabilities(),
		Parameters:         req.GetParameters(),
	}}, nil
}

// csiVolume is a volume as CreateVolume answers it: accessible from its node only.
func (p *Plugin) csiVolume(v Volume) *csi.Volume {
	return &csi.Volume{
		VolumeId:           v.ID,
		CapacityBytes:      v.CapacityBytes,
		AccessibleTopology: []*csi.Topology{{Segments: map[string]string{p.o.TopologyKey: v.Node}}},
		ContentSource:      csiSource(v.Source),
	}
}

// createSize is the size of a new volume: required_bytes, else the default (capped by
// limit_bytes).
func (p *Plugin) createSize(cr *csi.CapacityRange) (int64, error) {
	if err := checkRange(cr); err != nil {
		return 0, err
	}
	if req := cr.GetRequiredBytes(); req > 0 {
		return req, nil
	}
	if limit := cr.GetLimitBytes(); limit > 0 && limit < p.o.DefaultCapacityBytes {
		return limit, nil
	}
	return p.o.DefaultCapacityBytes, nil
}

func checkRange(cr *csi.CapacityRange) error {
	req, limit := cr.GetRequiredBytes(), cr.GetLimitBytes()
	switch {
	case req < 0 || limit < 0:
		return fmt.Errorf("capacity_range %d..%d is negative", req, limit)
	case limit > 0 && req > limit:
		return fmt.Errorf("capacity_range: required_bytes %d exceeds limit_bytes %d", req, limit)
	}
	return nil
}

// incompatible says why an existing volume does not answer a repeated CreateVolume ("" when it
// does): its size must fall in the range, its parameters and content source must be the same
// and its node must be among the requisite topology, if any.
func (p *Plugin) incompatible(v Volume, req *csi.CreateVolumeRequest) string {
	cr := req.GetCapacityRange()
	if v.CapacityBytes < cr.GetRequiredBytes() || (cr.GetLimitBytes() > 0 && v.CapacityBytes > cr.GetLimitBytes()) {
		return fmt.Sprintf("has %d bytes, outside the requested %d..%d", v.CapacityBytes, cr.GetRequiredBytes(), cr.GetLimitBytes())
	}
	if !maps.Equal(v.Parameters, req.GetParameters()) {
		return fmt.Sprintf("was created with parameters %v, not %v", v.Parameters, req.GetParameters())
	}
	if !sameSource(v.Source, req.GetVolumeContentSource()) {
		return fmt.Sprintf("was created from %v, not %v", v.Source, req.GetVolumeContentSource())
	}
	if requisite := req.GetAccessibilityRequirements().GetRequisite(); len(requisite) > 0 &&
		!slices.ContainsFunc(requisite, func(t *csi.Topology) bool { return t.GetSegments()[p.o.TopologyKey] == v.Node }) {
		return fmt.Sprintf("is on node %s, which the requisite topology does not include", v.Node)
	}
	return ""
}

// chooseNode takes the first preferred segment naming a node with storage, else the first
// requisite one. With no requirements at all it takes the first of Options.Nodes.
func (p *Plugin) chooseNode(tr *csi.TopologyRequirement) (string, codes.Code, error) {
	segments := append(slices.Clone(tr.GetPreferred()), tr.GetRequisite()...)
	if len(segments) == 0 {
		if len(p.o.Nodes) > 0 {
			return p.o.Nodes[0], codes.OK, nil
		}
		return "", codes.InvalidArgument, fmt.Errorf("no accessibility requirements, and no nodes configured to choose from")
	}
	var named []string
	for _, t := range segments {
		node := t.GetSegments()[p.o.TopologyKey]
		if node == "" {
			continue
		}
		if len(p.o.Nodes) == 0 || slices.Contains(p.o.Nodes, node) {
			return node, codes.OK, nil
		}
		named = append(named, node)
	}
	if len(named) == 0 {
		return "", codes.InvalidArgument, fmt.Errorf("no topology segment names a node with key %s", p.o.TopologyKey)
	}
	// RESOURCE_EXHAUSTED is final for the provisioner: with late binding it sends the pod back
	// to the scheduler, as a real node-local driver out of space does.
	return "", codes.ResourceExhausted, fmt.Errorf("no storage on nodes %v (storage is on %v)", named, p.o.Nodes)
}

// singleNode are the access modes of a volume on one node.
var singleNode = []csi.VolumeCapability_AccessMode_Mode{
	csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER,
	csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY,
	csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER,
	csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER,
}

// checkCapabilities accepts mount volumes with no filesystem type (a directory has none of its
// own) and single-node access modes, and returns the modes' names.
func checkCapabilities(caps []*csi.VolumeCapability) ([]string, error) {
	if len(caps) == 0 {
		return nil, fmt.Errorf("volume_capabilities is required")
	}
	var modes []string
	for i, c := range caps {
		switch {
		case c.GetBlock() != nil:
			return nil, fmt.Errorf("volume_capabilities[%d]: block volumes are not supported (volumes are directories)", i)
		case c.GetMount() == nil:
			return nil, fmt.Errorf("volume_capabilities[%d]: access_type is required", i)
		case c.GetMount().GetFsType() != "":
			return nil, fmt.Errorf("volume_capabilities[%d]: fs_type %q is not supported (volumes are directories with no filesystem of their own)", i, c.GetMount().GetFsType())
		case c.GetAccessMode() == nil:
			return nil, fmt.Errorf("volume_capabilities[%d]: access_mode is required", i)
		case !slices.Contains(singleNode, c.GetAccessMode().GetMode()):
			return nil, fmt.Errorf("volume_capabilities[%d]: access mode %s is not supported (every volume is on one node)", i, c.GetAccessMode().GetMode())
		}
		if m := c.GetAccessMode().GetMode().String(); !slices.Contains(modes, m) {
			modes = append(modes, m)
		}
	}
	slices.Sort(modes)
	return modes, nil
}
