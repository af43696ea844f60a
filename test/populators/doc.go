// Package populators holds test-only STAND-INS for the components that hand a populated volume
// from a temporary claim to its target claim: lib-volume-populator (the machinery every volume
// populator, hello-populator among them, is built on), KubeVirt's Containerized Data Importer
// (CDI) import populator and host-assisted clone, and Velero's data-mover restore. None of them
// is served by the Go module proxy on the machines pvguard is built on, so the end-to-end suites
// cannot build the real ones; each stand-in makes, in the same order, the writes its upstream
// source makes to the API (same verbs, same patch types, same fields), from its own
// ServiceAccount bound to its upstream RBAC and reached with a TokenRequest token, so the
// apiserver and pvguard's webhooks see exactly the identity a real install has. Every warning the
// apiserver relays to a stand-in, and every error it is given, is recorded for the tests to
// assert on (Conn).
//
// Sources followed (read at these commits):
//
//   - lib-volume-populator v3.2.0-17-gbe234bc9 (be234bc9), populator-machinery/controller.go:
//     syncPvc, ensureFinalizer, MakePopulatePodSpec; example/hello-populator (deploy.yaml's RBAC,
//     crd.yaml). See VolumePopulator.
//   - containerized-data-importer v1.66.0-6-gc07cdb6f (c07cdb6f): pkg/controller/populators
//     (populator-base.go createPVCPrime, reconcileCleanup, updatePVCPrimeNameAnnotation,
//     updatePVCWithPVCPrimeAnnotations; import-populator.go reconcileTargetPVC; util.go
//     PVCPrimeName), pkg/controller/import-controller.go (updatePvcFromPod, createImporterPod's
//     node name), pkg/controller/clone (planner.go createDesiredClaim, host-clone.go createClaim,
//     rebind.go), pkg/controller/common/util.go Rebind and SetNodeNameIfPopulator,
//     pkg/operator/resources/cluster/controller.go getControllerClusterPolicyRules. See CDI.
//   - velero main at d30d389b (May 2026, after v1.18.1): pkg/exposer/generic_restore.go
//     (Expose, createRestorePVC, createRestorePod's node selector, RebindVolume),
//     pkg/util/kube/pvc_pv.go (SetPVReclaimPolicy, RebindPVC, ResetPVBinding, WaitPVBound,
//     EnsureDeletePVC), pkg/restore/actions/csi/pvc_action.go restoreFromDataUploadResult (the
//     target claim's velero.io/dynamic-pv-restore selector), pkg/install/resources.go (the velero
//     ServiceAccount bound to cluster-admin). See Velero.
//
// No kubelet runs in the test cluster; Kubelet stands in for the one thing the flows need from
// it: a pod bound to a node is run (the test's work function does the pod's job) and its status
// written Succeeded, and a running pod being deleted is confirmed gone, as the kubelet's status
// manager does.
//
// Nothing in the pvguard binary imports this package.
package populators
