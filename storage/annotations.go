package storage

// Well-known annotation keys of the storage controllers, the scheduler and external provisioners.
const (
	// AnnBindCompleted on a claim says that a binder completed its binding to spec.volumeName.
	AnnBindCompleted = "pv.kubernetes.io/bind-completed"
	// AnnBoundByController on a volume or claim says that a binder, not a user, made its half of
	// the binding.
	AnnBoundByController = "pv.kubernetes.io/bound-by-controller"
	// AnnProvisionedBy on a volume names the provisioner that made it.
	AnnProvisionedBy = "pv.kubernetes.io/provisioned-by"
	// AnnSelectedNode on a claim names the node the scheduler chose for its first consumer.
	AnnSelectedNode = "volume.kubernetes.io/selected-node"
	// AnnBetaStorageClass is the deprecated class annotation, which wins over
	// spec.storageClassName wherever it is set (VolumeClass, ClaimClass).
	AnnBetaStorageClass = "volume.beta.kubernetes.io/storage-class"
	// AnnDefaultClass and AnnBetaDefaultClass set to "true" mark a StorageClass as the cluster
	// default (IsDefaultClass).
	AnnDefaultClass     = "storageclass.kubernetes.io/is-default-class"
	AnnBetaDefaultClass = "storageclass.beta.kubernetes.io/is-default-class"
	// AnnStorageProvisioner and AnnBetaStorageProvisioner on a claim name the provisioner a
	// binder asks to provision a volume for it.
	AnnStorageProvisioner     = "volume.kubernetes.io/storage-provisioner"
	AnnBetaStorageProvisioner = "volume.beta.kubernetes.io/storage-provisioner"

	// AnnReuseWhenReleased set to "true" on a Released volume with reclaim policy Retain has
	// pvguard's binder make it Available again once a live read confirms its claim is gone; the
	// data stays on the volume. PVG023's hint offers it for a volume Released too long.
	AnnReuseWhenReleased = "pvguard.io/reuse-when-released"
)

// NoProvisioner is the provisioner of a StorageClass whose volumes are made by hand (local
// volumes): no provisioner runs for it.
const NoProvisioner = "kubernetes.io/no-provisioner"

// Finalizers that keep a volume or claim, and the storage behind it, alive while it is in use.
const (
	// FinalizerPVProtection keeps a volume while a claim is bound to it (kube-controller-manager's
	// pv-protection controller).
	FinalizerPVProtection = "kubernetes.io/pv-protection"
	// FinalizerPVCProtection keeps a claim while a pod uses it (the pvc-protection controller).
	FinalizerPVCProtection = "kubernetes.io/pvc-protection"
	// FinalizerPVController keeps a volume that an in-tree plugin provisioned with reclaim policy
	// Delete until its storage is deleted (the PersistentVolume controller).
	FinalizerPVController = "kubernetes.io/pv-controller"
	// FinalizerExternalProvisioner is the finalizer CSI external provisioners put on the volumes
	// they make, until they have deleted the storage.
	FinalizerExternalProvisioner = "external-provisioner.volume.kubernetes.io/finalizer"
)
