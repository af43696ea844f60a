// Package e2ecluster runs pvguard beside the real components of the storage path on one real
// control plane (test/cluster): etcd, kube-apiserver, kube-scheduler and kube-controller-manager
// v1.37.2 from bin/, Node objects, and `pvguard serve` installed as the Helm chart installs it
// (its ServiceAccount, RBAC, default policy config and webhook configurations, whose components
// list names the storage stack the suite runs as ServiceAccounts, as an installer lists it). Nothing
// that can run here is impersonated: every write comes from the component that makes it in a
// cluster, and pvguard's webhooks judge them all.
//
// Each flow runs twice: with pvguard's binder (kube-controller-manager without its
// persistentvolume-binder-controller, pvguard --binder=active) and with kube-controller-manager's
// (pvguard --binder=off, webhooks on). Both runs must end in the same state: the same counts of
// phases, pairs, annotations, finalizers and claim conditions, the same event reasons (but for
// the one documented difference, see equivalentReasons), nothing left Terminating (every flow
// deletes its namespace and volumes and waits for them to go) and no write refused by pvguard.
//
// Every flow also checks that pvguard refused nothing and that no component (kube-scheduler,
// kube-controller-manager, the sidecars, the snapshot-controller) was sent a warning or a
// denial during it.
//
// Flows:
//
//   - a (TestLocalStaticProvisionerCycle): the local static provisioner (test/localstatic, its
//     stand-in, as its own ServiceAccount with its chart's RBAC) discovers tmpfs mount points
//     under one directory per fake node; pods are scheduled, the scheduler binds the volumes it
//     chose and the binder completes; pods and claims deleted, the volumes are Released,
//     cleaned and deleted by the provisioner and discovered again, Available and empty. Needs
//     root (mount). TestStaticLocalVolumes adds volumes an administrator creates directly:
//     Retain (Released), Delete without a provisioner (Failed, VolumeFailedDelete), Delete with
//     the provisioner's annotation (Released, left to it).
//   - b (TestDynamicProvisioning): claims of an Immediate and of a WaitForFirstConsumer class
//     of our CSI plugin, provisioned by the real external-provisioner (on the node the scheduler
//     names in selected-node), bound, expanded by the real external-resizer (flow e's
//     expansion), deleted by the provisioner with its finalizer: nothing stays, nothing leaks.
//   - c (TestStaticBesideProvisioner): a class with static volumes and a provisioner; a static
//     volume that appears on a node while a claim is being provisioned for there (CreateVolume
//     held open) is left alone; no static volume of another node is ever bound; one volume per
//     claim at the end, no disk without its PersistentVolume.
//   - d (TestRaceForFewerVolumes, TestRaceWithProvisionerFallback): many pods at once for fewer
//     static volumes, without a provisioner (the losers stay unschedulable) and with one (they
//     are provisioned for); nothing claimed twice, no 409 lost by pvguard's binder.
//   - e (TestProtectionAndPreBound): protection finalizers and pre-bound claims and volumes;
//     expansion is in b.
//   - g (TestSnapshotRestoreAndClone): with the real snapshot-controller and csi-snapshotter
//     (Options.Snapshots), a snapshot of a provisioned claim, a claim restored from it and a
//     clone of the claim, each with its source's data; the source-protection finalizers of the
//     snapshot-controller and of the provisioner come and go; everything deleted, no snapshot
//     or volume left in the backend.
//   - Hand-offs of a populated volume to the claim it was filled for, by stand-ins of the
//     components that make them (test/populators, each as its own ServiceAccount with its
//     upstream RBAC): a lib-volume-populator populator (TestVolumePopulatorHandOff), KubeVirt
//     CDI's import and cross-namespace clone (TestCDIImportAndCrossNamespaceClone) and Velero's
//     data-mover restore (TestVeleroDataMoverRestore, with the PVG011 exemption it needs;
//     TestVeleroRestoreDefaultInstall without it); each target ends Bound to the volume holding
//     its data, the stand-ins are sent no warning and no refusal. TestForgedHandOffRefused:
//     the same moves made by a tenant without the state of a hand-off are refused by PVG002.
//   - The identities (TestControllersActAsServiceAccounts).
//   - pvguard down (TestComponentsProceedWithPVGuardDown): every replica stopped, its webhooks
//     still registered, in ModeUpstream: a static bind, a WaitForFirstConsumer provisioning, an
//     expansion and a deletion, each a component's work, take what they take with pvguard up;
//     a person's destructive writes are refused by the admission policies and a person's other
//     writes, and a tenant ServiceAccount's claim, by the people's webhooks failing closed; a
//     component's claim is admitted, and a component's misbinding is admitted and
//     reported by the audit once pvguard is back. pvguard hung (TestHungPVGuard): the webhooks
//     pointed at a listener that never answers; a component's write is admitted after the
//     timeout, a person's refused after it, a destructive write refused by a policy at once.
//   - TestBindLatency measures pod created -> claim Bound for docs/benchmarks.md in both modes.
//
// Run: go test -count=1 -v ./test/e2ecluster/ (KUBEBUILDER_ASSETS or bin/ from `make tools`).
// Every component logs to a file in one directory, named in failure messages and kept when a
// test fails or PVGUARD_CLUSTER_KEEP_LOGS is set; PVGUARD_CLUSTER_KEEP_OBJECTS leaves a failed
// flow's objects in place (the control plane still stops at the end).
package e2ecluster
