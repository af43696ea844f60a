// Package localstatic is a test-only STAND-IN for the local static provisioner
// (kubernetes-sigs/sig-storage-local-static-provisioner, the local-volume-provisioner DaemonSet).
// That project is not served by the Go module proxy on the machines pvguard is built on, so the
// end-to-end suites cannot build the real one; this package reproduces the writes it makes to the
// API, modelled on its source code at v2.9.0 (tag commit 30b98c3c; its pkg/ is unchanged up to
// 6cbe253c of August 2026, the snapshot read):
//
//   - pkg/controller/controller.go: one provisioner per node, named
//     "local-volume-provisioner-<node>-<node uid>" ("local-volume-provisioner-<node>" with
//     useNodeNameOnly); its loop runs the deleter, then discovery, then sleeps the discovery period
//     (10s by default, cmd/local-volume-provisioner).
//   - pkg/populator/populator.go and pkg/cache/cache.go: a PV informer keeps a cache of the PVs
//     whose pv.kubernetes.io/provisioned-by is this provisioner's name; only those are ever
//     cleaned, deleted or counted as "already discovered".
//   - pkg/discovery/discovery.go: for each class of the storage class map, every entry of its
//     directory that matches the name pattern and is a mount point (listed in /proc/mounts) and not
//     yet in the cache becomes a PV named "local-pv-" + hex FNV-1a-32(file name, node name, class),
//     with the provisioned-by annotation, the configured labels (node labels copied by
//     nodeLabelsForPV, plus labelsForPV), node affinity "kubernetes.io/hostname In [the node's
//     kubernetes.io/hostname label]" (plus the class's extra selector terms), the filesystem's size
//     rounded down to whole GiB or MiB when there are at least ten, the class's access mode and
//     volume mode, and reclaim policy and mount options read from the StorageClass (Delete when the
//     class has none; a class whose policy is neither Retain nor Delete discovers nothing).
//   - pkg/deleter/deleter.go and proctable.go: a cached PV that is Released, not being deleted and
//     has reclaim policy Delete gets its directory's contents removed in the background; the next
//     pass, seeing the cleaning succeeded, deletes the PV. Retain is left alone, Recycle draws a
//     VolumeUnsupportedReclaimPolicy warning, failures a VolumeFailedDelete warning. Once the
//     deletion reaches the cache, the next discovery creates the PV again under the same name.
//   - pkg/common/common.go: the PV's shape (CreateLocalPVSpec) and the configuration defaults.
//   - pkg/util/volume_util*.go: what counts as a filesystem volume, its capacity (statfs blocks
//     times block size) and how its contents are deleted.
//
// Beside the provisioner, StartNodeCleanup runs a stand-in of its node-cleanup controller
// (cmd/node-cleanup: pkg/node-cleanup/controller/controller.go and deleter/deleter.go), which
// deletes the claims of a deleted node's local volumes (with a uid precondition) and then the
// volumes, once Available or Released with reclaim policy Delete (nodecleanup.go says how).
//
// What it leaves out, on purpose: block devices (the cleaning scripts and Jobs), the alpha
// node-affinity annotation (the apiserver refuses local volumes without spec.nodeAffinity), the
// readiness endpoint and startup-taint removal, metrics, and reloading a changed configuration.
// The one forced difference: the fake nodes share this machine's filesystem, so each node has its
// own discovery directory where upstream has one hostDir path on every node, and the stand-in runs
// on the host, so hostDir and mountDir are the same path.
//
// Nothing in the pvguard binary imports this package.
package localstatic
