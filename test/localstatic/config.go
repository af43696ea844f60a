package localstatic

import (
	"fmt"
	"path/filepath"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
)

// Config is what upstream reads from its ConfigMap (common.ProvisionerConfiguration), restricted
// to what filesystem volumes use, plus the fake nodes the provisioners run for.
type Config struct {
	// Nodes are the fake nodes. Each gets its own provisioner, as upstream's DaemonSet runs one
	// pod per node; each Node object must exist and carry the kubernetes.io/hostname label.
	Nodes []Node
	// Classes is the storageClassMap: how the volumes of each StorageClass are discovered.
	Classes map[string]ClassConfig
	// NodeLabelsForPV names node labels copied onto each PV (nodeLabelsForPV).
	NodeLabelsForPV []string
	// LabelsForPV are added to each PV (labelsForPV).
	LabelsForPV map[string]string
	// UseNodeNameOnly names the provisioner after the node's name only, not name and UID.
	UseNodeNameOnly bool
	// SetPVOwnerRef makes each PV a dependent of its Node.
	SetPVOwnerRef bool
	// DiscoveryPeriod is the sleep between two passes (upstream --discovery-period, 10s).
	DiscoveryPeriod time.Duration
	// OnError, when set, is called with every failed pass of discovery or deletion (upstream
	// only logs them and records events), so a suite can fail on them. As upstream, discovery
	// trusts its informer-fed cache: a pass that runs before the informer has seen the PVs the
	// previous pass created fails with AlreadyExists for them, harmlessly.
	OnError func(node string, err error)

	// hooks replace the filesystem probes and the event recorder in unit tests.
	hooks *hooks
}

// Node is one fake node and its discovery directories.
type Node struct {
	// Name is the Node object's name.
	Name string
	// Dirs maps a class of Config.Classes to the directory whose mount points become that
	// class's volumes on this node. It is upstream's hostDir and mountDir at once: the stand-in
	// runs on the host. Must be absolute: it is written into the PV's spec.local.path.
	Dirs map[string]string
}

// ClassConfig is upstream's MountConfig without the directories (see Node.Dirs) and the block
// cleaner.
type ClassConfig struct {
	// VolumeMode of the PVs; Filesystem when empty. Block is refused: the stand-in has no block
	// devices.
	VolumeMode corev1.PersistentVolumeMode
	// AccessMode of the PVs; ReadWriteOnce when empty.
	AccessMode corev1.PersistentVolumeAccessMode
	// FsType is copied into spec.local.fsType when set.
	FsType string
	// NamePattern is a comma-separated list of filepath.Match patterns; "*" when empty.
	NamePattern string
	// Selector terms are appended to the hostname term of each PV's node affinity.
	Selector []corev1.NodeSelectorTerm
}

// hooks are the seams the unit tests use.
type hooks struct {
	vol      volumeUtil
	recorder func(provisionerName string) record.EventRecorder
}

// Upstream's defaults (cmd/local-volume-provisioner and common.ConfigMapDataToVolumeConfig).
const (
	defaultDiscoveryPeriod = 10 * time.Second
	defaultNamePattern     = "*"
)

// withDefaults validates c and fills upstream's defaults, in one place.
func (c Config) withDefaults() (Config, error) {
	if len(c.Nodes) == 0 {
		return c, fmt.Errorf("localstatic: Config.Nodes is empty")
	}
	if c.DiscoveryPeriod <= 0 {
		c.DiscoveryPeriod = defaultDiscoveryPeriod
	}
	classes := make(map[string]ClassConfig, len(c.Classes))
	for name, cc := range c.Classes {
		if cc.VolumeMode == "" {
			cc.VolumeMode = corev1.PersistentVolumeFilesystem
		}
		switch cc.VolumeMode {
		case corev1.PersistentVolumeFilesystem:
		case corev1.PersistentVolumeBlock:
			return c, fmt.Errorf("localstatic: Classes[%q].VolumeMode: Block volumes are not modelled by the stand-in", name)
		default:
			return c, fmt.Errorf("localstatic: Classes[%q].VolumeMode: unsupported volume mode %q", name, cc.VolumeMode)
		}
		if cc.AccessMode == "" {
			cc.AccessMode = corev1.ReadWriteOnce
		}
		if cc.NamePattern == "" {
			cc.NamePattern = defaultNamePattern
		}
		classes[name] = cc
	}
	c.Classes = classes
	seen := map[string]bool{}
	for i, n := range c.Nodes {
		if n.Name == "" {
			return c, fmt.Errorf("localstatic: Config.Nodes[%d].Name is empty", i)
		}
		if seen[n.Name] {
			return c, fmt.Errorf("localstatic: Config.Nodes[%d].Name %q appears twice", i, n.Name)
		}
		seen[n.Name] = true
		if len(n.Dirs) == 0 {
			return c, fmt.Errorf("localstatic: Config.Nodes[%d] (%s).Dirs is empty", i, n.Name)
		}
		for _, class := range sortedKeys(n.Dirs) {
			if _, ok := classes[class]; !ok {
				return c, fmt.Errorf("localstatic: Config.Nodes[%d] (%s).Dirs[%q]: no such class in Config.Classes", i, n.Name, class)
			}
			if !filepath.IsAbs(n.Dirs[class]) {
				return c, fmt.Errorf("localstatic: Config.Nodes[%d] (%s).Dirs[%q]: %q is not an absolute path", i, n.Name, class, n.Dirs[class])
			}
		}
	}
	return c, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
