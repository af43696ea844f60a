package sequence

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/pvguard/pvguard/policy"
)

// The upstream storage flows, each a named sequence of writes by the identities that make them,
// from a starting state. Every write must be admitted without a deny or a warning on a default
// install (policy.DefaultConfig: no controllers: configured, so the CSI sidecars are unknown
// identities). What each controller writes was read in:
//
//   - kubernetes pkg/controller/volume/persistentvolume/pv_controller.go: syncClaim,
//     syncUnboundClaim, syncBoundClaim, syncVolume, bind (bindVolumeToClaim: PV Update with the
//     claim's full reference and bound-by-controller unless the volume was already bound to the
//     claim; updateVolumePhase: PV UpdateStatus; bindClaimToVolume: PVC Update with volumeName,
//     bound-by-controller when volumeName was empty, bind-completed; updateClaimStatus: PVC
//     UpdateStatus with phase, access modes and capacity of the volume), unbindVolume (PV Update:
//     claimRef cleared and bound-by-controller removed if the controller bound it, else only the
//     uid dropped; then UpdateStatus Available), setClaimProvisioner (PVC Update with
//     volume.kubernetes.io/storage-provisioner and its beta twin);
//   - kubernetes pkg/scheduler/framework/plugins/volumebinding/binder.go: bindAPIUpdate (PV Update
//     of a volume with claimRef and bound-by-controller for a static bind, PVC Update with
//     volume.kubernetes.io/selected-node to provision);
//   - kubernetes-sigs/sig-storage-lib-external-provisioner controller/controller.go:
//     provisionClaimOperation (PV Create with the claim's reference, provisioned-by and its
//     finalizer, whatever became of the claim meanwhile), rescheduleProvisioning (PVC Update
//     dropping selected-node), deleteVolumeOperation (PV Delete, then a patch removing its
//     finalizer), handleProtectionFinalizer (adds its finalizer to a Bound Delete volume, removes
//     it when the reclaim policy is no longer Delete);
//   - kubernetes pkg/controller/volume/pvprotection, pvcprotection (Update adding the finalizer to
//     an object without it; Update removing it from an object being deleted and not in use: a
//     volume not Bound, a claim no pod uses);
//   - kubernetes-csi/external-resizer (patch of the PV's capacity, patches of the PVC's status),
//     the expand controller (PVC annotation volume.kubernetes.io/storage-resizer), the kubelet
//     (PVC status capacity after a file system resize).

// Flow is one upstream flow.
type Flow struct {
	Name  string
	Start func() *World
	Run   func(s *Script)
}

// Script runs a flow's writes one by one against the engine, keeping the world, each outcome,
// the oracle's violations and the writes that could not be made (a flow's write that would
// change nothing is a bug in the flow).
type Script struct {
	E          *policy.Engine
	W          *World
	Outcomes   []Outcome
	Violations []string
	Broken     []string
}

// NewScript starts a flow.
func NewScript(e *policy.Engine, w *World) *Script { return &Script{E: e, W: w} }

// Do applies one step.
func (s *Script) Do(st Step, ok bool) {
	if !ok {
		s.Broken = append(s.Broken, fmt.Sprintf("write %d (%s) changes nothing or names a missing object", len(s.Outcomes)+1, st.What))
		return
	}
	next, out := Apply(s.E, s.W, st)
	s.Outcomes = append(s.Outcomes, out)
	if out.Result == Admitted && st.Verb != Delete {
		for _, v := range Check(s.W, next, st) {
			s.Violations = append(s.Violations, fmt.Sprintf("after %s: %s", st, v))
		}
	}
	s.W = next
}

// PV, PVC: updates built from the current object.
func (s *Script) PV(who Identity, verb Verb, name, what string, mutate func(*corev1.PersistentVolume)) {
	st, ok := PVUpdate(s.W, who, verb, name, what, mutate)
	st.What = what
	s.Do(st, ok)
}

func (s *Script) PVC(who Identity, verb Verb, namespace, name, what string, mutate func(*corev1.PersistentVolumeClaim)) {
	st, ok := PVCUpdate(s.W, who, verb, namespace, name, what, mutate)
	st.What = what
	s.Do(st, ok)
}

// Bind is the PV controller's bind() of a volume and a claim, write by write, as it would run
// from the current state (each write only when it changes something).
func (s *Script) Bind(pvName, namespace, name string) {
	writes := 0
	for range 4 {
		pv, c := s.W.PVs[pvName], s.W.PVC(namespace, name)
		if pv == nil || c == nil {
			s.Broken = append(s.Broken, "bind of a missing object")
			return
		}
		st, ok := bindNext(s.W, pv, c)
		if !ok {
			break
		}
		s.Do(st, true)
		writes++
		if s.Outcomes[len(s.Outcomes)-1].Result != Admitted {
			return
		}
	}
	if writes == 0 {
		s.Broken = append(s.Broken, fmt.Sprintf("bind of %s and %s/%s had nothing to write", pvName, namespace, name))
	}
}

// pair builds a bound pair the way the PV controller leaves it.
func pair(pv *corev1.PersistentVolume, c *corev1.PersistentVolumeClaim, variant string) (*corev1.PersistentVolume, *corev1.PersistentVolumeClaim) {
	bind(pv, c, variant)
	return pv, c
}

func provisionedClaim(namespace, name, uid, size, class, node string) *corev1.PersistentVolumeClaim {
	c := Claim(namespace, name, uid, size, class)
	SetAnn(&c.ObjectMeta, annProvisioner, Driver)
	SetAnn(&c.ObjectMeta, annBetaProv, Driver)
	if node != "" {
		SetAnn(&c.ObjectMeta, annSelectedNode, node)
	}
	return c
}

func provisionedPair(namespace, name, uid, size, class, node string) (*corev1.PersistentVolume, *corev1.PersistentVolumeClaim) {
	c := provisionedClaim(namespace, name, uid, size, class, node)
	pv := Provisioned(c)
	AddFin(&pv.ObjectMeta, FinPV)
	return pair(pv, c, "provisioned")
}

// cluster is the base world (classes, nodes) with the flow's objects.
func cluster(objs ...runtime.Object) *World {
	w := BaseWorld()
	for _, o := range objs {
		w.Put(o)
	}
	return w
}

// provisionedCluster is the base world with a claim bound to the volume provisioned for it.
func provisionedCluster() *World {
	pv, c := provisionedPair("team-a", "data", "uid-data", "1Gi", ClassFast, "")
	return cluster(pv, c)
}

// releaseAndDelete is what follows a provisioned volume's release: the provisioner deletes the
// backing volume and the PV object, then removes its finalizer; pv-protection removes its own.
func (s *Script) releaseAndDelete(pvName string) {
	s.PV(PVBinder, UpdateStatus, pvName, "PV controller: volume Released", func(pv *corev1.PersistentVolume) {
		pv.Status.Phase = corev1.VolumeReleased
	})
	s.Do(PVDelete(Provisioner, pvName, "provisioner deleted the backing volume and deletes the PV"), true)
	s.PV(Provisioner, Update, pvName, "provisioner removes its finalizer", func(pv *corev1.PersistentVolume) {
		DelFin(&pv.ObjectMeta, FinProvisioner)
	})
	s.PV(PVProt, Update, pvName, "pv-protection removes its finalizer: the volume is not Bound", func(pv *corev1.PersistentVolume) {
		DelFin(&pv.ObjectMeta, FinPV)
	})
	if s.W.PVs[pvName] != nil {
		s.Broken = append(s.Broken, "volume "+pvName+" still exists after its finalizers were removed")
	}
}

// deleteClaim is a tenant deleting a claim no pod uses: the delete marks it, pvc-protection
// removes its finalizer, and the claim is gone.
func (s *Script) deleteClaim(namespace, name string) {
	s.Do(PVCDelete(Tenant, namespace, name, "tenant deletes the claim"), true)
	s.PVC(PVCProt, Update, namespace, name, "pvc-protection removes its finalizer: no pod uses the claim", func(c *corev1.PersistentVolumeClaim) {
		DelFin(&c.ObjectMeta, FinPVC)
	})
	if s.W.PVC(namespace, name) != nil {
		s.Broken = append(s.Broken, "claim "+namespace+"/"+name+" still exists after its finalizer was removed")
	}
}

func (s *Script) provisionerSaves(namespace, name string, c *corev1.PersistentVolumeClaim) {
	if c == nil {
		c = s.W.PVC(namespace, name)
	}
	s.Do(PVCreate(Provisioner, Provisioned(c), "provisioner saves the volume it provisioned"), true)
}

// Flows are the upstream storage flows, each a named sequence of writes by the identities that
// make them in a real cluster; every write must be admitted with no finding.
func Flows() []Flow {
	return []Flow{
		{Name: "bind/unbound-claim-to-free-volume", Start: func() *World {
			return cluster(Volume("pv-1", "1Gi", ""))
		}, Run: func(s *Script) {
			s.Do(PVCCreate(Tenant, Claim("team-a", "data", "uid-data", "1Gi", ""), "tenant creates a claim"), true)
			s.PV(PVBinder, Update, "pv-1", "PV controller bind: claimRef with the claim's uid, bound-by-controller", func(pv *corev1.PersistentVolume) {
				pv.Spec.ClaimRef = RefTo(s.W.PVC("team-a", "data"))
				SetAnn(&pv.ObjectMeta, annBoundBy, "yes")
			})
			s.PV(PVBinder, UpdateStatus, "pv-1", "PV controller bind: volume Bound", func(pv *corev1.PersistentVolume) { pv.Status.Phase = corev1.VolumeBound })
			s.PVC(PVBinder, Update, "team-a", "data", "PV controller bind: volumeName, bound-by-controller, bind-completed", func(c *corev1.PersistentVolumeClaim) {
				c.Spec.VolumeName = "pv-1"
				SetAnn(&c.ObjectMeta, annBoundBy, "yes")
				SetAnn(&c.ObjectMeta, annBindCompleted, "yes")
			})
			s.PVC(PVBinder, UpdateStatus, "team-a", "data", "PV controller bind: claim Bound with the volume's capacity and modes", func(c *corev1.PersistentVolumeClaim) {
				c.Status.Phase = corev1.ClaimBound
				c.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: Quantity("1Gi")}
				c.Status.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
			})
		}},
		{Name: "bind/pre-bound-claim", Start: func() *World {
			c := Claim("team-a", "data", "uid-data", "1Gi", "")
			c.Spec.VolumeName = "pv-1"
			return cluster(Volume("pv-1", "2Gi", ""), c)
		}, Run: func(s *Script) {
			// The user named the volume: the controller marks the volume bound-by-controller (it
			// was not pre-bound to the claim), not the claim.
			s.Bind("pv-1", "team-a", "data")
		}},
		{Name: "bind/pre-bound-volume", Start: func() *World {
			return BaseWorld()
		}, Run: func(s *Script) {
			pv := Volume("pv-1", "1Gi", "")
			pv.Spec.ClaimRef = RefByName("team-a", "data")
			s.Do(PVCreate(Admin, pv, "admin creates a volume pre-bound to team-a/data by name"), true)
			s.PV(PVBinder, UpdateStatus, "pv-1", "PV controller: pre-bound volume Available", func(pv *corev1.PersistentVolume) { pv.Status.Phase = corev1.VolumeAvailable })
			s.Do(PVCCreate(Tenant, Claim("team-a", "data", "uid-data", "1Gi", ""), "tenant creates the claim"), true)
			s.Bind("pv-1", "team-a", "data")
		}},
		{Name: "bind/pre-bound-both-sides", Start: func() *World {
			pv := Volume("pv-1", "1Gi", "")
			pv.Spec.ClaimRef = RefByName("team-a", "data")
			return cluster(pv)
		}, Run: func(s *Script) {
			c := Claim("team-a", "data", "uid-data", "1Gi", "")
			c.Spec.VolumeName = "pv-1"
			s.Do(PVCCreate(Tenant, c, "tenant creates a claim naming the volume reserved for it"), true)
			s.Bind("pv-1", "team-a", "data")
		}},
		{Name: "unbind/bound-by-controller", Start: func() *World {
			pv, c := pair(Volume("pv-1", "1Gi", ""), Claim("team-a", "data", "uid-data", "1Gi", ""), "controller")
			other := Volume("pv-2", "1Gi", "")
			other.Spec.ClaimRef = RefTo(c)
			SetAnn(&other.ObjectMeta, annBoundBy, "yes")
			other.Status.Phase = corev1.VolumeBound
			return cluster(pv, c, other)
		}, Run: func(s *Script) {
			s.PV(PVBinder, Update, "pv-2", "PV controller unbind: the claim is bound to pv-1; clear claimRef and bound-by-controller", func(pv *corev1.PersistentVolume) {
				pv.Spec.ClaimRef = nil
				DelAnn(&pv.ObjectMeta, annBoundBy)
			})
			s.PV(PVBinder, UpdateStatus, "pv-2", "PV controller unbind: volume Available", func(pv *corev1.PersistentVolume) { pv.Status.Phase = corev1.VolumeAvailable })
		}},
		{Name: "unbind/pre-bound-by-user", Start: func() *World {
			pv, c := pair(Volume("pv-1", "1Gi", ""), Claim("team-a", "data", "uid-data", "1Gi", ""), "controller")
			other := Volume("pv-2", "1Gi", "")
			other.Spec.ClaimRef = RefTo(c)
			other.Status.Phase = corev1.VolumeBound
			return cluster(pv, c, other)
		}, Run: func(s *Script) {
			s.PV(PVBinder, Update, "pv-2", "PV controller unbind: the claim is bound to pv-1; the user pre-bound pv-2, drop only the uid", func(pv *corev1.PersistentVolume) {
				pv.Spec.ClaimRef.UID = ""
			})
			s.PV(PVBinder, UpdateStatus, "pv-2", "PV controller unbind: volume Available", func(pv *corev1.PersistentVolume) { pv.Status.Phase = corev1.VolumeAvailable })
		}},
		{Name: "release/retain", Start: func() *World {
			pv, c := pair(Volume("pv-1", "1Gi", ""), Claim("team-a", "data", "uid-data", "1Gi", ""), "controller")
			return cluster(pv, c)
		}, Run: func(s *Script) {
			s.deleteClaim("team-a", "data")
			s.PV(PVBinder, UpdateStatus, "pv-1", "PV controller: claim gone, volume Released (Retain: nothing more)", func(pv *corev1.PersistentVolume) {
				pv.Status.Phase = corev1.VolumeReleased
			})
		}},
		{Name: "release/delete-csi", Start: func() *World {
			return provisionedCluster()
		}, Run: func(s *Script) {
			s.deleteClaim("team-a", "data")
			s.releaseAndDelete("pvc-uid-data")
		}},
		{Name: "release/delete-in-tree", Start: func() *World {
			pv, c := pair(Volume("pv-1", "1Gi", ClassManual), Claim("team-a", "data", "uid-data", "1Gi", ClassManual), "controller")
			pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimDelete
			SetAnn(&pv.ObjectMeta, annProvisionedBy, "kubernetes.io/host-path")
			AddFin(&pv.ObjectMeta, FinPVCtrl)
			return cluster(pv, c)
		}, Run: func(s *Script) {
			s.deleteClaim("team-a", "data")
			s.PV(PVBinder, UpdateStatus, "pv-1", "PV controller: volume Released", func(pv *corev1.PersistentVolume) { pv.Status.Phase = corev1.VolumeReleased })
			s.Do(PVDelete(PVBinder, "pv-1", "PV controller deleted the backing volume and deletes the PV"), true)
			s.PV(PVBinder, Update, "pv-1", "PV controller removes its finalizer", func(pv *corev1.PersistentVolume) { DelFin(&pv.ObjectMeta, FinPVCtrl) })
			s.PV(PVProt, Update, "pv-1", "pv-protection removes its finalizer", func(pv *corev1.PersistentVolume) { DelFin(&pv.ObjectMeta, FinPV) })
		}},
		{Name: "reuse/admin-clears-claimref", Start: func() *World {
			pv := Volume("pv-1", "1Gi", "")
			pv.Spec.ClaimRef = refWithUID("team-a", "old", "uid-old")
			SetAnn(&pv.ObjectMeta, annBoundBy, "yes")
			pv.Status.Phase = corev1.VolumeReleased
			return cluster(pv)
		}, Run: func(s *Script) {
			s.PV(Admin, Update, "pv-1", "admin clears the claimRef of the Released Retain volume", func(pv *corev1.PersistentVolume) { pv.Spec.ClaimRef = nil })
			s.PV(PVBinder, UpdateStatus, "pv-1", "PV controller: volume Available", func(pv *corev1.PersistentVolume) { pv.Status.Phase = corev1.VolumeAvailable })
			s.Do(PVCCreate(Tenant, Claim("team-b", "new", "uid-new", "1Gi", ""), "another tenant creates a claim"), true)
			s.Bind("pv-1", "team-b", "new")
		}},
		{Name: "reuse/admin-drops-uid-for-recreated-claim", Start: func() *World {
			pv := Volume("pv-1", "1Gi", "")
			pv.Spec.ClaimRef = refWithUID("team-a", "data", "uid-data-1")
			pv.Status.Phase = corev1.VolumeReleased
			return cluster(pv, Claim("team-a", "data", "uid-data-2", "1Gi", ""))
		}, Run: func(s *Script) {
			s.PV(Admin, Update, "pv-1", "admin drops the old claim's uid: the volume is pre-bound to the re-created claim", func(pv *corev1.PersistentVolume) {
				pv.Spec.ClaimRef.UID = ""
				pv.Spec.ClaimRef.ResourceVersion = ""
			})
			s.PV(PVBinder, UpdateStatus, "pv-1", "PV controller: pre-bound volume Available", func(pv *corev1.PersistentVolume) { pv.Status.Phase = corev1.VolumeAvailable })
			s.Bind("pv-1", "team-a", "data")
		}},
		{Name: "provisioning/immediate", Start: BaseWorld, Run: func(s *Script) {
			s.Do(PVCCreate(Tenant, Claim("team-a", "data", "uid-data", "1Gi", ClassFast), "tenant creates a claim of a dynamic class"), true)
			s.PVC(PVBinder, Update, "team-a", "data", "PV controller: storage-provisioner annotations for the external provisioner", func(c *corev1.PersistentVolumeClaim) {
				SetAnn(&c.ObjectMeta, annBetaProv, Driver)
				SetAnn(&c.ObjectMeta, annProvisioner, Driver)
			})
			s.provisionerSaves("team-a", "data", nil)
			s.Bind("pvc-uid-data", "team-a", "data")
		}},
		{Name: "provisioning/wait-for-first-consumer", Start: BaseWorld, Run: func(s *Script) {
			s.Do(PVCCreate(Tenant, Claim("team-a", "data", "uid-data", "1Gi", ClassLocal), "tenant creates a claim of a WaitForFirstConsumer class"), true)
			s.PVC(Scheduler, Update, "team-a", "data", "scheduler selects node-a for provisioning", func(c *corev1.PersistentVolumeClaim) {
				SetAnn(&c.ObjectMeta, annSelectedNode, "node-a")
			})
			s.PVC(PVBinder, Update, "team-a", "data", "PV controller: storage-provisioner annotations", func(c *corev1.PersistentVolumeClaim) {
				SetAnn(&c.ObjectMeta, annBetaProv, Driver)
				SetAnn(&c.ObjectMeta, annProvisioner, Driver)
			})
			s.provisionerSaves("team-a", "data", nil)
			s.Bind("pvc-uid-data", "team-a", "data")
		}},
		{Name: "provisioning/rescheduled", Start: func() *World {
			return cluster(provisionedClaim("team-a", "data", "uid-data", "1Gi", ClassLocal, "node-a"))
		}, Run: func(s *Script) {
			s.PVC(Provisioner, Update, "team-a", "data", "provisioner cannot provision on node-a: drops selected-node so the scheduler retries", func(c *corev1.PersistentVolumeClaim) {
				DelAnn(&c.ObjectMeta, annSelectedNode)
			})
			s.PVC(Scheduler, Update, "team-a", "data", "scheduler selects node-b", func(c *corev1.PersistentVolumeClaim) {
				SetAnn(&c.ObjectMeta, annSelectedNode, "node-b")
			})
			s.provisionerSaves("team-a", "data", nil)
			s.Bind("pvc-uid-data", "team-a", "data")
		}},
		{Name: "provisioning/race-claim-deleted", Start: func() *World {
			return cluster(provisionedClaim("team-a", "data", "uid-data", "1Gi", ClassFast, ""))
		}, Run: func(s *Script) {
			c := s.W.PVC("team-a", "data")
			s.deleteClaim("team-a", "data")
			s.provisionerSaves("team-a", "data", c)
			s.releaseAndDelete("pvc-uid-data")
		}},
		{Name: "provisioning/race-claim-recreated", Start: func() *World {
			return cluster(provisionedClaim("team-a", "data", "uid-data", "1Gi", ClassFast, ""))
		}, Run: func(s *Script) {
			c := s.W.PVC("team-a", "data")
			s.deleteClaim("team-a", "data")
			s.Do(PVCCreate(Tenant, Claim("team-a", "data", "uid-data-2", "1Gi", ClassFast), "tenant re-creates the claim"), true)
			s.provisionerSaves("team-a", "data", c)
			s.releaseAndDelete("pvc-uid-data")
		}},
		{Name: "provisioning/race-claim-bound-elsewhere", Start: func() *World {
			return cluster(provisionedClaim("team-a", "data", "uid-data", "1Gi", ClassFast, ""), Volume("pv-1", "1Gi", ClassFast))
		}, Run: func(s *Script) {
			c := s.W.PVC("team-a", "data")
			s.Bind("pv-1", "team-a", "data")
			s.provisionerSaves("team-a", "data", c)
			s.releaseAndDelete("pvc-uid-data")
		}},
		{Name: "scheduler/wait-for-first-consumer-static-bind", Start: func() *World {
			pv := Volume("pv-1", "1Gi", ClassLocal)
			pv.Spec.NodeAffinity = HostAffinity("node-a")
			return cluster(pv, Claim("team-a", "data", "uid-data", "1Gi", ClassLocal))
		}, Run: func(s *Script) {
			s.PV(Scheduler, Update, "pv-1", "scheduler binds the volume: claimRef with the claim's uid, bound-by-controller (full Update)", func(pv *corev1.PersistentVolume) {
				pv.Spec.ClaimRef = RefTo(s.W.PVC("team-a", "data"))
				SetAnn(&pv.ObjectMeta, annBoundBy, "yes")
			})
			s.Bind("pv-1", "team-a", "data")
		}},
		{Name: "expansion/csi-resizer", Start: func() *World {
			return provisionedCluster()
		}, Run: func(s *Script) {
			s.PVC(Tenant, Update, "team-a", "data", "tenant asks for 2Gi", func(c *corev1.PersistentVolumeClaim) {
				c.Spec.Resources.Requests[corev1.ResourceStorage] = Quantity("2Gi")
			})
			s.PVC(Expander, Update, "team-a", "data", "expand controller: storage-resizer annotation", func(c *corev1.PersistentVolumeClaim) {
				SetAnn(&c.ObjectMeta, "volume.kubernetes.io/storage-resizer", Driver)
			})
			s.PVC(Resizer, UpdateStatus, "team-a", "data", "resizer: resize in progress", func(c *corev1.PersistentVolumeClaim) {
				c.Status.AllocatedResources = corev1.ResourceList{corev1.ResourceStorage: Quantity("2Gi")}
				c.Status.Conditions = []corev1.PersistentVolumeClaimCondition{{Type: corev1.PersistentVolumeClaimResizing, Status: corev1.ConditionTrue}}
			})
			s.PV(Resizer, Update, "pvc-uid-data", "resizer: the volume's new capacity", func(pv *corev1.PersistentVolume) {
				pv.Spec.Capacity[corev1.ResourceStorage] = Quantity("2Gi")
			})
			s.PVC(Resizer, UpdateStatus, "team-a", "data", "resizer: file system resize pending on the node", func(c *corev1.PersistentVolumeClaim) {
				c.Status.Conditions = []corev1.PersistentVolumeClaimCondition{{Type: corev1.PersistentVolumeClaimFileSystemResizePending, Status: corev1.ConditionTrue}}
			})
			s.PVC(Kubelet, UpdateStatus, "team-a", "data", "kubelet: file system grown, the claim's capacity", func(c *corev1.PersistentVolumeClaim) {
				c.Status.Capacity[corev1.ResourceStorage] = Quantity("2Gi")
				c.Status.Conditions = nil
			})
		}},
		{Name: "expansion/relink-lost-claimref-mid-expansion", Start: func() *World {
			pv, c := pair(Volume("pv-1", "1Gi", ""), Claim("team-a", "data", "uid-data", "1Gi", ""), "controller")
			c.Spec.Resources.Requests[corev1.ResourceStorage] = Quantity("2Gi")
			pv.Spec.ClaimRef = nil
			DelAnn(&pv.ObjectMeta, annBoundBy)
			pv.Status.Phase = corev1.VolumeAvailable
			return cluster(pv, c)
		}, Run: func(s *Script) {
			// syncBoundClaim: "volume is unbound, fixing" -> bind()
			s.Bind("pv-1", "team-a", "data")
			s.PV(Resizer, Update, "pv-1", "resizer: the volume's new capacity", func(pv *corev1.PersistentVolume) {
				pv.Spec.Capacity[corev1.ResourceStorage] = Quantity("2Gi")
			})
			s.PVC(Resizer, UpdateStatus, "team-a", "data", "resizer: the claim's new capacity", func(c *corev1.PersistentVolumeClaim) {
				c.Status.Capacity[corev1.ResourceStorage] = Quantity("2Gi")
			})
		}},
		{Name: "expansion/recover-from-failed-expansion", Start: func() *World {
			pv, c := pair(Volume("pv-1", "1Gi", ""), Claim("team-a", "data", "uid-data", "1Gi", ""), "controller")
			c.Spec.Resources.Requests[corev1.ResourceStorage] = Quantity("100Gi")
			return cluster(pv, c)
		}, Run: func(s *Script) {
			s.PVC(Tenant, Update, "team-a", "data", "tenant lowers the request that could not be met, above what the claim has", func(c *corev1.PersistentVolumeClaim) {
				c.Spec.Resources.Requests[corev1.ResourceStorage] = Quantity("2Gi")
			})
		}},
		{Name: "protection/add-finalizers", Start: func() *World {
			pv, c := pair(Volume("pv-1", "1Gi", ""), Claim("team-a", "data", "uid-data", "1Gi", ""), "controller")
			pv.Finalizers, c.Finalizers = nil, nil
			return cluster(pv, c)
		}, Run: func(s *Script) {
			s.PV(PVProt, Update, "pv-1", "pv-protection adds its finalizer", func(pv *corev1.PersistentVolume) { AddFin(&pv.ObjectMeta, FinPV) })
			s.PVC(PVCProt, Update, "team-a", "data", "pvc-protection adds its finalizer", func(c *corev1.PersistentVolumeClaim) { AddFin(&c.ObjectMeta, FinPVC) })
		}},
		{Name: "protection/delete-free-volume", Start: func() *World {
			return cluster(Volume("pv-1", "1Gi", ""))
		}, Run: func(s *Script) {
			s.Do(PVDelete(Admin, "pv-1", "admin deletes a free volume"), true)
			s.PV(PVProt, Update, "pv-1", "pv-protection removes its finalizer", func(pv *corev1.PersistentVolume) { DelFin(&pv.ObjectMeta, FinPV) })
		}},
		{Name: "provisioner-finalizer/added-to-bound-delete-volume", Start: func() *World {
			pv, c := provisionedPair("team-a", "data", "uid-data", "1Gi", ClassFast, "")
			DelFin(&pv.ObjectMeta, FinProvisioner)
			return cluster(pv, c)
		}, Run: func(s *Script) {
			s.PV(Provisioner, Update, "pvc-uid-data", "provisioner adds its finalizer to a Bound Delete volume", func(pv *corev1.PersistentVolume) {
				AddFin(&pv.ObjectMeta, FinProvisioner)
			})
		}},
		{Name: "provisioner-finalizer/dropped-when-retained", Start: func() *World {
			return provisionedCluster()
		}, Run: func(s *Script) {
			s.PV(Admin, Update, "pvc-uid-data", "admin keeps the volume: reclaim policy Delete -> Retain", func(pv *corev1.PersistentVolume) {
				pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
			})
			s.PV(Provisioner, Update, "pvc-uid-data", "provisioner drops its finalizer: the reclaim policy is no longer Delete", func(pv *corev1.PersistentVolume) {
				DelFin(&pv.ObjectMeta, FinProvisioner)
			})
		}},
		{Name: "populator/immediate", Start: func() *World {
			return cluster(populatorTarget("team-a", "db", ClassFast, ""))
		}, Run: func(s *Script) { s.populate("populators", "prime-", ClassFast, "") }},
		{Name: "populator/wait-for-first-consumer", Start: func() *World {
			return cluster(populatorTarget("team-a", "db", ClassLocal, "node-a"))
		}, Run: func(s *Script) { s.populate("populators", "prime-", ClassLocal, "node-a") }},
		{Name: "cdi/clone-across-namespaces", Start: func() *World {
			return cluster(populatorTarget("team-a", "db", ClassFast, ""))
		}, Run: func(s *Script) { s.populate("team-src", "tmp-pvc-", ClassFast, "") }},
		{Name: "velero/data-mover-rebind", Start: func() *World {
			pv, c := provisionedPair("velero", "restore-x", "uid-restore-x", "1Gi", ClassFast, "")
			target := Claim("team-a", "db", populatorTargetUID, "1Gi", ClassFast)
			target.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"velero.io/dynamic-pv-restore": "team-a.db.x1"}}
			return cluster(pv, c, target)
		}, Run: func(s *Script) {
			// pkg/exposer/generic_restore.go RebindVolume; pkg/util/kube/pvc_pv.go: merge patches.
			pvName := s.W.PVC("velero", "restore-x").Spec.VolumeName
			s.PV(Velero, Update, pvName, "velero: reclaim policy Retain while it rebinds", func(pv *corev1.PersistentVolume) {
				pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
			})
			s.deleteClaim("velero", "restore-x")
			s.PV(PVBinder, UpdateStatus, pvName, "PV controller: claim gone, volume Released", func(pv *corev1.PersistentVolume) {
				pv.Status.Phase = corev1.VolumeReleased
			})
			s.PVC(Velero, Update, "team-a", "db", "velero: RebindPVC names the volume", func(c *corev1.PersistentVolumeClaim) {
				c.Spec.VolumeName = pvName
			})
			s.PV(Velero, Update, pvName, "velero: ResetPVBinding points the volume at the claim, with the selector's labels", func(pv *corev1.PersistentVolume) {
				pv.Spec.ClaimRef = &corev1.ObjectReference{Namespace: "team-a", Name: "db"}
				DelAnn(&pv.ObjectMeta, annBoundBy)
				if pv.Labels == nil {
					pv.Labels = map[string]string{}
				}
				pv.Labels["velero.io/dynamic-pv-restore"] = "team-a.db.x1"
			})
			s.Bind(pvName, "team-a", "db")
			// Velero then restores the reclaim policy (Delete) on the bound volume: PVG011 refuses
			// that on a default install (docs/compatibility.md gives the exemption).
		}},
		{Name: "lost/claim-marked-lost", Start: func() *World {
			c := Claim("team-a", "data", "uid-data", "1Gi", "")
			c.Spec.VolumeName = "pv-gone"
			SetAnn(&c.ObjectMeta, annBindCompleted, "yes")
			c.Status.Phase = corev1.ClaimBound
			return cluster(c)
		}, Run: func(s *Script) {
			s.PVC(PVBinder, UpdateStatus, "team-a", "data", "PV controller: the claim's volume is gone, claim Lost", func(c *corev1.PersistentVolumeClaim) {
				c.Status.Phase = corev1.ClaimLost
			})
		}},
	}
}

// populatorTargetUID is the uid of the claim a populator fills, in the apiserver's form: the
// populator's own claim is named after it.
const populatorTargetUID = "0f5c3f5e-6b0a-4c47-9d43-7c2f2b1e9a10"

// populatorTarget is a claim that waits for a populator to fill a volume for it; with a node, a
// pod using it has been scheduled there.
func populatorTarget(namespace, name, class, node string) *corev1.PersistentVolumeClaim {
	c := provisionedClaim(namespace, name, populatorTargetUID, "1Gi", class, node)
	group := "example.io"
	c.Spec.DataSourceRef = &corev1.TypedObjectReference{APIGroup: &group, Kind: "Hello", Name: "hello"}
	return c
}

// populate is a volume populator's run for the claim team-a/db (lib-volume-populator's
// populator-machinery/controller.go syncPvc; KubeVirt CDI's clone planner and common.Rebind):
// its own claim, named prefix+<uid of the target>, is provisioned and bound, the populator fills
// it, hands the volume to the target, the PV controller binds the target and marks the
// populator's claim Lost, and the populator deletes it.
func (s *Script) populate(namespace, prefix, class, node string) {
	target := s.W.PVC("team-a", "db")
	name := prefix + string(target.UID)
	own := Claim(namespace, name, "uid-"+name, "1Gi", class)
	if node != "" {
		SetAnn(&own.ObjectMeta, annSelectedNode, node)
	}
	s.Do(PVCCreate(Populator, own, "populator creates its claim for team-a/db"), true)
	s.PVC(PVBinder, Update, namespace, name, "PV controller asks the external provisioner", func(c *corev1.PersistentVolumeClaim) {
		SetAnn(&c.ObjectMeta, annBetaProv, Driver)
		SetAnn(&c.ObjectMeta, annProvisioner, Driver)
	})
	s.provisionerSaves(namespace, name, nil)
	pvName := Provisioned(s.W.PVC(namespace, name)).Name
	s.Bind(pvName, namespace, name)
	s.PV(Populator, Update, pvName, "populator hands the filled volume to team-a/db", func(pv *corev1.PersistentVolume) {
		pv.Spec.ClaimRef = &corev1.ObjectReference{Namespace: "team-a", Name: "db", UID: target.UID, ResourceVersion: "7"}
	})
	s.Bind(pvName, "team-a", "db")
	s.PVC(PVBinder, UpdateStatus, namespace, name, "PV controller: the populator's claim is Lost", func(c *corev1.PersistentVolumeClaim) {
		c.Status.Phase = corev1.ClaimLost
	})
	s.Do(PVCDelete(Populator, namespace, name, "populator deletes its claim"), true)
	s.PVC(PVCProt, Update, namespace, name, "pvc-protection removes its finalizer: no pod uses the claim", func(c *corev1.PersistentVolumeClaim) {
		DelFin(&c.ObjectMeta, FinPVC)
	})
}
