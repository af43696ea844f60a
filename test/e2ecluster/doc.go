// Package e2ecluster runs pvguard beside the real components of the storage path on one real
// control plane (test/cluster): etcd, kube-apiserver, kube-scheduler and kube-controller-manager
// v1.37.2 from bin/, Node objects, and `pvguard serve` installed as the Helm chart installs it
// (its ServiceAccount, RBAC, default policy config and webhook configurations). Nothing that can
// run here is impersonated: every write comes from the component that makes it in a cluster,
// and pvguard's webhooks judge them all.
//
// Each flow runs twice: with pvguard's binder (kube-controller-manager without its
// persistentvolume-binder-controller, pvguard --binder=active) and with kube-controller-manager's
// (pvguard --binder=off, webhooks on). Both runs must end in the same state: the same counts of
// phases, pairs, annotations, finalizers and claim conditions, the same event reasons (but for
// the one documented difference, see equivalentReasons), nothing left Terminating (every flow
// deletes its namespace and volumes and waits for them to go) and no write refused by pvguard.
//
// Flows (issue 15, item 3):
//
//   - a (TestLocalStaticProvisionerCycle): the local static provisioner (test/localstatic, its
//     stand-in, as its own ServiceAccount with its chart's RBAC) discovers tmpfs mount points
//     under one directory per fake node; pods are scheduled, the scheduler binds the volumes it
//     chose and the binder completes; pods and claims deleted, the volumes are Released,
//     cleaned and deleted by the provisioner and discovered again, Available and empty. Needs
//     root (mount). TestStaticLocalVolumes adds volumes an administrator creates directly:
//     Retain (Released), Delete without a provisioner (Failed, VolumeFailedDelete), Delete with
//     the provisioner's annotation (Released, left to it).
//   - b, c: dynamic provisioning through the CSI external-provisioner, and a class with static
//     volumes and a provisioner. TODO(issue 15): once test/csiplugin and test/csisidecars (branch
//     csi15) are merged, start the plugin and the sidecars (cluster.StartProcess runs a binary
//     with its log in the cluster's log directory; CSINode objects for the fake nodes) and add
//     the flows beside these.
//   - d (TestRaceForFewerVolumes): many pods at once for fewer static volumes; its provisioner
//     fallback waits for the sidecars too.
//   - e (TestProtectionAndPreBound): protection finalizers and pre-bound claims and volumes.
//     TODO(issue 15): expansion through kube-controller-manager's expand controller and the
//     external-resizer, with the sidecars.
//   - TestBindLatency measures pod created -> claim Bound for docs/benchmarks.md in both modes.
//
// Run: go test -count=1 -v ./test/e2ecluster/ (KUBEBUILDER_ASSETS or bin/ from `make tools`).
// Every component logs to a file in one directory, named in failure messages and kept when a
// test fails or PVGUARD_CLUSTER_KEEP_LOGS is set; PVGUARD_CLUSTER_KEEP_OBJECTS leaves a failed
// flow's objects in place (the control plane still stops at the end).
package e2ecluster
