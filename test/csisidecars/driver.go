package csisidecars

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Driver is what a CSI driver's node plugins would publish for it.
type Driver struct {
	// Name is the driver name (the plugin's GetPluginInfo).
	Name string
	// TopologyKey is the plugin's topology key; each node's segment is {TopologyKey: node name}.
	TopologyKey string
	// Nodes are the Node objects the driver runs on; they must exist.
	Nodes []string
}

// RegisterDriver creates the CSIDriver object and publishes the driver on each node as the
// kubelet does when the node-driver-registrar registers it (NodeGetInfo answering the node's
// name as its id and {TopologyKey: name} as its topology): the Node gets the topology label,
// and its CSINode (created if missing, owned by the Node as the kubelet makes it) lists the
// driver with its topology key. The external-provisioner reads exactly these: CSINode topology
// keys and Node labels are how it builds CreateVolume's accessibility requirements.
func RegisterDriver(ctx context.Context, c client.Client, d Driver) error {
	if d.Name == "" || d.TopologyKey == "" {
		return fmt.Errorf("registering CSI driver %q: a name and a topology key are required", d.Name)
	}
	driver := &storagev1.CSIDriver{
		ObjectMeta: metav1.ObjectMeta{Name: d.Name},
		Spec: storagev1.CSIDriverSpec{
			// The plugin has no PUBLISH_UNPUBLISH_VOLUME: nothing attaches its volumes.
			AttachRequired:       ptr.To(false),
			PodInfoOnMount:       ptr.To(false),
			VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent},
		},
	}
	if err := c.Create(ctx, driver); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating CSIDriver %s: %w", d.Name, err)
	}
	for _, name := range d.Nodes {
		node := &corev1.Node{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
			return fmt.Errorf("registering CSI driver %s on node %s: %w", d.Name, name, err)
		}
		if node.Labels[d.TopologyKey] != name {
			base := node.DeepCopy()
			if node.Labels == nil {
				node.Labels = map[string]string{}
			}
			node.Labels[d.TopologyKey] = name
			if err := c.Patch(ctx, node, client.MergeFrom(base)); err != nil {
				return fmt.Errorf("labelling node %s with %s: %w", name, d.TopologyKey, err)
			}
		}
		if err := publishOnCSINode(ctx, c, node, d); err != nil {
			return err
		}
	}
	return nil
}

func publishOnCSINode(ctx context.Context, c client.Client, node *corev1.Node, d Driver) error {
	entry := storagev1.CSINodeDriver{Name: d.Name, NodeID: node.Name, TopologyKeys: []string{d.TopologyKey}}
	csiNode := &storagev1.CSINode{}
	err := c.Get(ctx, client.ObjectKey{Name: node.Name}, csiNode)
	if apierrors.IsNotFound(err) {
		csiNode = &storagev1.CSINode{
			ObjectMeta: metav1.ObjectMeta{
				Name: node.Name,
				OwnerReferences: []metav1.OwnerReference{{
					APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID,
				}},
			},
			Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{entry}},
		}
		if err := c.Create(ctx, csiNode); err != nil {
			return fmt.Errorf("creating CSINode %s: %w", node.Name, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading CSINode %s: %w", node.Name, err)
	}
	drivers := csiNode.Spec.Drivers[:0:0]
	for _, dr := range csiNode.Spec.Drivers {
		if dr.Name != d.Name {
			drivers = append(drivers, dr)
		}
	}
	csiNode.Spec.Drivers = append(drivers, entry)
	if err := c.Update(ctx, csiNode); err != nil {
		return fmt.Errorf("publishing driver %s on CSINode %s: %w", d.Name, node.Name, err)
	}
	return nil
}
