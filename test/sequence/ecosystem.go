package sequence

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvguard/pvguard/policy"
)

// The other components of the storage ecosystem that write volumes and claims themselves, outside
// the upstream controllers of flows.go: storage operators (Rook, Longhorn, OpenEBS, TopoLVM),
// database operators (KubeBlocks) and tools (pv-migrate, rename-pvc). Each flow is what one of
// them writes to a PersistentVolume or a PersistentVolumeClaim, write by write, in the order and
// from the state its source code shows, by the ServiceAccount its chart installs, interleaved with
// the upstream controllers' writes it waits for. Each write carries what a default install
// (policy.DefaultConfig: no controllers:, no exemptions) answers: admitted quietly, or refused or
// warned by exact rules. A flow pvguard does not admit quietly carries the smallest config that
// does (EcoFlow.Config), an exemption of the component's identity on each rule that objects.
//
// A flow goes on after a refused write as if it had been admitted (the write is applied without
// the rules), because that is what the component needs done and what the config admits: every
// later write is then judged in the state the component really produces.

// Identities of the ecosystem's components, as their charts install them.
const (
	RookOperator    Identity = "rook-ceph-operator"
	RookPurgeJob    Identity = "rook-ceph-purge-osd"
	RookCSI         Identity = "rook-csi-rbd-provisioner"
	LonghornManager Identity = "longhorn-manager"
	OpenEBSHostPath Identity = "openebs-localpv-provisioner"
	OpenEBSLVM      Identity = "openebs-lvm-controller"
	TopoLVM         Identity = "topolvm-controller"
	KubeBlocks      Identity = "kubeblocks"
)

func serviceAccountUser(namespace, name string) policy.UserInfo {
	return policy.UserInfo{
		Username: "system:serviceaccount:" + namespace + ":" + name,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
}

func init() {
	Users[RookOperator] = serviceAccountUser("rook-ceph", "rook-ceph-system")
	Users[RookPurgeJob] = serviceAccountUser("rook-ceph", "rook-ceph-purge-osd")
	Users[RookCSI] = serviceAccountUser("rook-ceph", "rook-csi-rbd-provisioner-sa")
	Users[LonghornManager] = serviceAccountUser("longhorn-system", "longhorn-service-account")
	Users[OpenEBSHostPath] = serviceAccountUser("openebs", "openebs-localpv-provisioner")
	Users[OpenEBSLVM] = serviceAccountUser("openebs", "openebs-lvm-controller-sa")
	Users[TopoLVM] = serviceAccountUser("topolvm-system", "topolvm-controller")
	Users[KubeBlocks] = serviceAccountUser("kb-system", "kubeblocks")
}

// Verdict is what pvguard answers one write: the rules that refuse it and the rules that warn.
// The zero Verdict is "admitted quietly".
type Verdict struct {
	Deny []policy.RuleID
	Warn []policy.RuleID
}

// Quiet is a write admitted with no finding.
var Quiet = Verdict{}

// Denied and Warned build a verdict; And adds warnings to a refusal.
func Denied(ids ...policy.RuleID) Verdict { return Verdict{Deny: ids} }
func Warned(ids ...policy.RuleID) Verdict { return Verdict{Warn: ids} }
func (v Verdict) And(warn ...policy.RuleID) Verdict {
	return Verdict{Deny: v.Deny, Warn: append(append([]policy.RuleID{}, v.Warn...), warn...)}
}

// IsQuiet reports whether the verdict has no finding.
func (v Verdict) IsQuiet() bool { return len(v.Deny) == 0 && len(v.Warn) == 0 }

func (v Verdict) String() string {
	var parts []string
	if len(v.Deny) > 0 {
		parts = append(parts, "refused by "+joinIDs(v.Deny))
	}
	if len(v.Warn) > 0 {
		parts = append(parts, "warned by "+joinIDs(v.Warn))
	}
	if len(parts) == 0 {
		return "admitted quietly"
	}
	return strings.Join(parts, ", ")
}

func joinIDs(ids []policy.RuleID) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = string(id)
	}
	slices.Sort(s)
	return strings.Join(slices.Compact(s), ",")
}

// Same reports whether two verdicts name the same rules.
func (v Verdict) Same(o Verdict) bool {
	return joinIDs(v.Deny) == joinIDs(o.Deny) && joinIDs(v.Warn) == joinIDs(o.Warn)
}

// verdictOf reads the rules of an engine's decision.
func verdictOf(d policy.Decision) Verdict {
	var v Verdict
	for _, f := range d.Deny {
		v.Deny = append(v.Deny, f.Rule)
	}
	for _, f := range d.Warn {
		v.Warn = append(v.Warn, f.Rule)
	}
	return v
}

// EcoWrite is one write of an ecosystem flow: the step, what pvguard is expected to answer on a
// default install, what the engine under test answered, and the findings' text.
type EcoWrite struct {
	Step     Step
	Want     Verdict
	Got      Verdict
	Findings []string
	// Violations are the invariants the oracle sees broken by the write once applied.
	Violations []Violation
}

// Expect sets the verdict a default install gives the write (Quiet when not called).
func (w *EcoWrite) Expect(v Verdict) *EcoWrite { w.Want = v; return w }

func (w EcoWrite) String() string {
	s := fmt.Sprintf("[%s] %s", w.Got, w.Step)
	if !w.Got.Same(w.Want) {
		s += fmt.Sprintf(" (expected: %s)", w.Want)
	}
	return s
}

// Eco runs an ecosystem flow: each write is judged by the engine under test, then applied
// whatever the verdict, as the component retries it until it is admitted.
type Eco struct {
	judge  *policy.Engine
	W      *World
	Writes []*EcoWrite
	Broken []string
}

func (s *Eco) do(st Step, ok bool, what string) *EcoWrite {
	if !ok {
		s.Broken = append(s.Broken, fmt.Sprintf("write %d (%s) changes nothing or names a missing object", len(s.Writes)+1, what))
		return &EcoWrite{}
	}
	st.What = what
	judged, out := Apply(s.judge, s.W, st)
	w := &EcoWrite{Step: st, Got: verdictOf(out.Decision)}
	for _, f := range append(append([]policy.Finding{}, out.Decision.Deny...), out.Decision.Warn...) {
		w.Findings = append(w.Findings, f.String())
	}
	next := judged
	switch out.Result {
	case Admitted:
	case Refused:
		var applied Outcome
		next, applied = Apply(Unguarded(), s.W, st)
		if applied.Result != Admitted {
			s.Broken = append(s.Broken, fmt.Sprintf("write %d (%s) cannot be applied: %s", len(s.Writes)+1, what, applied))
		}
	default:
		s.Broken = append(s.Broken, fmt.Sprintf("write %d (%s) not judged: %s", len(s.Writes)+1, what, out))
	}
	if st.Verb != Delete {
		for _, v := range Check(s.W, next, st) {
			w.Violations = append(w.Violations, v)
		}
	}
	s.W = next
	s.Writes = append(s.Writes, w)
	return w
}

// PV and PVC are updates (or status updates) built from the current object: the step records the
// fields the write changes, whatever the verb or patch type the component uses.
func (s *Eco) PV(who Identity, verb Verb, name, what string, mutate func(*corev1.PersistentVolume)) *EcoWrite {
	st, ok := PVUpdate(s.W, who, verb, name, what, mutate)
	return s.do(st, ok, what)
}

func (s *Eco) PVC(who Identity, verb Verb, namespace, name, what string, mutate func(*corev1.PersistentVolumeClaim)) *EcoWrite {
	st, ok := PVCUpdate(s.W, who, verb, namespace, name, what, mutate)
	return s.do(st, ok, what)
}

// CreatePV, CreatePVC, DeletePV and DeletePVC are the other verbs.
func (s *Eco) CreatePV(who Identity, pv *corev1.PersistentVolume, what string) *EcoWrite {
	return s.do(PVCreate(who, pv, what), true, what)
}

func (s *Eco) CreatePVC(who Identity, pvc *corev1.PersistentVolumeClaim, what string) *EcoWrite {
	return s.do(PVCCreate(who, pvc, what), true, what)
}

func (s *Eco) DeletePV(who Identity, name, what string) *EcoWrite {
	return s.do(PVDelete(who, name, what), s.W.PVs[name] != nil, what)
}

func (s *Eco) DeletePVC(who Identity, namespace, name, what string) *EcoWrite {
	return s.do(PVCDelete(who, namespace, name, what), s.W.PVC(namespace, name) != nil, what)
}

// Bind is the PV controller's bind() of a volume and a claim, write by write (flows.go).
func (s *Eco) Bind(pvName, namespace, name string) {
	for range 4 {
		pv, c := s.W.PVs[pvName], s.W.PVC(namespace, name)
		if pv == nil || c == nil {
			s.Broken = append(s.Broken, "bind of a missing object")
			return
		}
		st, ok := bindNext(s.W, pv, c)
		if !ok {
			return
		}
		s.do(st, true, st.What)
	}
}

// Lost is the PV controller marking a claim Lost: its volume links to another claim.
func (s *Eco) Lost(namespace, name string) {
	c := s.W.PVC(namespace, name)
	if c == nil {
		s.Broken = append(s.Broken, "claim "+namespace+"/"+name+" to mark Lost is missing")
		return
	}
	st, ok := claimLost(s.W, c)
	s.do(st, ok, "PV controller: claim Lost, its volume links to another claim")
}

// AskProvisioner is the PV controller's storage-provisioner annotations on a claim of a dynamic
// class; Provision is the external provisioner saving the volume it made for the claim.
func (s *Eco) AskProvisioner(namespace, name, driver string) {
	s.PVC(PVBinder, Update, namespace, name, "PV controller: storage-provisioner annotations", func(c *corev1.PersistentVolumeClaim) {
		SetAnn(&c.ObjectMeta, annBetaProv, driver)
		SetAnn(&c.ObjectMeta, annProvisioner, driver)
	})
}

func (s *Eco) Provision(who Identity, namespace, name string, edit func(*corev1.PersistentVolume)) string {
	c := s.W.PVC(namespace, name)
	if c == nil {
		s.Broken = append(s.Broken, "claim "+namespace+"/"+name+" to provision for is missing")
		return ""
	}
	pv := Provisioned(c)
	if edit != nil {
		edit(pv)
	}
	s.CreatePV(who, pv, "external provisioner saves the volume it provisioned")
	return pv.Name
}

// ClaimGone is a claim's deletion finished by pvc-protection (no pod uses it).
func (s *Eco) ClaimGone(namespace, name string) {
	s.PVC(PVCProt, Update, namespace, name, "pvc-protection removes its finalizer: no pod uses the claim", func(c *corev1.PersistentVolumeClaim) {
		DelFin(&c.ObjectMeta, FinPVC)
	})
	if s.W.PVC(namespace, name) != nil {
		s.Broken = append(s.Broken, "claim "+namespace+"/"+name+" still exists after its finalizers were removed")
	}
}

// Released is the PV controller releasing a volume whose claim is gone; Reclaimed is an external
// provisioner deleting a Delete volume and removing its finalizer, then pv-protection its own.
func (s *Eco) Released(pvName string) {
	s.PV(PVBinder, UpdateStatus, pvName, "PV controller: claim gone, volume Released", func(pv *corev1.PersistentVolume) {
		pv.Status.Phase = corev1.VolumeReleased
	})
}

func (s *Eco) Reclaimed(who Identity, pvName string) {
	s.DeletePV(who, pvName, "provisioner deleted the backing storage and deletes the PV")
	s.PV(who, Update, pvName, "provisioner removes its finalizer", func(pv *corev1.PersistentVolume) {
		DelFin(&pv.ObjectMeta, FinProvisioner)
	})
	s.PV(PVProt, Update, pvName, "pv-protection removes its finalizer: the volume is not Bound", func(pv *corev1.PersistentVolume) {
		DelFin(&pv.ObjectMeta, FinPV)
	})
}

// EcoFlow is what one component writes in one of its operations.
type EcoFlow struct {
	Component string
	// Version is the source read: the newest release tag and the commit.
	Version string
	// Source lists the files and functions that make the writes.
	Source []string
	Name   string
	// Writes says in a line what the component writes, for the compatibility table.
	Writes string
	Start  func() *World
	// Run makes the writes; nil for a component that writes no volume or claim of its own.
	Run func(s *Eco)
	// Config is the smallest pvguard config (YAML, as given to --config) under which every write
	// of the flow is admitted quietly; "" when a default install already does.
	Config string
	// Why says why pvguard objects, and whether the write is legitimate.
	Why string
}

// RunEco runs a flow's writes against an engine.
func RunEco(e *policy.Engine, f EcoFlow) *Eco {
	s := &Eco{judge: e, W: f.Start()}
	if f.Run != nil {
		f.Run(s)
	}
	return s
}

// Ecosystem uids: a populator's claim is named after the uid of the claim it fills, which the
// apiserver gives in RFC 4122 form, so the flows use that form where a name carries a uid.
const (
	uidTarget  = "6f1d2c3b-8a4e-4b5f-9c6d-7e8f9a0b1c2d"
	uidRenamed = "0a9b8c7d-6e5f-4a3b-8c2d-1e0f9a8b7c6d"
)

// EcosystemFlows is the catalogue.
func EcosystemFlows() []EcoFlow {
	var out []EcoFlow
	out = append(out, rookFlows()...)
	out = append(out, longhornFlows()...)
	out = append(out, openEBSFlows()...)
	out = append(out, topoLVMFlows()...)
	out = append(out, kubeBlocksFlows()...)
	out = append(out, toolFlows()...)
	return out
}

// ---- Rook ----

const rookVersion = "v1.20.6 (master d0c3b9c, 2026-08-21)"

func rookFlows() []EcoFlow {
	deviceSetClaim := func() *corev1.PersistentVolumeClaim {
		c := Claim("rook-ceph", "set1-data-0-abcde", "uid-osd", "1Gi", ClassLocal)
		c.Labels = map[string]string{"ceph.rook.io/DeviceSet": "set1", "ceph.rook.io/DeviceSetPVCId": "set1-data-0", "ceph.rook.io/setIndex": "0"}
		block := corev1.PersistentVolumeBlock
		c.Spec.VolumeMode = &block
		return c
	}
	return []EcoFlow{
		{
			Component: "Rook", Version: rookVersion, Name: "rook/osd-on-pvc",
			Source: []string{
				"pkg/operator/ceph/cluster/osd/deviceSet.go: createDeviceSetPVC, makeDeviceSetPVC",
				"pkg/operator/k8sutil/pvc.go: ExpandPVCIfRequired",
				"pkg/daemon/ceph/osd/remove.go: removePVCs",
			},
			Writes: "creates the OSD claims of a device set (generateName, labels, owner reference); raises their request when the device set grows (Update); the OSD purge job deletes them, or with preservePVC drops the DeviceSetPVCId label (Update)",
			Start:  BaseWorld,
			Run: func(s *Eco) {
				s.CreatePVC(RookOperator, deviceSetClaim(), "operator creates an OSD claim of device set set1 (Block, from the volumeClaimTemplate)")
				s.PVC(Scheduler, Update, "rook-ceph", "set1-data-0-abcde", "scheduler selects node-a for the OSD prepare pod", func(c *corev1.PersistentVolumeClaim) {
					SetAnn(&c.ObjectMeta, annSelectedNode, "node-a")
				})
				s.AskProvisioner("rook-ceph", "set1-data-0-abcde", Driver)
				pv := s.Provision(Provisioner, "rook-ceph", "set1-data-0-abcde", nil)
				s.Bind(pv, "rook-ceph", "set1-data-0-abcde")
				s.PVC(RookOperator, Update, "rook-ceph", "set1-data-0-abcde", "operator raises the request to the device set's new size (controller-runtime Update)", func(c *corev1.PersistentVolumeClaim) {
					c.Spec.Resources.Requests[corev1.ResourceStorage] = Quantity("2Gi")
				})
				s.PVC(RookPurgeJob, Update, "rook-ceph", "set1-data-0-abcde", "purge job with preservePVC: detaches the claim from Rook by dropping its DeviceSetPVCId label (Update)", func(c *corev1.PersistentVolumeClaim) {
					delete(c.Labels, "ceph.rook.io/DeviceSetPVCId")
				})
				s.DeletePVC(RookPurgeJob, "rook-ceph", "set1-data-0-abcde", "purge job without preservePVC: deletes the OSD's claims")
				s.ClaimGone("rook-ceph", "set1-data-0-abcde")
				s.Released(pv)
				s.Reclaimed(Provisioner, pv)
			},
		},
		{
			Component: "Rook", Version: rookVersion, Name: "rook/mon-on-pvc",
			Source: []string{
				"pkg/operator/ceph/cluster/mon/mon.go: the canary's and the mon's claim (Create)",
				"pkg/operator/ceph/cluster/mon/health.go: removeOrphanMonResources, removeMonResources (Delete)",
			},
			Writes: "creates a mon's claim from the volumeClaimTemplate; deletes the claims of failed-over or orphaned mons",
			Start:  BaseWorld,
			Run: func(s *Eco) {
				c := Claim("rook-ceph", "rook-ceph-mon-a", "uid-mon-a", "1Gi", ClassFast)
				c.Labels = map[string]string{"app": "rook-ceph-mon", "ceph_daemon_id": "a"}
				s.CreatePVC(RookOperator, c, "operator creates mon a's claim")
				s.AskProvisioner("rook-ceph", "rook-ceph-mon-a", Driver)
				pv := s.Provision(Provisioner, "rook-ceph", "rook-ceph-mon-a", nil)
				s.Bind(pv, "rook-ceph", "rook-ceph-mon-a")
				s.DeletePVC(RookOperator, "rook-ceph", "rook-ceph-mon-a", "operator deletes the failed-over mon's claim")
				s.ClaimGone("rook-ceph", "rook-ceph-mon-a")
				s.Released(pv)
				s.Reclaimed(Provisioner, pv)
			},
		},
		{
			Component: "Rook", Version: rookVersion + "; ceph-csi v3.12.2", Name: "rook/ceph-csi",
			Source: []string{
				"ceph-csi: no PersistentVolume or PersistentVolumeClaim write in the driver; provisioning, deletion and expansion go through the CSI sidecars (external-provisioner, external-resizer) Rook deploys",
			},
			Writes: "none of its own: the CSI sidecars, under Rook's ServiceAccounts, make the upstream provisioner's writes",
			Start:  BaseWorld,
			Run: func(s *Eco) {
				s.CreatePVC(Tenant, Claim("team-a", "data", "uid-data", "1Gi", ClassFast), "tenant creates a claim of a ceph-rbd class")
				s.AskProvisioner("team-a", "data", Driver)
				pv := s.Provision(RookCSI, "team-a", "data", nil)
				s.Bind(pv, "team-a", "data")
				s.DeletePVC(Tenant, "team-a", "data", "tenant deletes the claim")
				s.ClaimGone("team-a", "data")
				s.Released(pv)
				s.Reclaimed(RookCSI, pv)
			},
		},
	}
}

// ---- Longhorn ----

const longhornVersion = "v1.12.1 (master 5ddaa36, 2026-08-21)"

// LonghornDriver and the class Longhorn gives the volumes it makes PersistentVolumes for.
const (
	longhornDriver      = "driver.longhorn.io"
	longhornStaticClass = ClassManual
)

func longhornVolume(name string) *corev1.PersistentVolume {
	fs := corev1.PersistentVolumeFilesystem
	return &corev1.PersistentVolume{
		TypeMeta:   metav1.TypeMeta{Kind: "PersistentVolume", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: Quantity("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			VolumeMode:                    &fs,
			StorageClassName:              longhornStaticClass,
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: longhornDriver, VolumeHandle: name, FSType: "ext4",
				VolumeAttributes: map[string]string{"numberOfReplicas": "3", "staleReplicaTimeout": "30"},
			}},
		},
	}
}

func longhornClaim(namespace, name, uid, pvName string) *corev1.PersistentVolumeClaim {
	c := Claim(namespace, name, uid, "1Gi", longhornStaticClass)
	c.Spec.VolumeName = pvName
	return c
}

func longhornFlows() []EcoFlow {
	return []EcoFlow{
		{
			Component: "Longhorn", Version: longhornVersion, Name: "longhorn/pv-and-pvc-for-existing-volume",
			Source: []string{"manager/kubernetes.go: PVCreate, PVCCreate", "datastore/kubernetes.go: NewPVManifestForVolume, NewPVCManifestForVolume"},
			Writes: "for a Longhorn volume (made in its UI, or restored from a backup there): creates a Retain PersistentVolume without claimRef, then a claim naming it in spec.volumeName",
			Start:  BaseWorld,
			Run: func(s *Eco) {
				s.CreatePV(LonghornManager, longhornVolume("vol-1"), "manager creates the PersistentVolume of Longhorn volume vol-1 (Retain, no claimRef)")
				s.PV(PVBinder, UpdateStatus, "vol-1", "PV controller: volume Available", func(pv *corev1.PersistentVolume) { pv.Status.Phase = corev1.VolumeAvailable })
				s.CreatePVC(LonghornManager, longhornClaim("team-a", "data", "uid-data", "vol-1"), "manager creates a claim naming the volume in spec.volumeName").
					Expect(Warned("PVG010"))
				s.Bind("vol-1", "team-a", "data")
			},
			Config: `rules:
  PVG010:
    exemptions:
      serviceAccounts: [longhorn-system/longhorn-service-account]`,
			Why: "PVG010 warns about any claim that names a volume not pre-bound to it; Longhorn makes the volume and the claim for it, and leaves the volume's claimRef empty instead of pre-binding it",
		},
		{
			Component: "Longhorn", Version: longhornVersion, Name: "longhorn/pvc-for-released-volume",
			Source: []string{"manager/kubernetes.go: PVCCreate"},
			Writes: "for a volume whose PersistentVolume is Released: clears its claimRef (Update), then creates a claim naming it",
			Start: func() *World {
				pv := longhornVolume("vol-1")
				AddFin(&pv.ObjectMeta, FinPV)
				pv.Spec.ClaimRef = refWithUID("team-a", "old", "uid-old")
				pv.Status.Phase = corev1.VolumeReleased
				return cluster(pv)
			},
			Run: func(s *Eco) {
				s.PV(LonghornManager, Update, "vol-1", "manager clears the claimRef of the Released volume to reuse it (Update)", func(pv *corev1.PersistentVolume) {
					pv.Spec.ClaimRef = nil
				})
				s.PV(PVBinder, UpdateStatus, "vol-1", "PV controller: volume Available", func(pv *corev1.PersistentVolume) { pv.Status.Phase = corev1.VolumeAvailable })
				s.CreatePVC(LonghornManager, longhornClaim("team-b", "data", "uid-data", "vol-1"), "manager creates a claim naming the volume in spec.volumeName").
					Expect(Warned("PVG010"))
				s.Bind("vol-1", "team-b", "data")
			},
			Config: `rules:
  PVG010:
    exemptions:
      serviceAccounts: [longhorn-system/longhorn-service-account]`,
			Why: "as above: the claim names a volume that is not pre-bound to it",
		},
		{
			Component: "Longhorn", Version: longhornVersion, Name: "longhorn/system-restore",
			Source: []string{"controller/system_rollout_controller.go: restorePersistentVolumes, restorePersistentVolumeClaims, rolloutResource", "controller/system_backup_controller.go: the PersistentVolumes and claims of Longhorn volumes, saved whole"},
			Writes: "re-creates the saved PersistentVolumes without claimRef (provisioned-by and finalizers kept) and the saved claims as they were (spec.volumeName, bind-completed, bound-by-controller); the ones that exist get an annotation",
			Start:  BaseWorld,
			Run: func(s *Eco) {
				saved := provisionedClaim("team-a", "data", "uid-data", "1Gi", ClassFast, "")
				pv := Provisioned(saved)
				pv.Spec.ClaimRef = nil
				pv.Annotations[annProvisionedBy] = longhornDriver
				SetAnn(&pv.ObjectMeta, "longhorn.io/last-system-restore", "restore-1")
				s.CreatePV(LonghornManager, pv, "manager re-creates a saved volume, claimRef removed, provisioned-by and the provisioner's finalizer kept")
				s.PV(PVBinder, UpdateStatus, pv.Name, "PV controller: volume Available", func(pv *corev1.PersistentVolume) { pv.Status.Phase = corev1.VolumeAvailable })
				c := saved.DeepCopy()
				c.UID = "uid-data-restored" // the apiserver gives a created object a new uid
				c.Spec.VolumeName = pv.Name
				SetAnn(&c.ObjectMeta, annBindCompleted, "yes")
				SetAnn(&c.ObjectMeta, annBoundBy, "yes")
				SetAnn(&c.ObjectMeta, "longhorn.io/last-system-restore", "restore-1")
				s.CreatePVC(LonghornManager, c, "manager re-creates the saved claim as it was: spec.volumeName, bind-completed, bound-by-controller").
					Expect(Warned("PVG010", "PVG013"))
				// syncBoundClaim: the claim completed its binding, its volume has no claimRef: "volume
				// is unbound, fixing".
				s.Bind(pv.Name, "team-a", "data")
			},
			Config: `rules:
  PVG010:
    exemptions:
      serviceAccounts: [longhorn-system/longhorn-service-account]
  PVG013:
    exemptions:
      serviceAccounts: [longhorn-system/longhorn-service-account]`,
			Why: "the restored claim names a volume not pre-bound to it (PVG010) and carries the PV controller's bind-completed and bound-by-controller as the backup saved them (PVG013); the PV controller then re-links the volume to it, as it does for any claim that completed its binding",
		},
		{
			Component: "Longhorn", Version: longhornVersion, Name: "longhorn/volume-reconcile",
			Source: []string{
				"controller/volume_controller.go: ReconcilePersistentVolume (node affinity of a strict-local volume), volume deletion (Delete of its PersistentVolume and claim)",
				"datastore/kubernetes.go: UpdatePVAnnotation (longhorn.io/volume-scheduling-error)",
				"controller/recurring_job_controller.go: updatePVCRecurringJobLabelsFromVolume",
				"manager/volume.go: checkAndExpandPVC",
			},
			Writes: "on a bound pair: sets the node affinity of a strict-local volume that has none, annotates the volume with scheduling errors, syncs recurring-job labels and raises the request of the claim (Update); deletes the PersistentVolume and the claim of a deleted Longhorn volume",
			Start: func() *World {
				pv := longhornVolume("vol-1")
				AddFin(&pv.ObjectMeta, FinPV) // the apiserver's, on every volume it stores
				pv, c := pair(pv, longhornClaim("team-a", "data", "uid-data", ""), "controller")
				return cluster(pv, c)
			},
			Run: func(s *Eco) {
				s.PV(LonghornManager, Update, "vol-1", "manager pins the strict-local volume to its node (node affinity set where there was none)", func(pv *corev1.PersistentVolume) {
					pv.Spec.NodeAffinity = HostAffinity("node-a")
				})
				s.PV(LonghornManager, Update, "vol-1", "manager records a scheduling error on the volume (annotation)", func(pv *corev1.PersistentVolume) {
					SetAnn(&pv.ObjectMeta, "longhorn.io/volume-scheduling-error", "insufficient storage")
				})
				s.PVC(LonghornManager, Update, "team-a", "data", "manager syncs the recurring-job labels to the claim", func(c *corev1.PersistentVolumeClaim) {
					c.Labels = map[string]string{"recurring-job-group.longhorn.io/default": "enabled"}
				})
				s.PVC(LonghornManager, Update, "team-a", "data", "manager expands the volume through its claim (request raised)", func(c *corev1.PersistentVolumeClaim) {
					c.Spec.Resources.Requests[corev1.ResourceStorage] = Quantity("2Gi")
				})
				s.DeletePV(LonghornManager, "vol-1", "Longhorn volume deleted: manager deletes its PersistentVolume")
				s.DeletePVC(LonghornManager, "team-a", "data", "and its claim")
				s.ClaimGone("team-a", "data")
				s.Released("vol-1")
				s.PV(PVProt, Update, "vol-1", "pv-protection removes its finalizer: the volume is not Bound", func(pv *corev1.PersistentVolume) {
					DelFin(&pv.ObjectMeta, FinPV)
				})
			},
		},
		{
			Component: "Longhorn", Version: longhornVersion, Name: "longhorn/provisioner-rename-on-upgrade",
			Source: []string{"app/upgrader.go: upgradeLonghornRelatedComponents (run by the CSI driver deployer at every start)"},
			Writes: "on volumes of the pre-CSI provisioner: pv.kubernetes.io/provisioned-by rancher.io/longhorn -> driver.longhorn.io (Update), and the claim's storage-provisioner annotation likewise",
			Start: func() *World {
				c := provisionedClaim("team-a", "data", "uid-data", "1Gi", ClassFast, "")
				SetAnn(&c.ObjectMeta, annBetaProv, "rancher.io/longhorn")
				pv := Provisioned(c)
				AddFin(&pv.ObjectMeta, FinPV)
				pv.Annotations[annProvisionedBy] = "rancher.io/longhorn"
				pv, c = pair(pv, c, "provisioned")
				return cluster(pv, c)
			},
			Run: func(s *Eco) {
				s.PV(LonghornManager, Update, "pvc-uid-data", "driver deployer renames the volume's provisioner (provisioned-by)", func(pv *corev1.PersistentVolume) {
					pv.Annotations[annProvisionedBy] = longhornDriver
				}).Expect(Warned("PVG013"))
				s.PVC(LonghornManager, Update, "team-a", "data", "and the claim's beta storage-provisioner annotation", func(c *corev1.PersistentVolumeClaim) {
					c.Annotations[annBetaProv] = longhornDriver
				})
			},
			Config: `rules:
  PVG013:
    exemptions:
      serviceAccounts: [longhorn-system/longhorn-service-account]`,
			Why: "PVG013 reserves provisioned-by to controllers; only volumes made by Longhorn before v1.0 carry the old name, so an upgraded install sees it at most once per such volume",
		},
	}
}

// ---- OpenEBS ----

func openEBSFlows() []EcoFlow {
	return []EcoFlow{
		{
			Component: "OpenEBS LocalPV hostpath", Version: "v4.0.0 (develop 2f165df, 2024-03-22)", Name: "openebs/localpv-hostpath",
			Source: []string{"cmd/provisioner-localpv/app/provisioner_hostpath.go: ProvisionHostPath, DeleteHostPath", "sigs.k8s.io/sig-storage-lib-external-provisioner/v9: the save, the reschedule and the delete (no finalizer: the provisioner does not ask for it)"},
			Writes: "the external-provisioner library's writes: the local volume (node affinity, provisioned-by openebs.io/local) and its deletion after the host path is cleaned",
			Start:  BaseWorld,
			Run: func(s *Eco) {
				s.CreatePVC(Tenant, Claim("team-a", "data", "uid-data", "1Gi", ClassLocal), "tenant creates a claim of an openebs-hostpath class (WaitForFirstConsumer)")
				s.PVC(Scheduler, Update, "team-a", "data", "scheduler selects node-a", func(c *corev1.PersistentVolumeClaim) { SetAnn(&c.ObjectMeta, annSelectedNode, "node-a") })
				s.AskProvisioner("team-a", "data", "openebs.io/local")
				pv := s.Provision(OpenEBSHostPath, "team-a", "data", func(pv *corev1.PersistentVolume) {
					pv.Annotations[annProvisionedBy] = "openebs.io/local"
					pv.Finalizers = nil
					pv.Labels = map[string]string{"openebs.io/cas-type": "local-hostpath"}
					pv.Spec.PersistentVolumeSource = corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/var/openebs/local/pvc-uid-data"}}
				})
				s.Bind(pv, "team-a", "data")
				s.DeletePVC(Tenant, "team-a", "data", "tenant deletes the claim")
				s.ClaimGone("team-a", "data")
				s.Released(pv)
				s.DeletePV(OpenEBSHostPath, pv, "provisioner cleaned the host path (helper pod) and deletes the PV")
				s.PV(PVProt, Update, pv, "pv-protection removes its finalizer", func(pv *corev1.PersistentVolume) { DelFin(&pv.ObjectMeta, FinPV) })
			},
		},
		{
			Component: "OpenEBS LVM LocalPV", Version: "v1.5.0 (develop f3276f4, 2024-03-22); lib-csi v0.8.2", Name: "openebs/lvm-leak-protection",
			Source: []string{"pkg/driver/controller.go: CreateVolume (BeginCreateVolume)", "openebs/lib-csi pkg/csipv/leak_protection.go: addFinalizer, removeFinalizer, processPVC"},
			Writes: "while CreateVolume runs: adds local.csi.openebs.io/csi-volume-name and the local.csi.openebs.io/csi-leak-protection finalizer to the pending claim (Update); removes both once the claim is Bound, or after deleting the volume of a claim deleted before it was bound",
			Start:  BaseWorld,
			Run: func(s *Eco) {
				const lvm = "local.csi.openebs.io"
				for _, name := range []string{"data", "gone"} {
					s.CreatePVC(Tenant, Claim("team-a", name, "uid-"+name, "1Gi", ClassFast), "tenant creates a claim of an openebs-lvmpv class")
					s.AskProvisioner("team-a", name, lvm)
					s.PVC(OpenEBSLVM, Update, "team-a", name, "driver, in CreateVolume: volume-name annotation and leak-protection finalizer on the pending claim", func(c *corev1.PersistentVolumeClaim) {
						SetAnn(&c.ObjectMeta, lvm+"/csi-volume-name", "pvc-uid-"+name)
						AddFin(&c.ObjectMeta, lvm+"/csi-leak-protection")
					})
				}
				pv := s.Provision(Provisioner, "team-a", "data", nil)
				s.Bind(pv, "team-a", "data")
				s.PVC(OpenEBSLVM, Update, "team-a", "data", "leak protection: the claim is Bound, drops its finalizer and annotation", func(c *corev1.PersistentVolumeClaim) {
					DelAnn(&c.ObjectMeta, lvm+"/csi-volume-name")
					DelFin(&c.ObjectMeta, lvm+"/csi-leak-protection")
				})
				s.DeletePVC(Tenant, "team-a", "gone", "tenant deletes the other claim while it is provisioned")
				s.PVC(OpenEBSLVM, Update, "team-a", "gone", "leak protection: deleted the orphan volume, drops its finalizer and annotation", func(c *corev1.PersistentVolumeClaim) {
					DelAnn(&c.ObjectMeta, lvm+"/csi-volume-name")
					DelFin(&c.ObjectMeta, lvm+"/csi-leak-protection")
				})
				s.ClaimGone("team-a", "gone")
			},
		},
		{
			Component: "OpenEBS ZFS LocalPV", Version: "v2.6.2 (develop d52f9a9, 2024-10-16)", Name: "openebs/zfs-localpv",
			Source: []string{"no PersistentVolume or PersistentVolumeClaim write in the driver: its state is in ZFSVolume objects; the CSI sidecars make the upstream writes"},
			Writes: "none of its own",
			Start:  BaseWorld,
		},
	}
}

// ---- TopoLVM ----

func topoLVMFlows() []EcoFlow {
	const version = "v0.41.0 (main 83e3dce, 2026-08-05)"
	return []EcoFlow{
		{
			Component: "TopoLVM", Version: version, Name: "topolvm/legacy-pvc-finalizer",
			Source: []string{"internal/controller/persistentvolumeclaim_controller.go: removeUnusedFinalizer"},
			Writes: "removes the finalizers topolvm.io/pvc and topolvm.cybozu.com/pvc, no longer used, from any claim (Update)",
			Start: func() *World {
				c := provisionedClaim("team-a", "data", "uid-data", "1Gi", ClassLocal, "node-a")
				AddFin(&c.ObjectMeta, "topolvm.io/pvc")
				pv := Provisioned(c)
				AddFin(&pv.ObjectMeta, FinPV)
				pv, c = pair(pv, c, "provisioned")
				return cluster(pv, c)
			},
			Run: func(s *Eco) {
				s.PVC(TopoLVM, Update, "team-a", "data", "controller removes the unused topolvm.io/pvc finalizer from a Bound claim", func(c *corev1.PersistentVolumeClaim) {
					DelFin(&c.ObjectMeta, "topolvm.io/pvc")
				})
			},
		},
		{
			Component: "TopoLVM", Version: version, Name: "topolvm/claims-of-deleted-node",
			Source: []string{"internal/controller/node_controller.go: Reconcile, doFinalize"},
			Writes: "when a Node with its finalizer is deleted: deletes every claim of a TopoLVM class whose selected-node is that node (Delete), then its LogicalVolumes",
			Start: func() *World {
				c := provisionedClaim("team-a", "data", "uid-data", "1Gi", ClassLocal, "node-a")
				pv := Provisioned(c)
				AddFin(&pv.ObjectMeta, FinPV)
				pv, c = pair(pv, c, "provisioned")
				return cluster(pv, c)
			},
			Run: func(s *Eco) {
				s.DeletePVC(TopoLVM, "team-a", "data", "controller deletes the claim of the deleted node-a")
				s.ClaimGone("team-a", "data")
				s.Released("pvc-uid-data")
				s.Reclaimed(Provisioner, "pvc-uid-data")
			},
		},
	}
}

// ---- KubeBlocks ----

const kubeBlocksVersion = "v1.2.0-alpha.3 (main 13138f4, 2026-08-20)"

// kubeBlocksTarget is a claim an InstanceSet makes for a restore: its data source is a
// KubeBlocks Backup, which KubeBlocks' volume populator fills.
func kubeBlocksTarget(class string) *corev1.PersistentVolumeClaim {
	c := Claim("demo", "data-mysql-0", uidTarget, "1Gi", class)
	group := "dataprotection.kubeblocks.io"
	c.Spec.DataSourceRef = &corev1.TypedObjectReference{APIGroup: &group, Kind: "Backup", Name: "backup-1"}
	c.Labels = map[string]string{"app.kubernetes.io/instance": "mysql", "apps.kubeblocks.io/vct-name": "data"}
	return c
}

func kubeBlocksPopulate(node string) func(s *Eco) {
	return func(s *Eco) {
		const ns, target, populate = "demo", "data-mysql-0", "kb-populate-" + uidTarget
		const finalizer = "dataprotection.kubeblocks.io/finalizer"
		class := ClassFast
		if node != "" {
			class = ClassLocal
		}
		s.CreatePVC(KubeBlocks, kubeBlocksTarget(class), "InstanceSet creates the instance's claim with a Backup as its dataSourceRef")
		if node != "" {
			s.PVC(Scheduler, Update, ns, target, "scheduler selects "+node+" for the instance's pod", func(c *corev1.PersistentVolumeClaim) {
				SetAnn(&c.ObjectMeta, annSelectedNode, node)
			})
		}
		s.PVC(KubeBlocks, Update, ns, target, "populator adds its finalizer to the target claim (merge patch)", func(c *corev1.PersistentVolumeClaim) {
			AddFin(&c.ObjectMeta, finalizer)
		})
		s.PVC(KubeBlocks, UpdateStatus, ns, target, "populator: condition Populating", func(c *corev1.PersistentVolumeClaim) {
			c.Status.Conditions = []corev1.PersistentVolumeClaimCondition{{Type: "Populating", Status: corev1.ConditionTrue, Reason: "PopulatingProcessing"}}
		})
		p := Claim(ns, populate, "uid-populate", "1Gi", class)
		what := "populator creates its claim kb-populate-<target uid>, the target's spec without the data source"
		if node != "" {
			// getPopulatePVC copies the target's selected-node so that the volume is made on the
			// pod's node (lib-volume-populator does the same for its prime claim); PVG013 admits a
			// claim made for a waiting claim that copies its node.
			SetAnn(&p.ObjectMeta, annSelectedNode, node)
			what += ", selected-node copied from the target"
		}
		s.CreatePVC(KubeBlocks, p, what)
		s.AskProvisioner(ns, populate, Driver)
		pv := s.Provision(Provisioner, ns, populate, nil)
		s.Bind(pv, ns, populate)
		// The restore job fills the volume through the populator's claim.
		// PVG002 admits a populator's hand-off of the volume from its claim, named after the
		// target's uid, to the target, which waits for its data.
		s.PV(KubeBlocks, Update, pv, "populator hands the volume to the target: claimRef -> the target with its uid, no kind or apiVersion (merge patch), populate-from annotation", func(x *corev1.PersistentVolume) {
			t := s.W.PVC(ns, target)
			x.Spec.ClaimRef = &corev1.ObjectReference{Namespace: ns, Name: target, UID: t.UID, ResourceVersion: "7"}
			SetAnn(&x.ObjectMeta, "dataprotection.kubeblocks.io/populate-from", "backup-1")
		})
		s.PVC(KubeBlocks, Update, ns, target, "populator sets the target's spec.volumeName (merge patch)", func(c *corev1.PersistentVolumeClaim) {
			c.Spec.VolumeName = pv
		})
		s.Bind(pv, ns, target)
		s.Lost(ns, populate)
		s.DeletePVC(KubeBlocks, ns, populate, "populator deletes its claim")
		s.ClaimGone(ns, populate)
		s.PVC(KubeBlocks, Update, ns, target, "populator removes its finalizer from the target (merge patch)", func(c *corev1.PersistentVolumeClaim) {
			DelFin(&c.ObjectMeta, finalizer)
		})
		s.PVC(KubeBlocks, UpdateStatus, ns, target, "populator: condition PopulateSucceed", func(c *corev1.PersistentVolumeClaim) {
			c.Status.Conditions = []corev1.PersistentVolumeClaimCondition{{Type: "Populating", Status: corev1.ConditionFalse, Reason: "PopulateSucceed"}}
		})
	}
}

func kubeBlocksFlows() []EcoFlow {
	rebuildWorld := func() *World {
		srcPV, src := provisionedPair("demo", "data-mysql-0", "uid-source", "1Gi", ClassFast, "")
		tmp := provisionedClaim("demo", "rebuild-1a2b3c4d-mysql-data-0", "uid-tmp", "1Gi", ClassFast, "")
		SetAnn(&tmp.ObjectMeta, "operations.kubeblocks.io/rebuild-from", "ops-rebuild")
		tmpPV := Provisioned(tmp)
		AddFin(&tmpPV.ObjectMeta, FinPV)
		tmpPV, tmp = pair(tmpPV, tmp, "provisioned")
		return cluster(srcPV, src, tmpPV, tmp)
	}
	return []EcoFlow{
		{
			Component: "KubeBlocks", Version: kubeBlocksVersion, Name: "kubeblocks/volume-populator",
			Source: []string{"controllers/dataprotection/volumepopulator_controller.go: Populate, ProvisionOnly, getPopulatePVC, rebindPVCAndPV, bindTargetPVCToPV, releasePopulateResources"},
			Writes: "fills a claim whose dataSourceRef is a KubeBlocks Backup through a claim of its own, kb-populate-<target uid>, then points the filled volume's claimRef at the target (merge patch) and sets the target's spec.volumeName; deletes its claim and removes its finalizer from the target",
			Start:  BaseWorld,
			Run:    kubeBlocksPopulate(""),
		},
		{
			Component: "KubeBlocks", Version: kubeBlocksVersion, Name: "kubeblocks/volume-populator-wait-for-first-consumer",
			Source: []string{"controllers/dataprotection/volumepopulator_controller.go: waitForPVCSelectedNode, getPopulatePVC"},
			Writes: "as above on a WaitForFirstConsumer class: its own claim carries the target's volume.kubernetes.io/selected-node",
			Start:  BaseWorld,
			Run:    kubeBlocksPopulate("node-a"),
		},
		{
			Component: "KubeBlocks", Version: kubeBlocksVersion, Name: "kubeblocks/rebuild-instance-in-place",
			Source: []string{"pkg/operations/rebuild_instance_inplace.go: rebuildSourcePVCsAndRecreateInstance, retainAndAnnotatePV, preBindPVToSourcePVC, deleteSourcePVCForRebuild, removePVCFinalizer, setSourcePVCVolumeNameForRebuild, cleanupTmpPVC, revertReclaimPolicy"},
			Writes: "moves a volume restored through a temporary claim to the instance's claim: reclaim Delete -> Retain, claimRef -> the instance's claim by name while the temporary claim is bound to it; deletes the instance's claim and strips its finalizers; re-points claimRef at the re-created claim with its uid, sets its spec.volumeName; deletes the temporary claim and strips its finalizers; reclaim Retain -> Delete",
			Start:  rebuildWorld,
			Run: func(s *Eco) {
				const ns, src, tmp, pv = "demo", "data-mysql-0", "rebuild-1a2b3c4d-mysql-data-0", "pvc-uid-tmp"
				s.PV(KubeBlocks, Update, pv, "rebuild: the restored volume Retain, labelled and annotated with the source's policy (merge patch)", func(x *corev1.PersistentVolume) {
					x.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
					x.Labels = map[string]string{"operations.kubeblocks.io/rebuild-tmp-pvc": tmp}
					SetAnn(&x.ObjectMeta, "operations.kubeblocks.io/rebuild-from", "ops-rebuild")
					SetAnn(&x.ObjectMeta, "operations.kubeblocks.io/source-reclaim-policy", "Delete")
				})
				s.PV(KubeBlocks, Update, pv, "rebuild: claimRef -> the instance's claim by name, no uid (it is bound to its old volume), while the temporary claim is bound to the volume (merge patch)", func(x *corev1.PersistentVolume) {
					x.Spec.ClaimRef = &corev1.ObjectReference{APIVersion: "v1", Kind: "PersistentVolumeClaim", Namespace: ns, Name: src}
				}).Expect(Denied("PVG002", "PVG004"))
				s.Lost(ns, tmp)
				s.PV(PVBinder, UpdateStatus, pv, "PV controller: volume pre-bound by name, Available", func(x *corev1.PersistentVolume) { x.Status.Phase = corev1.VolumeAvailable })
				s.DeletePVC(KubeBlocks, ns, src, "rebuild: deletes the instance's claim (background)")
				s.PVC(KubeBlocks, Update, ns, src, "rebuild: strips the finalizers of the instance's claim, which names its old volume, before deleting the pod (merge patch)", func(c *corev1.PersistentVolumeClaim) {
					c.Finalizers = nil
				}).Expect(Denied("PVG012"))
				s.Released("pvc-uid-source")
				s.Reclaimed(Provisioner, "pvc-uid-source")
				fresh := Claim(ns, src, "uid-source-2", "1Gi", ClassFast)
				s.CreatePVC(KubeBlocks, fresh, "InstanceSet re-creates the instance's claim from its template")
				s.PV(KubeBlocks, Update, pv, "rebuild: claimRef -> the re-created claim with its uid (merge patch), while the temporary claim, Lost, still names the volume", func(x *corev1.PersistentVolume) {
					x.Spec.ClaimRef = &corev1.ObjectReference{APIVersion: "v1", Kind: "PersistentVolumeClaim", Namespace: ns, Name: src, UID: "uid-source-2"}
				}).Expect(Denied("PVG002"))
				s.PVC(KubeBlocks, Update, ns, src, "rebuild: the re-created claim's spec.volumeName (merge patch)", func(c *corev1.PersistentVolumeClaim) {
					c.Spec.VolumeName = pv
				})
				s.Bind(pv, ns, src)
				s.DeletePVC(KubeBlocks, ns, tmp, "rebuild: deletes the temporary claim")
				s.PVC(KubeBlocks, Update, ns, tmp, "rebuild: strips the finalizers of the temporary claim, Lost, whose rebuild pod has completed (merge patch)", func(c *corev1.PersistentVolumeClaim) {
					c.Finalizers = nil
				}).Expect(Denied("PVG012"))
				s.PV(KubeBlocks, Update, pv, "rebuild: reclaim policy back to the source's, Retain -> Delete, on the Bound volume (merge patch)", func(x *corev1.PersistentVolume) {
					x.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimDelete
				}).Expect(Denied("PVG011"))
			},
			Config: `rules:
  PVG002:
    exemptions:
      serviceAccounts: [kb-system/kubeblocks]
  PVG004:
    exemptions:
      serviceAccounts: [kb-system/kubeblocks]
  PVG011:
    exemptions:
      serviceAccounts: [kb-system/kubeblocks]
  PVG012:
    exemptions:
      serviceAccounts: [kb-system/kubeblocks]`,
			Why: "the move takes a volume from a live claim that completed its binding to it to a claim that is bound to another volume (PVG002, PVG004), then to a re-created claim while the temporary claim still owns it (PVG002); the finalizers go from claims that name a volume (PVG012), the first while the instance's pod still exists, which it deletes only after: refused, the rebuild waits forever; and Retain -> Delete on a Bound volume has no confirmation (PVG011)",
		},
		{
			Component: "KubeBlocks", Version: kubeBlocksVersion, Name: "kubeblocks/instance-claims",
			Source: []string{
				"pkg/operations/rebuild_instance_inplace.go: rebuildSourcePVCsByDynamicProvision (rebuild without a backup)",
				"InstanceSet: claims from volumeClaimTemplates, volume expansion (request raised); stop and start delete and re-create pods only",
			},
			Writes: "creates an instance's claims from its templates, raises their request on a volume expansion; a rebuild without a backup deletes the instance's claim (background) for the InstanceSet to re-create",
			Start:  BaseWorld,
			Run: func(s *Eco) {
				c := Claim("demo", "data-mysql-0", "uid-data", "1Gi", ClassFast)
				c.Labels = map[string]string{"app.kubernetes.io/instance": "mysql"}
				s.CreatePVC(KubeBlocks, c, "InstanceSet creates the instance's claim from its template")
				s.AskProvisioner("demo", "data-mysql-0", Driver)
				pv := s.Provision(Provisioner, "demo", "data-mysql-0", nil)
				s.Bind(pv, "demo", "data-mysql-0")
				s.PVC(KubeBlocks, Update, "demo", "data-mysql-0", "volume expansion: the claim's request raised", func(c *corev1.PersistentVolumeClaim) {
					c.Spec.Resources.Requests[corev1.ResourceStorage] = Quantity("2Gi")
				})
				s.DeletePVC(KubeBlocks, "demo", "data-mysql-0", "rebuild without a backup: deletes the instance's claim (background)")
				s.ClaimGone("demo", "data-mysql-0")
				s.Released(pv)
				s.Reclaimed(Provisioner, pv)
				c2 := Claim("demo", "data-mysql-0", "uid-data-2", "2Gi", ClassFast)
				s.CreatePVC(KubeBlocks, c2, "InstanceSet re-creates the claim from its template")
			},
		},
	}
}

// ---- tools ----

func toolFlows() []EcoFlow {
	return []EcoFlow{
		{
			Component: "pv-migrate", Version: "v3.6.1 (master 650a524, 2026-08-05)", Name: "pv-migrate/migrate",
			Source: []string{"internal/pvc/info.go (reads the claims), internal/helm/pv-migrate (rsync and sshd jobs that mount them)"},
			Writes: "none: it reads both claims and copies the data with jobs that mount them; the target claim is the user's",
			Start:  BaseWorld,
		},
		{
			Component: "rename-pvc", Version: "v0.7.0 (main a36f39a, 2026-06-24)", Name: "rename-pvc/rename",
			Source: []string{"pkg/renamepvc/renamepvc.go: rename, waitUntilPvcIsBound"},
			Writes: "creates the new claim as a copy of the old (spec.volumeName, bind-completed, bound-by-controller, finalizers, uid cleared); points the volume's claimRef at it with its uid, no kind or apiVersion (Update); waits for Bound; deletes the old claim",
			Start: func() *World {
				pv, c := provisionedPair("team-a", "data", "uid-data", "1Gi", ClassFast, "")
				c.Labels = map[string]string{"app": "db"}
				SetAnn(&c.ObjectMeta, annBoundBy, "yes")
				return cluster(pv, c)
			},
			Run: func(s *Eco) {
				renamed := s.W.PVC("team-a", "data").DeepCopy()
				renamed.Name, renamed.UID = "data-renamed", types.UID(uidRenamed)
				renamed.Status = corev1.PersistentVolumeClaimStatus{}
				// Expectation as pvguard will judge it: PVG010 does not judge a spec.volumeName
				// write as a bind while the volume's claimRef names another claim (today it warns).
				s.CreatePVC(Admin, renamed, "rename-pvc creates the new claim as a copy of the old: spec.volumeName, bind-completed, bound-by-controller").
					Expect(Denied("PVG004").And("PVG013"))
				s.PV(Admin, Update, "pvc-uid-data", "rename-pvc points the volume's claimRef at the new claim with its uid, no kind or apiVersion (Update)", func(pv *corev1.PersistentVolume) {
					pv.Spec.ClaimRef = &corev1.ObjectReference{Namespace: "team-a", Name: "data-renamed", UID: uidRenamed, ResourceVersion: "9"}
				}).Expect(Denied("PVG002"))
				s.Bind("pvc-uid-data", "team-a", "data-renamed")
				s.Lost("team-a", "data")
				s.DeletePVC(Admin, "team-a", "data", "rename-pvc deletes the old claim")
				s.ClaimGone("team-a", "data")
			},
			Config: `rules:
  PVG002:
    exemptions:
      users: [kubernetes-admin]
  PVG004:
    exemptions:
      users: [kubernetes-admin]
  PVG013:
    exemptions:
      users: [kubernetes-admin]`,
			Why: "the rename takes the volume from its live, bound claim to another (PVG002), and the new claim names it while the old one holds it (PVG004) and carries the PV controller's annotations (PVG013); rename-pvc runs as the user who calls it, so the exemption names that user",
		},
		{
			Component: "rename-pvc", Version: "the documented manual procedure (kubectl, scripts)", Name: "rename-pvc/by-release",
			Source: []string{"set the volume Retain, delete the old claim, clear the volume's claimRef, create the new claim naming the volume"},
			Writes: "reclaim policy Delete -> Retain; deletes the old claim; clears the Released volume's claimRef; creates a claim naming the volume in spec.volumeName",
			Start: func() *World {
				pv, c := provisionedPair("team-a", "data", "uid-data", "1Gi", ClassFast, "")
				return cluster(pv, c)
			},
			Run: func(s *Eco) {
				s.PV(Admin, Update, "pvc-uid-data", "admin keeps the volume: reclaim policy Delete -> Retain", func(pv *corev1.PersistentVolume) {
					pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
				})
				s.PV(Provisioner, Update, "pvc-uid-data", "provisioner drops its finalizer: the reclaim policy is no longer Delete", func(pv *corev1.PersistentVolume) {
					DelFin(&pv.ObjectMeta, FinProvisioner)
				})
				s.DeletePVC(Admin, "team-a", "data", "admin deletes the old claim")
				s.ClaimGone("team-a", "data")
				s.Released("pvc-uid-data")
				s.PV(Admin, Update, "pvc-uid-data", "admin clears the claimRef of the Released volume", func(pv *corev1.PersistentVolume) {
					pv.Spec.ClaimRef = nil
				})
				s.PV(PVBinder, UpdateStatus, "pvc-uid-data", "PV controller: volume Available", func(pv *corev1.PersistentVolume) { pv.Status.Phase = corev1.VolumeAvailable })
				c := Claim("team-a", "data-renamed", uidRenamed, "1Gi", ClassFast)
				c.Spec.VolumeName = "pvc-uid-data"
				s.CreatePVC(Admin, c, "admin creates the new claim naming the volume").Expect(Warned("PVG010"))
				s.Bind("pvc-uid-data", "team-a", "data-renamed")
			},
			Config: `rules:
  PVG010:
    exemptions:
      users: [kubernetes-admin]`,
			Why: "the new claim names a volume that is not pre-bound to it; pre-binding the volume to the new claim by name (spec.claimRef without uid) instead of clearing its claimRef is admitted quietly with no config",
		},
	}
}
