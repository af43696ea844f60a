package localstatic

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
)

// Provisioner runs one local static provisioner per fake node until its context ends.
type Provisioner struct {
	nodes []*nodeProvisioner
	done  chan struct{}
}

// Start sets up a provisioner for each node of cfg (reading its Node object and waiting for its
// informers to sync, as upstream does before its loop) and starts their loops, which run until
// ctx ends. Wait returns once they have all stopped.
func Start(ctx context.Context, cs kubernetes.Interface, cfg Config) (*Provisioner, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	p := &Provisioner{done: make(chan struct{})}
	for _, n := range cfg.Nodes {
		np, err := newNodeProvisioner(ctx, cs, cfg, n)
		if err != nil {
			for _, started := range p.nodes {
				started.shutdown()
			}
			return nil, err
		}
		p.nodes = append(p.nodes, np)
	}
	var wg sync.WaitGroup
	for _, np := range p.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			np.loop(ctx, cfg.DiscoveryPeriod)
			np.shutdown()
		}()
	}
	go func() {
		wg.Wait()
		close(p.done)
	}()
	return p, nil
}

// Run is Start followed by waiting for ctx to end and the provisioners to stop.
func Run(ctx context.Context, cs kubernetes.Interface, cfg Config) error {
	p, err := Start(ctx, cs, cfg)
	if err != nil {
		return err
	}
	p.Wait()
	return nil
}

// Wait blocks until every node's provisioner has stopped (after the context given to Start
// ended) and its background cleaning has finished.
func (p *Provisioner) Wait() { <-p.done }

// Done is closed once Wait would return.
func (p *Provisioner) Done() <-chan struct{} { return p.done }

// Name is the provisioner name of node's provisioner: the value of its PVs'
// pv.kubernetes.io/provisioned-by annotation.
func (p *Provisioner) Name(node string) string {
	for _, np := range p.nodes {
		if np.node.Name == node {
			return np.name
		}
	}
	return ""
}

// Upstream's constants (pkg/common and the PV controller's event reasons it copies).
const (
	annProvisionedBy   = "pv.kubernetes.io/provisioned-by"
	nodeLabelKey       = corev1.LabelHostname
	provisionerPrefix  = "local-volume-provisioner-"
	reasonFailedDelete = "VolumeFailedDelete"
	reasonUnsupported  = "VolumeUnsupportedReclaimPolicy"
	reasonUnknown      = "VolumeUnknownReclaimPolicy"
)

// nodeProvisioner is one upstream provisioner process: its node, configuration, PV cache,
// cleaning table and informers.
type nodeProvisioner struct {
	name            string
	node            *corev1.Node
	classes         map[string]mountConfig
	labels          map[string]string
	nodeSelector    *corev1.NodeSelector
	ownerRef        *metav1.OwnerReference
	setOwnerRef     bool
	useNodeNameOnly bool

	client      kubernetes.Interface
	classLister storagelisters.StorageClassLister
	cache       *volumeCache
	procs       *procTable
	vol         volumeUtil
	recorder    record.EventRecorder
	onError     func(node string, err error)
	log         logr.Logger

	factory     informers.SharedInformerFactory
	broadcaster record.EventBroadcaster
	stopInf     context.CancelFunc
	cleaners    sync.WaitGroup
}

// mountConfig is a class's configuration on one node: upstream's MountConfig.
type mountConfig struct {
	ClassConfig
	dir string
}

func newNodeProvisioner(ctx context.Context, cs kubernetes.Interface, cfg Config, n Node) (*nodeProvisioner, error) {
	node, err := cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("localstatic: reading Node %s: %w", n.Name, err)
	}
	if node.UID == "" {
		return nil, fmt.Errorf("localstatic: Node %s has no uid", n.Name)
	}
	hostname, ok := node.Labels[nodeLabelKey]
	if !ok {
		return nil, fmt.Errorf("localstatic: Node %s: metadata.labels has no %s, which the volumes' node affinity names", n.Name, nodeLabelKey)
	}

	np := &nodeProvisioner{
		node:            node,
		classes:         map[string]mountConfig{},
		labels:          map[string]string{},
		setOwnerRef:     cfg.SetPVOwnerRef,
		useNodeNameOnly: cfg.UseNodeNameOnly,
		client:          cs,
		cache:           newVolumeCache(),
		procs:           newProcTable(),
		onError:         cfg.OnError,
	}
	if cfg.UseNodeNameOnly {
		np.name = provisionerPrefix + node.Name
	} else {
		np.name = provisionerPrefix + node.Name + "-" + string(node.UID)
	}
	np.log = logr.FromContextOrDiscard(ctx).WithValues("provisioner", np.name)
	for class, dir := range n.Dirs {
		np.classes[class] = mountConfig{ClassConfig: cfg.Classes[class], dir: dir}
	}
	// Node labels first, then labelsForPV, which win on a clash, as upstream builds the map.
	for _, key := range cfg.NodeLabelsForPV {
		if v, ok := node.Labels[key]; ok {
			np.labels[key] = v
		}
	}
	for k, v := range cfg.LabelsForPV {
		np.labels[k] = v
	}
	np.ownerRef = &metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}
	np.nodeSelector = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchExpressions: []corev1.NodeSelectorRequirement{{
			Key: nodeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{hostname},
		}},
	}}}

	if cfg.hooks != nil && cfg.hooks.vol != nil {
		np.vol = cfg.hooks.vol
	} else {
		np.vol = newHostVolumes()
	}
	if cfg.hooks != nil && cfg.hooks.recorder != nil {
		np.recorder = cfg.hooks.recorder(np.name)
	} else {
		np.broadcaster = record.NewBroadcaster(record.WithContext(ctx))
		np.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
		np.recorder = np.broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: np.name})
	}

	// The populator: a PV informer filling the cache with this provisioner's volumes.
	infCtx, stop := context.WithCancel(ctx)
	np.stopInf = stop
	np.factory = informers.NewSharedInformerFactory(cs, 0)
	pvInformer := np.factory.Core().V1().PersistentVolumes().Informer()
	if _, err := pvInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { np.populate(obj) },
		UpdateFunc: func(_, obj any) { np.populate(obj) },
		DeleteFunc: func(obj any) { np.unpopulate(obj) },
	}); err != nil {
		np.shutdown()
		return nil, fmt.Errorf("localstatic: %s: watching PersistentVolumes: %w", np.name, err)
	}
	np.classLister = np.factory.Storage().V1().StorageClasses().Lister()
	np.factory.Start(infCtx.Done())
	for typ, ok := range np.factory.WaitForCacheSync(infCtx.Done()) {
		if !ok {
			np.shutdown()
			return nil, fmt.Errorf("localstatic: %s: informer for %v never synced", np.name, typ)
		}
	}
	return np, nil
}

// populate is upstream's Populator.handlePVUpdate: a PV already cached is refreshed whatever it
// now says; a new one is cached only if this provisioner created it (or, with useNodeNameOnly,
// an earlier provisioner of this node named with the node's uid).
func (np *nodeProvisioner) populate(obj any) {
	pv, ok := obj.(*corev1.PersistentVolume)
	if !ok {
		return
	}
	if _, cached := np.cache.get(pv.Name); cached {
		np.cache.put(pv)
		return
	}
	by, found := pv.Annotations[annProvisionedBy]
	if !found {
		return
	}
	if by == np.name {
		np.cache.put(pv)
		return
	}
	if np.useNodeNameOnly && pv.Labels[nodeLabelKey] == np.node.Name && strings.HasPrefix(by, np.name+"-") {
		np.cache.put(pv)
	}
}

func (np *nodeProvisioner) unpopulate(obj any) {
	pv, ok := obj.(*corev1.PersistentVolume)
	if !ok {
		tomb, isTomb := obj.(cache.DeletedFinalStateUnknown)
		if !isTomb {
			return
		}
		if pv, ok = tomb.Obj.(*corev1.PersistentVolume); !ok {
			return
		}
	}
	np.cache.remove(pv.Name)
}

// loop is upstream's sync loop: delete what is released, discover what is new, sleep.
func (np *nodeProvisioner) loop(ctx context.Context, period time.Duration) {
	np.log.Info("local static provisioner stand-in started", "node", np.node.Name)
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			np.log.Info("local static provisioner stand-in stopped", "node", np.node.Name)
			return
		case <-t.C:
		}
		np.report(ctx, np.deletePVs(ctx))
		np.report(ctx, np.discover(ctx))
		t.Reset(period)
	}
}

// report logs a failed pass and hands it to Config.OnError, unless the pass failed because the
// provisioner is stopping.
func (np *nodeProvisioner) report(ctx context.Context, err error) {
	if err == nil || ctx.Err() != nil {
		return
	}
	np.log.Error(err, "pass failed")
	if np.onError != nil {
		np.onError(np.node.Name, err)
	}
}

// shutdown waits for background cleaning, then stops the informers and the event broadcaster.
func (np *nodeProvisioner) shutdown() {
	np.cleaners.Wait()
	if np.stopInf != nil {
		np.stopInf()
	}
	if np.factory != nil {
		np.factory.Shutdown()
	}
	if np.broadcaster != nil {
		np.broadcaster.Shutdown()
	}
}

// volumeCache is upstream's VolumeCache: this provisioner's PVs by name.
type volumeCache struct {
	mu  sync.Mutex
	pvs map[string]*corev1.PersistentVolume
}

func newVolumeCache() *volumeCache {
	return &volumeCache{pvs: map[string]*corev1.PersistentVolume{}}
}

func (c *volumeCache) get(name string) (*corev1.PersistentVolume, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	pv, ok := c.pvs[name]
	return pv, ok
}

func (c *volumeCache) put(pv *corev1.PersistentVolume) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pvs[pv.Name] = pv
}

func (c *volumeCache) remove(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.pvs, name)
}

func (c *volumeCache) list() []*corev1.PersistentVolume {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*corev1.PersistentVolume, 0, len(c.pvs))
	for _, pv := range c.pvs {
		out = append(out, pv)
	}
	return out
}

// namesByPath lists the cached PVs whose local path is path.
func (c *volumeCache) namesByPath(path string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var names []string
	for _, pv := range c.pvs {
		if pv.Spec.Local != nil && pv.Spec.Local.Path == path {
			names = append(names, pv.Name)
		}
	}
	return names
}

// cleanState is the state of one volume's cleaning, as upstream's CleanupState.
type cleanState int

const (
	cleanNotFound cleanState = iota
	cleanRunning
	cleanFailed
	cleanSucceeded
)

// procTable is upstream's ProcTable: the cleanings running or finished but not yet acted on.
type procTable struct {
	mu      sync.Mutex
	entries map[string]cleanState
}

func newProcTable() *procTable { return &procTable{entries: map[string]cleanState{}} }

func (t *procTable) running(name string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.entries[name] == cleanRunning
}

func (t *procTable) markRunning(name string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.entries[name]; ok {
		return fmt.Errorf("cleaning of PV %s is already recorded", name)
	}
	t.entries[name] = cleanRunning
	return nil
}

func (t *procTable) finish(name string, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err != nil {
		t.entries[name] = cleanFailed
	} else {
		t.entries[name] = cleanSucceeded
	}
}

// take removes and returns a finished entry; a running one is an error.
func (t *procTable) take(name string) (cleanState, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.entries[name]
	if !ok {
		return cleanNotFound, nil
	}
	if s == cleanRunning {
		return s, errors.New("cleaning of PV " + name + " is still running")
	}
	delete(t.entries, name)
	return s, nil
}
