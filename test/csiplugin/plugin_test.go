package csiplugin

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// client is a plugin served on a unix socket and gRPC clients for it, as the sidecars connect.
type client struct {
	p *Plugin
	csi.IdentityClient
	csi.ControllerClient
}

func start(t *testing.T, o Options) client {
	t.Helper()
	if o.Root == "" {
		o.Root = t.TempDir()
	}
	p, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	// A short directory: a unix socket path must stay under 108 bytes, and t.TempDir's carry the
	// test's name.
	sockDir, err := os.MkdirTemp("", "csi")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(sockDir) })
	srv, err := p.Serve(filepath.Join(sockDir, "csi.sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Errorf("stopping the plugin: %v", err)
		}
	})
	conn, err := grpc.NewClient(srv.Address, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return client{p: p, IdentityClient: csi.NewIdentityClient(conn), ControllerClient: csi.NewControllerClient(conn)}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

func mount(mode csi.VolumeCapability_AccessMode_Mode) *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode},
	}
}

var rwo = mount(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)

func nodes(names ...string) []*csi.Topology {
	var out []*csi.Topology
	for _, n := range names {
		out = append(out, &csi.Topology{Segments: map[string]string{DefaultTopologyKey: n}})
	}
	return out
}

// codeOf is the gRPC code of err (OK for nil).
func codeOf(err error) codes.Code { return status.Code(err) }

func TestIdentity(t *testing.T) {
	c := start(t, Options{Name: "csi.example", Version: "v9"})
	info, err := c.GetPluginInfo(ctx(t), &csi.GetPluginInfoRequest{})
	if err != nil || info.GetName() != "csi.example" || info.GetVendorVersion() != "v9" {
		t.Fatalf("GetPluginInfo = %v, %v; want csi.example v9", info, err)
	}
	probe, err := c.Probe(ctx(t), &csi.ProbeRequest{})
	if err != nil || !probe.GetReady().GetValue() {
		t.Fatalf("Probe = %v, %v; want ready", probe, err)
	}
	pc, err := c.GetPluginCapabilities(ctx(t), &csi.GetPluginCapabilitiesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var services []csi.PluginCapability_Service_Type
	var expansion csi.PluginCapability_VolumeExpansion_Type
	for _, cp := range pc.GetCapabilities() {
		if s := cp.GetService(); s != nil {
			services = append(services, s.GetType())
		}
		if e := cp.GetVolumeExpansion(); e != nil {
			expansion = e.GetType()
		}
	}
	for _, want := range []csi.PluginCapability_Service_Type{csi.PluginCapability_Service_CONTROLLER_SERVICE, csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS} {
		if !slices.Contains(services, want) {
			t.Errorf("plugin capabilities %v lack %v", services, want)
		}
	}
	if expansion != csi.PluginCapability_VolumeExpansion_ONLINE {
		t.Errorf("volume expansion capability = %v, want ONLINE", expansion)
	}
	cc, err := c.ControllerGetCapabilities(ctx(t), &csi.ControllerGetCapabilitiesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var rpcs []csi.ControllerServiceCapability_RPC_Type
	for _, cp := range cc.GetCapabilities() {
		rpcs = append(rpcs, cp.GetRpc().GetType())
	}
	for _, want := range []csi.ControllerServiceCapability_RPC_Type{
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME, csi.ControllerServiceCapability_RPC_EXPAND_VOLUME,
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT, csi.ControllerServiceCapability_RPC_LIST_SNAPSHOTS, csi.ControllerServiceCapability_RPC_CLONE_VOLUME,
	} {
		if !slices.Contains(rpcs, want) {
			t.Errorf("controller capabilities %v lack %v", rpcs, want)
		}
	}
	if slices.Contains(rpcs, csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME) {
		t.Errorf("controller capabilities %v advertise PUBLISH_UNPUBLISH_VOLUME, which would need an attacher", rpcs)
	}
}

func TestCreateVolume(t *testing.T) {
	cases := []struct {
		name     string
		opts     Options
		req      *csi.CreateVolumeRequest
		wantCode codes.Code
		wantNode string
		wantSize int64
	}{
		{name: "preferred first", req: &csi.CreateVolumeRequest{Name: "pvc-1", VolumeCapabilities: []*csi.VolumeCapability{rwo},
			CapacityRange:             &csi.CapacityRange{RequiredBytes: 5 << 20},
			AccessibilityRequirements: &csi.TopologyRequirement{Requisite: nodes("a", "b", "c"), Preferred: nodes("b", "c", "a")}},
			wantNode: "b", wantSize: 5 << 20},
		{name: "requisite when nothing is preferred", req: &csi.CreateVolumeRequest{Name: "pvc-1", VolumeCapabilities: []*csi.VolumeCapability{rwo},
			AccessibilityRequirements: &csi.TopologyRequirement{Requisite: nodes("c", "a")}},
			wantNode: "c", wantSize: DefaultCapacityBytes},
		{name: "segments of other keys are skipped", req: &csi.CreateVolumeRequest{Name: "pvc-1", VolumeCapabilities: []*csi.VolumeCapability{rwo},
			AccessibilityRequirements: &csi.TopologyRequirement{Preferred: []*csi.Topology{{Segments: map[string]string{"zone": "z1"}}}, Requisite: nodes("a")}},
			wantNode: "a", wantSize: DefaultCapacityBytes},
		{name: "only nodes with storage", opts: Options{Nodes: []string{"c"}}, req: &csi.CreateVolumeRequest{Name: "pvc-1", VolumeCapabilities: []*csi.VolumeCapability{rwo},
			AccessibilityRequirements: &csi.TopologyRequirement{Requisite: nodes("a", "c"), Preferred: nodes("a", "c")}},
			wantNode: "c", wantSize: DefaultCapacityBytes},
		{name: "no requirements: the first node with storage", opts: Options{Nodes: []string{"n1", "n2"}}, req: &csi.CreateVolumeRequest{Name: "pvc-1", VolumeCapabilities: []*csi.VolumeCapability{rwo}},
			wantNode: "n1", wantSize: DefaultCapacityBytes},
		{name: "default size capped by the limit", req: &csi.CreateVolumeRequest{Name: "pvc-1", VolumeCapabilities: []*csi.VolumeCapability{rwo},
			CapacityRange: &csi.CapacityRange{LimitBytes: 1 << 20}, AccessibilityRequirements: &csi.TopologyRequirement{Requisite: nodes("a")}},
			wantNode: "a", wantSize: 1 << 20},
		{name: "ReadWriteOncePod", req: &csi.CreateVolumeRequest{Name: "pvc-1", VolumeCapabilities: []*csi.VolumeCapability{mount(csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER)},
			AccessibilityRequirements: &csi.TopologyRequirement{Requisite: nodes("a")}},
			wantNode: "a", wantSize: DefaultCapacityBytes},
		{name: "a name that is not a path element", req: &csi.CreateVolumeRequest{Name: "../../etc", VolumeCapabilities: []*csi.VolumeCapability{rwo},
			AccessibilityRequirements: &csi.TopologyRequirement{Requisite: nodes("a")}},
			wantNode: "a", wantSize: DefaultCapacityBytes},

		{name: "no name", req: &csi.CreateVolumeRequest{VolumeCapabilities: []*csi.VolumeCapability{rwo}}, wantCode: codes.InvalidArgument},
		{name: "no capabilities", req: &csi.CreateVolumeRequest{Name: "pvc-1"}, wantCode: codes.InvalidArgument},
		{name: "block", req: &csi.CreateVolumeRequest{Name: "pvc-1", VolumeCapabilities: []*csi.VolumeCapability{{
			AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER}}}}, wantCode: codes.InvalidArgument},
		{name: "a filesystem type", req: &csi.CreateVolumeRequest{Name: "pvc-1", VolumeCapabilities: []*csi.VolumeCapability{{
			AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: "ext4"}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER}}}}, wantCode: codes.InvalidArgument},
		{name: "ReadWriteMany", req: &csi.CreateVolumeRequest{Name: "pvc-1", VolumeCapabilities: []*csi.VolumeCapability{
			rwo, mount(csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER)}}, wantCode: codes.InvalidArgument},
		{name: "required above limit", req: &csi.CreateVolumeRequest{Name: "pvc-1", VolumeCapabilities: []*csi.VolumeCapability{rwo},
			CapacityRange: &csi.CapacityRange{RequiredBytes: 2 << 20, LimitBytes: 1 << 20}}, wantCode: codes.InvalidArgument},
		{name: "a content source that does not exist", req: &csi.CreateVolumeRequest{Name: "pvc-1", VolumeCapabilities: []*csi.VolumeCapability{rwo},
			VolumeContentSource: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: "pvc-0"}}}}, wantCode: codes.NotFound},
		{name: "a node expansion parameter that is not a boolean", req: &csi.CreateVolumeRequest{Name: "pvc-1", VolumeCapabilities: []*csi.VolumeCapability{rwo},
			Parameters: map[string]string{ParamNodeExpansionRequired: "yes"}, AccessibilityRequirements: &csi.TopologyRequirement{Requisite: nodes("a")}}, wantCode: codes.InvalidArgument},
		{name: "no requirements and no nodes", req: &csi.CreateVolumeRequest{Name: "pvc-1", VolumeCapabilities: []*csi.VolumeCapability{rwo}}, wantCode: codes.InvalidArgument},
		{name: "no segment names a node", req: &csi.CreateVolumeRequest{Name: "pvc-1", VolumeCapabilities: []*csi.VolumeCapability{rwo},
			AccessibilityRequirements: &csi.TopologyRequirement{Requisite: []*csi.Topology{{Segments: map[string]string{"zone": "z1"}}}}}, wantCode: codes.InvalidArgument},
		{name: "no storage on the nodes named", opts: Options{Nodes: []string{"c"}}, req: &csi.CreateVolumeRequest{Name: "pvc-1", VolumeCapabilities: []*csi.VolumeCapability{rwo},
			AccessibilityRequirements: &csi.TopologyRequirement{Requisite: nodes("a", "b")}}, wantCode: codes.ResourceExhausted},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := start(t, tc.opts)
			resp, err := c.CreateVolume(ctx(t), tc.req)
			if codeOf(err) != tc.wantCode {
				t.Fatalf("CreateVolume: %v, want code %v", err, tc.wantCode)
			}
			vols, lerr := c.p.Volumes()
			if lerr != nil {
				t.Fatal(lerr)
			}
			if tc.wantCode != codes.OK {
				if len(vols) != 0 {
					t.Errorf("a refused CreateVolume left volumes %v", vols)
				}
				return
			}
			v := resp.GetVolume()
			wantTopo := []*csi.Topology{{Segments: map[string]string{DefaultTopologyKey: tc.wantNode}}}
			if v.GetCapacityBytes() != tc.wantSize || len(v.GetAccessibleTopology()) != 1 || v.GetAccessibleTopology()[0].GetSegments()[DefaultTopologyKey] != tc.wantNode {
				t.Errorf("volume %v: want %d bytes on %v", v, tc.wantSize, wantTopo)
			}
			if len(vols) != 1 || vols[0].ID != v.GetVolumeId() || vols[0].Name != tc.req.GetName() || vols[0].Node != tc.wantNode || vols[0].CapacityBytes != tc.wantSize {
				t.Errorf("store holds %+v, want one volume %s (%s) of %d bytes on %s", vols, v.GetVolumeId(), tc.req.GetName(), tc.wantSize, tc.wantNode)
			}
			if rel, err := filepath.Rel(c.p.o.Root, c.p.Dir(v.GetVolumeId())); err != nil || filepath.Dir(rel) != "." {
				t.Errorf("volume dir %s is not directly under the root %s", c.p.Dir(v.GetVolumeId()), c.p.o.Root)
			}
			if fi, err := os.Stat(filepath.Join(c.p.Dir(v.GetVolumeId()), "data")); err != nil || !fi.IsDir() {
				t.Errorf("volume %s has no data directory: %v", v.GetVolumeId(), err)
			}
		})
	}
}

// TestCreateVolumeIdempotent: a repeated CreateVolume returns the volume it made when it still
// fits the request, and ALREADY_EXISTS when it does not, never a second volume.
func TestCreateVolumeIdempotent(t *testing.T) {
	first := func() *csi.CreateVolumeRequest {
		return &csi.CreateVolumeRequest{
			Name: "pvc-1", VolumeCapabilities: []*csi.VolumeCapability{rwo},
			CapacityRange:             &csi.CapacityRange{RequiredBytes: 10 << 20},
			Parameters:                map[string]string{"tier": "fast"},
			AccessibilityRequirements: &csi.TopologyRequirement{Requisite: nodes("a", "b"), Preferred: nodes("b", "a")},
		}
	}
	cases := []struct {
		name     string
		mutate   func(*csi.CreateVolumeRequest)
		wantCode codes.Code
	}{
		{name: "the same request", mutate: func(*csi.CreateVolumeRequest) {}},
		{name: "other preferences, same requisite", mutate: func(r *csi.CreateVolumeRequest) { r.AccessibilityRequirements.Preferred = nodes("a", "b") }},
		{name: "a smaller size", mutate: func(r *csi.CreateVolumeRequest) { r.CapacityRange.RequiredBytes = 1 << 20 }},
		{name: "a larger size", mutate: func(r *csi.CreateVolumeRequest) { r.CapacityRange.RequiredBytes = 20 << 20 }, wantCode: codes.AlreadyExists},
		{name: "a limit below its size", mutate: func(r *csi.CreateVolumeRequest) { r.CapacityRange = &csi.CapacityRange{LimitBytes: 5 << 20} }, wantCode: codes.AlreadyExists},
		{name: "other parameters", mutate: func(r *csi.CreateVolumeRequest) { r.Parameters = map[string]string{"tier": "slow"} }, wantCode: codes.AlreadyExists},
		{name: "a requisite without its node", mutate: func(r *csi.CreateVolumeRequest) {
			r.AccessibilityRequirements = &csi.TopologyRequirement{Requisite: nodes("a")}
		}, wantCode: codes.AlreadyExists},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := start(t, Options{})
			created, err := c.CreateVolume(ctx(t), first())
			if err != nil {
				t.Fatal(err)
			}
			again := first()
			tc.mutate(again)
			resp, err := c.CreateVolume(ctx(t), again)
			if codeOf(err) != tc.wantCode {
				t.Fatalf("repeated CreateVolume: %v, want code %v", err, tc.wantCode)
			}
			if err == nil && (resp.GetVolume().GetVolumeId() != created.GetVolume().GetVolumeId() || resp.GetVolume().GetCapacityBytes() != 10<<20) {
				t.Errorf("repeated CreateVolume answered %v, want the volume it made %v", resp.GetVolume(), created.GetVolume())
			}
			if vols, err := c.p.Volumes(); err != nil || len(vols) != 1 || vols[0].Node != "b" {
				t.Errorf("store holds %+v (%v), want only the first volume, on b", vols, err)
			}
		})
	}
}

func TestDeleteVolume(t *testing.T) {
	c := start(t, Options{})
	resp, err := c.CreateVolume(ctx(t), &csi.CreateVolumeRequest{Name: "pvc-1", VolumeCapabilities: []*csi.VolumeCapability{rwo},
		AccessibilityRequirements: &csi.TopologyRequirement{Requisite: nodes("a")}})
	if err != nil {
		t.Fatal(err)
	}
	id := resp.GetVolume().GetVolumeId()
	outside := filepath.Join(filepath.Dir(c.p.o.Root), "outside")
	if err := os.Mkdir(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, id string
		wantCode codes.Code
	}{
		{name: "the volume", id: id},
		{name: "again: already gone", id: id},
		{name: "an id never created", id: "pvc-unknown"},
		{name: "an id that is not a path element", id: "../outside"},
		{name: "no id", id: "", wantCode: codes.InvalidArgument},
	} {
		if _, err := c.DeleteVolume(ctx(t), &csi.DeleteVolumeRequest{VolumeId: tc.id}); codeOf(err) != tc.wantCode {
			t.Errorf("%s: DeleteVolume(%q) = %v, want code %v", tc.name, tc.id, err, tc.wantCode)
		}
	}
	if _, err := os.Stat(c.p.Dir(id)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("volume dir %s still there after DeleteVolume: %v", c.p.Dir(id), err)
	}
	if _, err := os.Stat(outside); err != nil {
		t.Errorf("DeleteVolume(../outside) touched a directory outside the root: %v", err)
	}
	if entries, err := os.ReadDir(c.p.o.Root); err != nil || len(entries) != 0 {
		t.Errorf("root holds %v (%v) after every volume was deleted", entries, err)
	}
}

func TestControllerExpandVolume(t *testing.T) {
	const created = 10 << 20
	cases := []struct {
		name         string
		opts         Options
		params       map[string]string // the volume's CreateVolume parameters
		id           string            // default: the created volume
		capRange     *csi.CapacityRange
		capability   *csi.VolumeCapability
		wantCode     codes.Code
		wantSize     int64
		wantNodeStep bool
	}{
		{name: "grows", capRange: &csi.CapacityRange{RequiredBytes: 20 << 20}, wantSize: 20 << 20},
		{name: "grows within a limit", capRange: &csi.CapacityRange{RequiredBytes: 20 << 20, LimitBytes: 30 << 20}, capability: rwo, wantSize: 20 << 20},
		{name: "the size it has", capRange: &csi.CapacityRange{RequiredBytes: created}, wantSize: created},
		{name: "never shrinks", capRange: &csi.CapacityRange{RequiredBytes: 1 << 20}, wantSize: created},
		{name: "node step when configured", opts: Options{NodeExpansionRequired: true}, capRange: &csi.CapacityRange{RequiredBytes: 20 << 20}, wantSize: 20 << 20, wantNodeStep: true},
		{name: "node step by the volume's parameter", params: map[string]string{ParamNodeExpansionRequired: "true"}, capRange: &csi.CapacityRange{RequiredBytes: 20 << 20}, wantSize: 20 << 20, wantNodeStep: true},
		{name: "the volume's parameter overrides the option", opts: Options{NodeExpansionRequired: true}, params: map[string]string{ParamNodeExpansionRequired: "false"}, capRange: &csi.CapacityRange{RequiredBytes: 20 << 20}, wantSize: 20 << 20},
		{name: "a limit below its size", capRange: &csi.CapacityRange{LimitBytes: 5 << 20}, wantCode: codes.OutOfRange, wantSize: created},
		{name: "no capacity range", wantCode: codes.InvalidArgument, wantSize: created},
		{name: "required above limit", capRange: &csi.CapacityRange{RequiredBytes: 40 << 20, LimitBytes: 30 << 20}, wantCode: codes.InvalidArgument, wantSize: created},
		{name: "an unsupported capability", capRange: &csi.CapacityRange{RequiredBytes: 20 << 20}, capability: mount(csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY), wantCode: codes.InvalidArgument, wantSize: created},
		{name: "an unknown volume", id: "pvc-unknown", capRange: &csi.CapacityRange{RequiredBytes: 20 << 20}, wantCode: codes.NotFound, wantSize: created},
		{name: "no id", id: "-", capRange: &csi.CapacityRange{RequiredBytes: 20 << 20}, wantCode: codes.InvalidArgument, wantSize: created},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := start(t, tc.opts)
			resp, err := c.CreateVolume(ctx(t), &csi.CreateVolumeRequest{Name: "pvc-1", VolumeCapabilities: []*csi.VolumeCapability{rwo}, Parameters: tc.params,
				CapacityRange: &csi.CapacityRange{RequiredBytes: created}, AccessibilityRequirements: &csi.TopologyRequirement{Requisite: nodes("a")}})
			if err != nil {
				t.Fatal(err)
			}
			id := resp.GetVolume().GetVolumeId()
			reqID := tc.id
			switch reqID {
			case "":
				reqID = id
			case "-":
				reqID = ""
			}
			got, err := c.ControllerExpandVolume(ctx(t), &csi.ControllerExpandVolumeRequest{VolumeId: reqID, CapacityRange: tc.capRange, VolumeCapability: tc.capability})
			if codeOf(err) != tc.wantCode {
				t.Fatalf("ControllerExpandVolume: %v, want code %v", err, tc.wantCode)
			}
			if err == nil && (got.GetCapacityBytes() != tc.wantSize || got.GetNodeExpansionRequired() != tc.wantNodeStep) {
				t.Errorf("ControllerExpandVolume = %v, want %d bytes, node expansion %v", got, tc.wantSize, tc.wantNodeStep)
			}
			if v, ok, err := c.p.Volume(id); err != nil || !ok || v.CapacityBytes != tc.wantSize {
				t.Errorf("store has %+v (%v, %v), want %d bytes recorded", v, ok, err, tc.wantSize)
			}
		})
	}
}

func TestValidateVolumeCapabilities(t *testing.T) {
	c := start(t, Options{})
	resp, err := c.CreateVolume(ctx(t), &csi.CreateVolumeRequest{Name: "pvc-1", VolumeCapabilities: []*csi.VolumeCapability{rwo},
		Parameters: map[string]string{"tier": "fast"}, AccessibilityRequirements: &csi.TopologyRequirement{Requisite: nodes("a")}})
	if err != nil {
		t.Fatal(err)
	}
	id := resp.GetVolume().GetVolumeId()
	for _, tc := range []struct {
		name          string
		req           *csi.ValidateVolumeCapabilitiesRequest
		wantCode      codes.Code
		wantConfirmed bool
	}{
		{name: "supported", req: &csi.ValidateVolumeCapabilitiesRequest{VolumeId: id, VolumeCapabilities: []*csi.VolumeCapability{rwo}}, wantConfirmed: true},
		{name: "same parameters", req: &csi.ValidateVolumeCapabilitiesRequest{VolumeId: id, VolumeCapabilities: []*csi.VolumeCapability{rwo}, Parameters: map[string]string{"tier": "fast"}}, wantConfirmed: true},
		{name: "other parameters", req: &csi.ValidateVolumeCapabilitiesRequest{VolumeId: id, VolumeCapabilities: []*csi.VolumeCapability{rwo}, Parameters: map[string]string{"tier": "slow"}}},
		{name: "multi-node", req: &csi.ValidateVolumeCapabilitiesRequest{VolumeId: id, VolumeCapabilities: []*csi.VolumeCapability{mount(csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER)}}},
		{name: "unknown volume", req: &csi.ValidateVolumeCapabilitiesRequest{VolumeId: "pvc-x", VolumeCapabilities: []*csi.VolumeCapability{rwo}}, wantCode: codes.NotFound},
		{name: "no capabilities", req: &csi.ValidateVolumeCapabilitiesRequest{VolumeId: id}, wantCode: codes.InvalidArgument},
	} {
		got, err := c.ValidateVolumeCapabilities(ctx(t), tc.req)
		if codeOf(err) != tc.wantCode {
			t.Errorf("%s: %v, want code %v", tc.name, err, tc.wantCode)
			continue
		}
		if err == nil && (got.GetConfirmed() != nil) != tc.wantConfirmed {
			t.Errorf("%s: %v, want confirmed %v", tc.name, got, tc.wantConfirmed)
		}
	}
}

// TestCallsAndHook: every call is counted, refused or not, and the hook answers first.
func TestCallsAndHook(t *testing.T) {
	c := start(t, Options{Hook: func(method string, req any) error {
		if r, ok := req.(*csi.CreateVolumeRequest); ok && r.GetName() == "pvc-full" {
			return status.Error(codes.ResourceExhausted, "injected: out of space")
		}
		return nil
	}})
	req := func(name string) *csi.CreateVolumeRequest {
		return &csi.CreateVolumeRequest{Name: name, VolumeCapabilities: []*csi.VolumeCapability{rwo}, AccessibilityRequirements: &csi.TopologyRequirement{Requisite: nodes("a")}}
	}
	if _, err := c.CreateVolume(ctx(t), req("pvc-full")); codeOf(err) != codes.ResourceExhausted {
		t.Errorf("hooked CreateVolume = %v, want the injected RESOURCE_EXHAUSTED", err)
	}
	if _, err := c.CreateVolume(ctx(t), req("pvc-ok")); err != nil {
		t.Errorf("CreateVolume: %v", err)
	}
	if _, err := c.Probe(ctx(t), &csi.ProbeRequest{}); err != nil {
		t.Error(err)
	}
	if got := c.p.Calls("CreateVolume"); got != 2 {
		t.Errorf("CreateVolume calls = %d, want 2 (one refused by the hook)", got)
	}
	if got := c.p.AllCalls(); got["Probe"] != 1 || got["DeleteVolume"] != 0 {
		t.Errorf("calls = %v, want one Probe and no DeleteVolume", got)
	}
	if vols, err := c.p.Volumes(); err != nil || len(vols) != 1 || vols[0].Name != "pvc-ok" {
		t.Errorf("store holds %+v (%v), want only pvc-ok", vols, err)
	}
}

func TestNewOptions(t *testing.T) {
	if _, err := New(Options{}); err == nil {
		t.Error("New without a root: no error")
	}
	if _, err := New(Options{Root: t.TempDir(), DefaultCapacityBytes: -1}); err == nil {
		t.Error("New with a negative default capacity: no error")
	}
	p, err := New(Options{Root: filepath.Join(t.TempDir(), "a", "b")})
	if err != nil {
		t.Fatal(err)
	}
	if p.Name() != DefaultName || p.TopologyKey() != DefaultTopologyKey {
		t.Errorf("defaults: name %q, key %q", p.Name(), p.TopologyKey())
	}
}

func TestVolumeID(t *testing.T) {
	for _, tc := range []struct{ name, want string }{
		{"pvc-0a1b2c3d-0000-4000-8000-000000000000", "pvc-0a1b2c3d-0000-4000-8000-000000000000"},
		{"../x", ""}, {".hidden", ""}, {"a/b", ""}, {"", ""},
	} {
		got := volumeID(tc.name)
		if tc.want != "" && got != tc.want {
			t.Errorf("volumeID(%q) = %q, want %q", tc.name, got, tc.want)
		}
		if !validID(got) || filepath.Base(got) != got {
			t.Errorf("volumeID(%q) = %q, not a valid path element", tc.name, got)
		}
	}
	if volumeID("a/b") == volumeID("a/c") {
		t.Error("two names hash to one id")
	}
}
