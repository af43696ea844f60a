// Package csisidecars runs the real CSI sidecars that `make tools` builds into bin/ (the
// external-provisioner, the external-resizer and the csi-snapshotter, at the versions
// hack/tools/pins names) as processes beside a test control plane, the way a CSI driver's
// Deployment runs them, and the snapshot-controller of the same external-snapshotter release
// as a distribution runs it (in kube-system, against the VolumeSnapshot CRDs of that release's
// client module, see SnapshotCRDs):
//
//   - each as its own ServiceAccount, bound to the RBAC of the component's own manifest
//     (deploy/kubernetes/rbac.yaml, or external-snapshotter's per-component files), read from
//     the pinned module's source (so the permissions follow the pin) with only the namespace
//     changed, as that file's comments ask; the
//     ServiceAccount is reached with a token minted through the TokenRequest API, so the
//     apiserver, and pvguard's webhooks, see exactly the identity a real install has;
//   - against a CSI plugin's unix socket (see test/csiplugin);
//   - with what a kubelet and the node-driver-registrar would have published for the driver:
//     the CSIDriver object, a CSINode per node listing the driver with its topology key, and
//     that key as a label on each Node.
//
// Their logs go to a file each, for failure messages and for the checks that the apiserver sent
// them no warning and no denial (client-go logs every warning it receives). Not linked into the
// shipped binary: only test packages import it.
package csisidecars
