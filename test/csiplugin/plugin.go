package csiplugin

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
)

const (
	// DefaultName is the driver name GetPluginInfo reports: the provisioner name a StorageClass
	// names, the CSIDriver object's name and the driver of every volume's spec.csi.
	DefaultName = "csi.pvguard.test"
	// DefaultTopologyKey is the topology key of the one segment each volume is accessible from.
	DefaultTopologyKey = "topology.csi.pvguard.test/node"
	// DefaultCapacityBytes is the size of a volume created with no capacity range.
	DefaultCapacityBytes = 1 << 30
	// ParamNodeExpansionRequired is a CreateVolume parameter (a StorageClass parameter),
	// "true" or "false", that overrides Options.NodeExpansionRequired for the volume: one
	// plugin can then serve volumes whose expansion finishes in the controller and volumes
	// whose expansion waits for the node (the kubelet).
	ParamNodeExpansionRequired = "nodeExpansionRequired"
)

// Options configure a Plugin; New applies the defaults.
type Options struct {
	// Root holds one directory per volume (required; created if missing).
	Root string
	// Name is the driver name (default DefaultName).
	Name string
	// Version is the vendor version GetPluginInfo reports (default "test").
	Version string
	// TopologyKey names the node a volume is accessible from (default DefaultTopologyKey).
	TopologyKey string
	// Nodes, when set, are the only nodes with storage: CreateVolume chooses among them and
	// fails with RESOURCE_EXHAUSTED when the requirements name none of them. When empty any
	// node the requirements name will do.
	Nodes []string
	// DefaultCapacityBytes is the size of a volume created without a capacity range (default
	// DefaultCapacityBytes).
	DefaultCapacityBytes int64
	// NodeExpansionRequired is what ControllerExpandVolume answers unless the volume's
	// ParamNodeExpansionRequired says otherwise. False by default: growing a directory's quota
	// needs no node step, and no kubelet runs here to take one.
	NodeExpansionRequired bool
	// Hook, when set, is called before every call is handled, with the method's short name
	// ("CreateVolume") and the request; an error it returns is the call's answer (use
	// status.Error for a gRPC code). Tests inject failures with it.
	Hook func(method string, req any) error
}

// Plugin is the CSI plugin: an Identity and a Controller service over a volume store.
type Plugin struct {
	o Options

	// mu serialises every operation on the store: the CSI spec lets a plugin refuse concurrent
	// operations on one volume, and one lock is the simplest way to be correct about it.
	mu    sync.Mutex
	calls map[string]int
}

// New checks the options, applies the defaults and prepares the root directory.
func New(o Options) (*Plugin, error) {
	if o.Root == "" {
		return nil, errors.New("csiplugin: Options.Root is required")
	}
	if o.Name == "" {
		o.Name = DefaultName
	}
	if o.Version == "" {
		o.Version = "test"
	}
	if o.TopologyKey == "" {
		o.TopologyKey = DefaultTopologyKey
	}
	if o.DefaultCapacityBytes == 0 {
		o.DefaultCapacityBytes = DefaultCapacityBytes
	}
	if o.DefaultCapacityBytes < 0 {
		return nil, fmt.Errorf("csiplugin: Options.DefaultCapacityBytes %d is negative", o.DefaultCapacityBytes)
	}
	if err := os.MkdirAll(o.Root, 0o755); err != nil {
		return nil, fmt.Errorf("csiplugin: creating root %s: %w", o.Root, err)
	}
	return &Plugin{o: o, calls: map[string]int{}}, nil
}

// Name is the driver name.
func (p *Plugin) Name() string { return p.o.Name }

// TopologyKey is the key of the segment each volume is accessible from.
func (p *Plugin) TopologyKey() string { return p.o.TopologyKey }

// Calls returns how many times a method (short name, e.g. "CreateVolume") has been called,
// successful or not.
func (p *Plugin) Calls(method string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[method]
}

// AllCalls returns a copy of every method's call count.
func (p *Plugin) AllCalls() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.calls)
}

// Server is a running gRPC server for a Plugin.
type Server struct {
	// Address is the socket as the sidecars' --csi-address takes it (unix:///path).
	Address string
	socket  string
	srv     *grpc.Server
	done    chan error
	once    sync.Once
	stopErr error
}

// Serve listens on the unix socket path (removing a stale socket first) and serves the
// Identity and Controller services until Stop.
func (p *Plugin) Serve(socket string) (*Server, error) {
	if err := os.Remove(socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("csiplugin: removing stale socket %s: %w", socket, err)
	}
	lis, err := net.Listen("unix", socket)
	if err != nil {
		return nil, fmt.Errorf("csiplugin: listening on %s: %w", socket, err)
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(p.intercept))
	csi.RegisterIdentityServer(srv, &identityServer{p: p})
	csi.RegisterControllerServer(srv, &controllerServer{p: p})
	s := &Server{Address: "unix://" + socket, socket: socket, srv: srv, done: make(chan error, 1)}
	go func() { s.done <- srv.Serve(lis) }()
	return s, nil
}

// Stop stops the server, letting calls in flight finish for up to five seconds, and removes
// the socket. Later calls return the first one's result.
func (s *Server) Stop() error {
	s.once.Do(func() {
		stopped := make(chan struct{})
		go func() { s.srv.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(5 * time.Second):
			s.srv.Stop()
		}
		if err := <-s.done; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			s.stopErr = fmt.Errorf("csiplugin: serving %s: %w", s.socket, err)
		}
		if err := os.Remove(s.socket); err != nil && !errors.Is(err, os.ErrNotExist) {
			s.stopErr = errors.Join(s.stopErr, err)
		}
	})
	return s.stopErr
}

// intercept counts every call and lets the hook answer it first.
func (p *Plugin) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	method := path.Base(info.FullMethod)
	p.mu.Lock()
	p.calls[method]++
	p.mu.Unlock()
	if p.o.Hook != nil {
		if err := p.o.Hook(method, req); err != nil {
			return nil, err
		}
	}
	return handler(ctx, req)
}

// Volumes lists the volumes in the store, by id.
func (p *Plugin) Volumes() ([]Volume, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	entries, err := os.ReadDir(p.o.Root)
	if err != nil {
		return nil, fmt.Errorf("csiplugin: listing %s: %w", p.o.Root, err)
	}
	var out []Volume
	for _, e := range entries {
		if !e.IsDir() || !validID(e.Name()) {
			continue // work directories of a create or delete in progress
		}
		v, ok, err := p.load(e.Name())
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, v)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// Volume returns one volume by id; ok is false when there is none.
func (p *Plugin) Volume(id string) (v Volume, ok bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.load(id)
}

// Dir is the directory a volume id lives in (whether or not it exists).
func (p *Plugin) Dir(id string) string { return filepath.Join(p.o.Root, id) }
