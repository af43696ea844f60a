package localstatic

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
)

// The node-cleanup controller is the local static provisioner's second component (a Deployment,
// cmd/node-cleanup), which frees what a deleted node's local volumes hold. The stand-in makes
// the writes upstream's makes, modelled on the same snapshot's source (6cbe253c):
//
//   - pkg/node-cleanup/controller/controller.go: when a Node is deleted (and once at start), every
//     local volume of the configured classes that has a claimRef and whose nodes
//     (GetLocalPersistentVolumeNodeNames: the kubernetes.io/hostname In values of its node
//     affinity's terms) all do not exist (AnyNodeExists: no Node of that name, and none labelled
//     kubernetes.io/hostname with it) gets a ReferencedNodeDeleted warning on its claimRef and is
//     queued after pvcDeletionDelay; then, if the nodes are still gone and the claim the claimRef
//     names still has the volume in spec.volumeName and the claimRef's uid, the claim is deleted
//     with a uid precondition.
//   - pkg/node-cleanup/deleter/deleter.go: every stalePVDiscoveryInterval, every such volume
//     (claimRef or not) that is Available, or Released with reclaim policy Delete, is deleted.
//
// Left out: its metrics, and the workers' count (one worker: the writes are the same).

// NodeCleanupConfig configures the node-cleanup controller stand-in: upstream's flags.
type NodeCleanupConfig struct {
	// StorageClassNames are the classes whose local volumes it cleans (--storageclass-names).
	StorageClassNames []string
	// PVCDeletionDelay is how long after a node's deletion a claim is deleted (default 60s,
	// --pvc-deletion-delay).
	PVCDeletionDelay time.Duration
	// StalePVDiscoveryInterval is the deleter's period (default 10s,
	// --stale-pv-discovery-interval).
	StalePVDiscoveryInterval time.Duration
	// OnError is told each failed write or read (upstream logs it and retries).
	OnError func(err error)
}

// NodeCleanup is a running node-cleanup controller stand-in.
type NodeCleanup struct {
	cfg       NodeCleanupConfig
	client    kubernetes.Interface
	nodes     corelisters.NodeLister
	pvs       corelisters.PersistentVolumeLister
	pvcs      corelisters.PersistentVolumeClaimLister
	queue     workqueue.TypedRateLimitingInterface[string]
	recorder  record.EventRecorder
	done      chan struct{}
	deletedMu sync.Mutex
	deleted   []string // "PersistentVolumeClaim ns/name" and "PersistentVolume name", in order
}

// StartNodeCleanup starts the controller and its deleter; they run until ctx ends (Done).
func StartNodeCleanup(ctx context.Context, cs kubernetes.Interface, cfg NodeCleanupConfig) (*NodeCleanup, error) {
	if cfg.PVCDeletionDelay == 0 {
		cfg.PVCDeletionDelay = 60 * time.Second
	}
	if cfg.StalePVDiscoveryInterval == 0 {
		cfg.StalePVDiscoveryInterval = 10 * time.Second
	}
	if cfg.OnError == nil {
		cfg.OnError = func(error) {}
	}
	factory := informers.NewSharedInformerFactory(cs, 10*time.Minute) // upstream's --resync
	c := &NodeCleanup{
		cfg: cfg, client: cs,
		nodes: factory.Core().V1().Nodes().Lister(),
		pvs:   factory.Core().V1().PersistentVolumes().Lister(),
		pvcs:  factory.Core().V1().PersistentVolumeClaims().Lister(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "stalePVQueue"}),
		done: make(chan struct{}),
	}
	if _, err := factory.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(any) { c.startCleanupTimersIfNeeded() },
	}); err != nil {
		return nil, fmt.Errorf("localstatic: node-cleanup: watching nodes: %w", err)
	}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
	c.recorder = broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "cleanup-controller"})
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			c.queue.ShutDown()
			broadcaster.Shutdown()
			factory.Shutdown()
			return nil, fmt.Errorf("localstatic: node-cleanup: informer for %v did not sync", typ)
		}
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for c.processNextWorkItem(ctx) {
		}
	}()
	go func() {
		defer wg.Done()
		for {
			c.deletePVs(ctx)
			select {
			case <-ctx.Done():
				return
			case <-time.After(cfg.StalePVDiscoveryInterval):
			}
		}
	}()
	c.startCleanupTimersIfNeeded()
	go func() {
		<-ctx.Done()
		c.queue.ShutDown()
		wg.Wait()
		broadcaster.Shutdown()
		factory.Shutdown()
		close(c.done)
	}()
	return c, nil
}

// Done is closed once the controller has stopped, after its context ended.
func (c *NodeCleanup) Done() <-chan struct{} { return c.done }

// Deleted lists what the controller deleted, in order: "PersistentVolumeClaim ns/name" and
// "PersistentVolume name".
func (c *NodeCleanup) Deleted() []string {
	c.deletedMu.Lock()
	defer c.deletedMu.Unlock()
	return slices.Clone(c.deleted)
}

func (c *NodeCleanup) record(what string) {
	c.deletedMu.Lock()
	defer c.deletedMu.Unlock()
	c.deleted = append(c.deleted, what)
}

// localNodeNames is upstream's GetLocalPersistentVolumeNodeNames: the union over the terms of
// the intersection of each term's kubernetes.io/hostname In values; nil without node affinity.
func localNodeNames(pv *corev1.PersistentVolume) []string {
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return nil
	}
	var out []string
	for _, term := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
		var nodes []string
		first := true
		for _, e := range term.MatchExpressions {
			if e.Key != corev1.LabelHostname || e.Operator != corev1.NodeSelectorOpIn {
				continue
			}
			if first {
				nodes, first = slices.Clone(e.Values), false
				continue
			}
			nodes = slices.DeleteFunc(nodes, func(n string) bool { return !slices.Contains(e.Values, n) })
		}
		for _, n := range nodes {
			if !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
	}
	slices.Sort(out)
	if out == nil {
		out = []string{} // upstream's empty set: no node to exist, so none does
	}
	return out
}

// anyNodeExists is upstream's AnyNodeExists: a Node of one of the names, or labelled
// kubernetes.io/hostname with one, exists (or the lister fails, which counts as existing).
func (c *NodeCleanup) anyNodeExists(names []string) bool {
	for _, name := range names {
		_, err := c.nodes.Get(name)
		if err == nil || !apierrors.IsNotFound(err) {
			return true
		}
		req, err := labels.NewRequirement(nodeLabelKey, selection.Equals, []string{name})
		if err != nil {
			return true
		}
		nodes, err := c.nodes.List(labels.NewSelector().Add(*req))
		if err != nil || len(nodes) > 0 {
			return true
		}
	}
	return false
}

// isLocalOfClasses is upstream's IsLocalPVWithStorageClass.
func (c *NodeCleanup) isLocalOfClasses(pv *corev1.PersistentVolume) bool {
	return pv.Spec.Local != nil && slices.Contains(c.cfg.StorageClassNames, pv.Spec.StorageClassName)
}

// startCleanupTimersIfNeeded queues, after the delay, every local volume of the classes with a
// claimRef whose nodes are all gone, with a warning on the claim it names.
func (c *NodeCleanup) startCleanupTimersIfNeeded() {
	pvs, err := c.pvs.List(labels.Everything())
	if err != nil {
		c.cfg.OnError(fmt.Errorf("listing volumes: %w", err))
		return
	}
	for _, pv := range pvs {
		if !c.isLocalOfClasses(pv) {
			continue
		}
		names := localNodeNames(pv)
		if names == nil || pv.Spec.ClaimRef == nil || c.anyNodeExists(names) {
			continue
		}
		c.recorder.Event(pv.Spec.ClaimRef, corev1.EventTypeWarning, "ReferencedNodeDeleted",
			fmt.Sprintf("PVC is tied to a deleted Node. PVC will be cleaned up in %s if the Node doesn't come back", c.cfg.PVCDeletionDelay))
		c.queue.AddAfter(pv.Name, c.cfg.PVCDeletionDelay)
	}
}

func (c *NodeCleanup) processNextWorkItem(ctx context.Context) bool {
	name, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(name)
	if err := c.syncHandler(ctx, name); err != nil {
		c.cfg.OnError(fmt.Errorf("syncing %s: %w", name, err))
		c.queue.AddRateLimited(name)
		return true
	}
	c.queue.Forget(name)
	return true
}

// syncHandler deletes the claim bound to the volume, if the volume's nodes are still gone and the
// claim is still the one its claimRef names, with its uid as a precondition.
func (c *NodeCleanup) syncHandler(ctx context.Context, pvName string) error {
	pv, err := c.pvs.Get(pvName)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	names := localNodeNames(pv)
	if names == nil || c.anyNodeExists(names) {
		return nil
	}
	ref := pv.Spec.ClaimRef
	if ref == nil {
		return nil
	}
	pvc, err := c.pvcs.PersistentVolumeClaims(ref.Namespace).Get(ref.Name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if pvc.Spec.VolumeName != pv.Name || pvc.UID != ref.UID {
		return nil // the bond was severed: not the claim the volume was bound to
	}
	err = c.client.CoreV1().PersistentVolumeClaims(pvc.Namespace).Delete(ctx, pvc.Name,
		metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pvc.UID}})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("deleting claim %s/%s: %w", pvc.Namespace, pvc.Name, err)
	}
	c.record("PersistentVolumeClaim " + pvc.Namespace + "/" + pvc.Name)
	return nil
}

// deletePVs is one pass of upstream's Deleter: every local volume of the classes whose nodes are
// all gone and that is Available, or Released with reclaim policy Delete, is deleted.
func (c *NodeCleanup) deletePVs(ctx context.Context) {
	pvs, err := c.pvs.List(labels.Everything())
	if err != nil {
		c.cfg.OnError(fmt.Errorf("listing volumes: %w", err))
		return
	}
	var errs []error
	for _, pv := range pvs {
		if !c.isLocalOfClasses(pv) {
			continue
		}
		names := localNodeNames(pv)
		if names == nil || c.anyNodeExists(names) {
			continue
		}
		released := pv.Status.Phase == corev1.VolumeReleased && pv.Spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimDelete
		if !released && pv.Status.Phase != corev1.VolumeAvailable {
			continue
		}
		err := c.client.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			errs = append(errs, fmt.Errorf("deleting volume %s: %w", pv.Name, err))
		default:
			// Upstream deletes again at every pass until the volume is gone (its TODO): a
			// volume held by its pv-protection finalizer is deleted again, which changes nothing.
			if pv.DeletionTimestamp == nil {
				c.record("PersistentVolume " + pv.Name)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		c.cfg.OnError(err)
	}
}
