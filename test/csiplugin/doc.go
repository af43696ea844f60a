// Package csiplugin is a small CSI plugin for tests: the Identity and Controller services over a
// unix socket, with volumes and snapshots kept as directories under a root directory. It stands
// in for a storage backend behind the real CSI sidecars (external-provisioner, external-resizer,
// csi-snapshotter), which are what write to the Kubernetes API; the plugin itself never talks to
// the API.
//
// What it models:
//   - topology: every volume is accessible from exactly one node, named by the segment
//     {TopologyKey: node}. CreateVolume takes the first preferred segment that names a node
//     (else the first requisite one), as the CSI spec asks a plugin to try preferred first;
//   - capacity: the size a volume was created or expanded to is kept in a small metadata file
//     beside its data directory; nothing enforces it on the data;
//   - expansion: ControllerExpandVolume records the new size and, by default, needs no node
//     step (a directory, like an NFS share, has no filesystem of its own to grow); a class
//     parameter (ParamNodeExpansionRequired) asks for one, as a block-backed filesystem would;
//   - snapshots and clones, as a real plugin offers them (CREATE_DELETE_SNAPSHOT,
//     LIST_SNAPSHOTS, CLONE_VOLUME): CreateSnapshot copies the volume's data directory into a
//     snapshot directory under <root>/.snapshots, ready at once; CreateVolume with a content
//     source (a snapshot, or a volume to clone) starts the new volume as a copy of the source's
//     data, at least the source's size, and answers NOT_FOUND for a source that does not exist;
//     every copy is whole, so a source, a snapshot and a restored volume can go in any order;
//   - idempotency as the spec requires: CreateVolume of an existing name returns the volume
//     when it is compatible (same size range, parameters and content source) and ALREADY_EXISTS
//     when not, CreateSnapshot likewise for its source, DeleteVolume and DeleteSnapshot of an
//     unknown id succeed, expanding to a size the volume already has returns it.
//
// There is no Node service: nothing mounts these volumes (no kubelet runs in the tests), and a
// plugin that does not advertise PUBLISH_UNPUBLISH_VOLUME needs no attacher.
//
// Not linked into the shipped binary: only test packages import it.
package csiplugin
