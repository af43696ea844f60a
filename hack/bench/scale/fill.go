package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
)

// The field managers the objects' writers use: kubectl apply (claims, static volumes), the
// CSI external-provisioner (provisioned volumes) and kube-controller-manager (binding and status).
const (
	managerKubectl     = "kubectl-client-side-apply"
	managerProvisioner = "csi-provisioner"
	managerController  = "kube-controller-manager"

	annLastApplied   = "kubectl.kubernetes.io/last-applied-configuration"
	annBindCompleted = "pv.kubernetes.io/bind-completed"
	annBoundBy       = "pv.kubernetes.io/bound-by-controller"
	annProvisionedBy = "pv.kubernetes.io/provisioned-by"
	annProvisioner   = "volume.kubernetes.io/storage-provisioner"
	annProvisionerB  = "volume.beta.kubernetes.io/storage-provisioner"

	classRBD   = "rbd"
	classLocal = "local-storage"
	classNFS   = "nfs"

	driverRBD = "rbd.csi.ceph.com"
	driverNFS = "nfs.csi.k8s.io"

	namespaces = 200
	nodes      = 32

	// fixtureNamespace holds the objects the admission reviews refer to; it is one of the
	// fill's namespaces, so its claims share it with N/200 others.
	fixtureNamespace = "team-000"
)

// shape is what one pair index becomes.
type shape int

const (
	shapeBound     shape = iota // a claim and its volume, bound (85%)
	shapeReleased               // a volume Released from a deleted claim, Retain (5%)
	shapePending                // a claim with no volume (5%)
	shapeAvailable              // a volume with no claim (5%)
)

func shapeOf(i int) shape {
	switch i % 20 {
	case 0:
		return shapeReleased
	case 1:
		return shapePending
	case 2:
		return shapeAvailable
	default:
		return shapeBound
	}
}

// fillStats is what filling created and how fast.
type fillStats struct {
	Pairs      int     `json:"pairs"`
	Bound      int     `json:"bound"`
	Released   int     `json:"released"`
	Pending    int     `json:"pending"`
	Available  int     `json:"available"`
	Volumes    int     `json:"volumes"`
	Claims     int     `json:"claims"`
	Writes     int64   `json:"writes"`
	Seconds    float64 `json:"seconds"`
	PairsPerS  float64 `json:"pairs_per_second"`
	WritesPerS float64 `json:"writes_per_second"`
}

// filler writes objects through the apiserver as kubectl, the provisioner and
// kube-controller-manager would, counting its writes.
type filler struct {
	cs      kubernetes.Interface
	workers int
	log     io.Writer
	writes  atomic.Int64
}

func namespaceOf(i int) string { return fmt.Sprintf("team-%03d", i%namespaces) }
func nodeName(i int) string    { return fmt.Sprintf("node-%02d", i%nodes) }

// base creates the namespaces, the three classes and the nodes.
func (f *filler) base(ctx context.Context) error {
	immediate, wffc := storagev1.VolumeBindingImmediate, storagev1.VolumeBindingWaitForFirstConsumer
	deleteP, retain := corev1.PersistentVolumeReclaimDelete, corev1.PersistentVolumeReclaimRetain
	expand := true
	classes := []*storagev1.StorageClass{
		{
			ObjectMeta:  metav1.ObjectMeta{Name: classRBD, Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}},
			Provisioner: driverRBD, VolumeBindingMode: &immediate, ReclaimPolicy: &deleteP, AllowVolumeExpansion: &expand,
			Parameters: map[string]string{
				"clusterID": "rook-ceph", "pool": "replicapool", "imageFormat": "2", "imageFeatures": "layering",
				"csi.storage.k8s.io/provisioner-secret-name": "rook-csi-rbd-provisioner", "csi.storage.k8s.io/provisioner-secret-namespace": "rook-ceph",
				"csi.storage.k8s.io/node-stage-secret-name": "rook-csi-rbd-node", "csi.storage.k8s.io/node-stage-secret-namespace": "rook-ceph",
				"csi.storage.k8s.io/fstype": "ext4",
			},
		},
		{ObjectMeta: metav1.ObjectMeta{Name: classLocal}, Provisioner: "kubernetes.io/no-provisioner", VolumeBindingMode: &wffc, ReclaimPolicy: &deleteP},
		{
			ObjectMeta: metav1.ObjectMeta{Name: classNFS}, Provisioner: driverNFS, VolumeBindingMode: &immediate, ReclaimPolicy: &retain,
			Parameters: map[string]string{"server": "nfs.storage.svc.cluster.local", "share": "/exports"},
		},
	}
	for _, sc := range classes {
		if _, err := f.cs.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{FieldManager: managerKubectl}); err != nil {
			return fmt.Errorf("creating class %s: %w", sc.Name, err)
		}
	}
	for i := range nodes {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName(i), Labels: map[string]string{
			"kubernetes.io/hostname": nodeName(i), "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
			"topology.kubernetes.io/zone": fmt.Sprintf("zone-%c", 'a'+i%3), "node.kubernetes.io/instance-type": "m6i.4xlarge",
		}}}
		if _, err := f.cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating node %s: %w", n.Name, err)
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(f.workers)
	for i := range namespaces {
		g.Go(func() error {
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespaceOf(i), Labels: map[string]string{"team": namespaceOf(i)}}}
			if _, err := f.cs.CoreV1().Namespaces().Create(gctx, ns, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("creating namespace %s: %w", ns.Name, err)
			}
			return nil
		})
	}
	return g.Wait()
}

// pairs creates pairs [0, n) with f.workers parallel writers, printing progress every 5 s.
func (f *filler) pairs(ctx context.Context, n int) (fillStats, error) {
	start := time.Now()
	st := fillStats{Pairs: n}
	var done atomic.Int64
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				s := time.Since(start).Seconds()
				d := done.Load()
				fmt.Fprintf(f.log, "fill: %d/%d pairs in %.0f s (%.0f pairs/s, %.0f writes/s)\n", d, n, s, float64(d)/s, float64(f.writes.Load())/s)
			}
		}
	}()
	if err := f.parallel(ctx, n, func(ctx context.Context, i int) error {
		if err := f.pair(ctx, i); err != nil {
			return fmt.Errorf("filling pair %d: %w", i, err)
		}
		done.Add(1)
		return nil
	}); err != nil {
		return st, err
	}
	for i := range n {
		switch shapeOf(i) {
		case shapeBound:
			st.Bound++
			st.Volumes++
			st.Claims++
		case shapeReleased:
			st.Released++
			st.Volumes++
		case shapePending:
			st.Pending++
			st.Claims++
		case shapeAvailable:
			st.Available++
			st.Volumes++
		}
	}
	st.Writes = f.writes.Load()
	st.Seconds = time.Since(start).Seconds()
	if st.Seconds > 0 {
		st.PairsPerS, st.WritesPerS = float64(n)/st.Seconds, float64(st.Writes)/st.Seconds
	}
	return st, nil
}

// pairSpec is one pair index's names and sizes.
type pairSpec struct {
	i         int
	local     bool // a local disk (a third), else CSI
	namespace string
	claim     string
	node      string
	request   string
	capacity  string
}

func specOf(i int) pairSpec {
	requests := []string{"1Gi", "5Gi", "8Gi", "10Gi", "20Gi", "50Gi", "100Gi"}
	p := pairSpec{i: i, local: i%3 == 0, namespace: namespaceOf(i), claim: fmt.Sprintf("data-app-%06d-0", i), node: nodeName(i / 3)}
	p.request = requests[(i/20)%len(requests)]
	p.capacity = p.request
	if p.local {
		p.request, p.capacity = "100Gi", []string{"375Gi", "750Gi", "1500Gi"}[(i/3)%3]
	}
	return p
}

// pair creates index i in its shape, with the writes each shape takes in a cluster.
func (f *filler) pair(ctx context.Context, i int) error {
	p := specOf(i)
	switch shapeOf(i) {
	case shapeBound:
		return f.bound(ctx, p)
	case shapeReleased:
		return f.released(ctx, p)
	case shapePending:
		_, err := f.pendingClaim(ctx, p)
		return err
	default:
		return f.available(ctx, p)
	}
}

func (f *filler) claimObject(p pairSpec) *corev1.PersistentVolumeClaim {
	class := classRBD
	if p.local {
		class = classLocal
	}
	mode := corev1.PersistentVolumeFilesystem
	return &corev1.PersistentVolumeClaim{
		TypeMeta: metav1.TypeMeta{Kind: "PersistentVolumeClaim", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Namespace: p.namespace, Name: p.claim, Labels: map[string]string{
			"app.kubernetes.io/name": fmt.Sprintf("app-%06d", p.i), "app.kubernetes.io/part-of": fmt.Sprintf("service-%03d", p.i%500),
		}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &class,
			VolumeMode:       &mode,
			Resources:        corev1.VolumeResourceRequirements{Requests: storage(p.request)},
		},
	}
}

func storage(q string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(q)}
}

// createClaim creates a claim as `kubectl apply` does: field manager kubectl-client-side-apply,
// the applied configuration in the last-applied annotation, and pvc-protection (which the
// apiserver's admission adds).
func (f *filler) createClaim(ctx context.Context, pvc *corev1.PersistentVolumeClaim) (*corev1.PersistentVolumeClaim, error) {
	if err := setLastApplied(&pvc.ObjectMeta, pvc); err != nil {
		return nil, err
	}
	pvc.Finalizers = []string{"kubernetes.io/pvc-protection"}
	f.writes.Add(1)
	out, err := f.cs.CoreV1().PersistentVolumeClaims(pvc.Namespace).Create(ctx, pvc, metav1.CreateOptions{FieldManager: managerKubectl})
	if err != nil {
		return nil, fmt.Errorf("creating claim %s/%s: %w", pvc.Namespace, pvc.Name, err)
	}
	return out, nil
}

// csiVolume is a volume as ceph-csi's external-provisioner creates it for a claim.
func csiVolume(p pairSpec, name string) *corev1.PersistentVolume {
	id := strings.TrimPrefix(name, "pvc-")
	mode := corev1.PersistentVolumeFilesystem
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      map[string]string{"team": p.namespace, "backup.example.com/schedule": []string{"daily", "weekly", "none"}[p.i%3]},
			Annotations: map[string]string{annProvisionedBy: driverRBD, "volume.kubernetes.io/provisioner-deletion-secret-name": "rook-csi-rbd-provisioner", "volume.kubernetes.io/provisioner-deletion-secret-namespace": "rook-ceph"},
			Finalizers:  []string{"kubernetes.io/pv-protection", "external-provisioner.volume.kubernetes.io/finalizer"},
		},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      storage(p.capacity),
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			StorageClassName:              classRBD,
			VolumeMode:                    &mode,
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver:       driverRBD,
				VolumeHandle: "0001-0009-rook-ceph-0000000000000002-" + id,
				FSType:       "ext4",
				VolumeAttributes: map[string]string{
					"clusterID": "rook-ceph", "pool": "replicapool", "imageName": "csi-vol-" + id,
					"imageFeatures": "layering", "journalPool": "replicapool",
					"storage.kubernetes.io/csiProvisionerIdentity": "1761985123456-2174-rbd.csi.ceph.com",
				},
				NodeStageSecretRef:        &corev1.SecretReference{Name: "rook-csi-rbd-node", Namespace: "rook-ceph"},
				ControllerExpandSecretRef: &corev1.SecretReference{Name: "rook-csi-rbd-provisioner", Namespace: "rook-ceph"},
			}},
		},
	}
}

// localVolume is a local disk as an administrator applies it: pinned to its node.
func localVolume(p pairSpec) *corev1.PersistentVolume {
	mode := corev1.PersistentVolumeFilesystem
	name := fmt.Sprintf("local-pv-%06d", p.i)
	return &corev1.PersistentVolume{
		TypeMeta: metav1.TypeMeta{Kind: "PersistentVolume", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{
			Name:   name,
			Labels: map[string]string{"disk-type": "nvme", "node": p.node},
		},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      storage(p.capacity),
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              classLocal,
			VolumeMode:                    &mode,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/mnt/disks/" + name}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{p.node}}},
			}}}},
		},
	}
}

// nfsVolume is a statically created NFS share (CSI, class nfs), as an administrator applies it.
func nfsVolume(p pairSpec) *corev1.PersistentVolume {
	mode := corev1.PersistentVolumeFilesystem
	name := fmt.Sprintf("nfs-share-%06d", p.i)
	return &corev1.PersistentVolume{
		TypeMeta: metav1.TypeMeta{Kind: "PersistentVolume", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{
			Name:   name,
			Labels: map[string]string{"team": p.namespace, "export": fmt.Sprintf("share-%06d", p.i)},
		},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      storage(p.capacity),
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              classNFS,
			VolumeMode:                    &mode,
			MountOptions:                  []string{"nfsvers=4.1", "hard"},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: driverNFS, VolumeHandle: "nfs.storage.svc.cluster.local#exports#" + name + "##",
				VolumeAttributes: map[string]string{
					"server": "nfs.storage.svc.cluster.local", "share": "/exports", "subdir": name,
					"mountPermissions": "0", "csi.storage.k8s.io/pv/name": name, "csi.storage.k8s.io/pvc/namespace": p.namespace,
				},
			}},
		},
	}
}

// createStatic creates a volume as `kubectl apply` does.
func (f *filler) createStatic(ctx context.Context, pv *corev1.PersistentVolume) (*corev1.PersistentVolume, error) {
	if err := setLastApplied(&pv.ObjectMeta, pv); err != nil {
		return nil, err
	}
	pv.Finalizers = []string{"kubernetes.io/pv-protection"}
	return f.createVolume(ctx, pv, managerKubectl)
}

func (f *filler) createVolume(ctx context.Context, pv *corev1.PersistentVolume, manager string) (*corev1.PersistentVolume, error) {
	f.writes.Add(1)
	out, err := f.cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{FieldManager: manager})
	if err != nil {
		return nil, fmt.Errorf("creating volume %s: %w", pv.Name, err)
	}
	return out, nil
}

func (f *filler) updateVolume(ctx context.Context, pv *corev1.PersistentVolume) (*corev1.PersistentVolume, error) {
	f.writes.Add(1)
	out, err := f.cs.CoreV1().PersistentVolumes().Update(ctx, pv, metav1.UpdateOptions{FieldManager: managerController})
	if err != nil {
		return nil, fmt.Errorf("updating volume %s: %w", pv.Name, err)
	}
	return out, nil
}

func (f *filler) volumeStatus(ctx context.Context, pv *corev1.PersistentVolume, phase corev1.PersistentVolumePhase) error {
	pv.Status.Phase = phase
	f.writes.Add(1)
	if _, err := f.cs.CoreV1().PersistentVolumes().UpdateStatus(ctx, pv, metav1.UpdateOptions{FieldManager: managerController}); err != nil {
		return fmt.Errorf("volume %s status %s: %w", pv.Name, phase, err)
	}
	return nil
}

func claimRef(pvc *corev1.PersistentVolumeClaim) *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: pvc.Namespace, Name: pvc.Name,
		UID: pvc.UID, ResourceVersion: pvc.ResourceVersion}
}

// bound makes a bound pair. CSI: kubectl creates the claim, the provisioner the volume with a
// claimRef carrying the claim's uid, kube-controller-manager completes the bind. Local: kubectl
// creates both, kube-controller-manager writes the claimRef and completes the bind.
func (f *filler) bound(ctx context.Context, p pairSpec) error {
	pvc, err := f.createClaim(ctx, f.claimObject(p))
	if err != nil {
		return err
	}
	var pv *corev1.PersistentVolume
	if p.local {
		if pv, err = f.createStatic(ctx, localVolume(p)); err != nil {
			return err
		}
		pv.Spec.ClaimRef = claimRef(pvc)
		setAnn(&pv.ObjectMeta, annBoundBy, "yes")
		if pv, err = f.updateVolume(ctx, pv); err != nil {
			return err
		}
	} else {
		pv = csiVolume(p, "pvc-"+string(pvc.UID))
		pv.Spec.ClaimRef = claimRef(pvc)
		if pv, err = f.createVolume(ctx, pv, managerProvisioner); err != nil {
			return err
		}
		setAnn(&pvc.ObjectMeta, annProvisioner, driverRBD)
		setAnn(&pvc.ObjectMeta, annProvisionerB, driverRBD)
	}
	pvc.Spec.VolumeName = pv.Name
	setAnn(&pvc.ObjectMeta, annBindCompleted, "yes")
	setAnn(&pvc.ObjectMeta, annBoundBy, "yes")
	f.writes.Add(1)
	if pvc, err = f.cs.CoreV1().PersistentVolumeClaims(pvc.Namespace).Update(ctx, pvc, metav1.UpdateOptions{FieldManager: managerController}); err != nil {
		return fmt.Errorf("binding claim %s/%s: %w", p.namespace, p.claim, err)
	}
	if err := f.volumeStatus(ctx, pv, corev1.VolumeBound); err != nil {
		return err
	}
	pvc.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, AccessModes: pv.Spec.AccessModes, Capacity: pv.Spec.Capacity}
	f.writes.Add(1)
	if _, err := f.cs.CoreV1().PersistentVolumeClaims(pvc.Namespace).UpdateStatus(ctx, pvc, metav1.UpdateOptions{FieldManager: managerController}); err != nil {
		return fmt.Errorf("claim %s/%s status Bound: %w", p.namespace, p.claim, err)
	}
	return nil
}

// released is a volume whose claim was deleted, kept (Retain) and marked Released by
// kube-controller-manager; its claimRef keeps the deleted claim's uid.
func (f *filler) released(ctx context.Context, p pairSpec) error {
	gone := f.claimObject(p)
	gone.UID, gone.ResourceVersion = uuid.NewUUID(), "1"
	var pv *corev1.PersistentVolume
	var err error
	if p.local {
		if pv, err = f.createStatic(ctx, localVolume(p)); err != nil {
			return err
		}
		pv.Spec.ClaimRef = claimRef(gone)
		setAnn(&pv.ObjectMeta, annBoundBy, "yes")
		if pv, err = f.updateVolume(ctx, pv); err != nil {
			return err
		}
	} else {
		pv = csiVolume(p, "pvc-"+string(gone.UID))
		pv.Spec.ClaimRef = claimRef(gone)
		pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
		if pv, err = f.createVolume(ctx, pv, managerProvisioner); err != nil {
			return err
		}
	}
	return f.volumeStatus(ctx, pv, corev1.VolumeReleased)
}

// pendingClaim is a claim waiting: for its first consumer (local) or for the provisioner (CSI,
// annotated by kube-controller-manager).
func (f *filler) pendingClaim(ctx context.Context, p pairSpec) (*corev1.PersistentVolumeClaim, error) {
	pvc, err := f.createClaim(ctx, f.claimObject(p))
	if err != nil || p.local {
		return pvc, err
	}
	setAnn(&pvc.ObjectMeta, annProvisioner, driverRBD)
	setAnn(&pvc.ObjectMeta, annProvisionerB, driverRBD)
	f.writes.Add(1)
	out, err := f.cs.CoreV1().PersistentVolumeClaims(pvc.Namespace).Update(ctx, pvc, metav1.UpdateOptions{FieldManager: managerController})
	if err != nil {
		return nil, fmt.Errorf("annotating claim %s/%s: %w", pvc.Namespace, pvc.Name, err)
	}
	return out, nil
}

// available is a free static volume: a local disk, or an NFS share (in a class no pending
// claim of the fill asks for, so that no binder binds the fill's claims to them).
func (f *filler) available(ctx context.Context, p pairSpec) error {
	pv := localVolume(p)
	if !p.local {
		pv = nfsVolume(p)
	}
	pv, err := f.createStatic(ctx, pv)
	if err != nil {
		return err
	}
	return f.volumeStatus(ctx, pv, corev1.VolumeAvailable)
}

func setAnn(m *metav1.ObjectMeta, k, v string) {
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[k] = v
}

// setLastApplied records obj as kubectl apply does: the applied manifest (no status, no
// server-set metadata) as JSON in the last-applied annotation.
func setLastApplied(m *metav1.ObjectMeta, obj any) error {
	data, err := json.Marshal(obj)
	if err != nil {
		return fmt.Errorf("encoding the applied configuration of %s: %w", m.Name, err)
	}
	var manifest map[string]any
	if err := json.Unmarshal(data, &manifest); err != nil {
		return fmt.Errorf("decoding the applied configuration of %s: %w", m.Name, err)
	}
	delete(manifest, "status")
	if md, ok := manifest["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp")
		if _, ok := md["annotations"]; !ok {
			md["annotations"] = map[string]any{}
		}
	}
	if data, err = json.Marshal(manifest); err != nil {
		return fmt.Errorf("encoding the applied configuration of %s: %w", m.Name, err)
	}
	setAnn(m, annLastApplied, string(data)+"\n")
	return nil
}

// parallel runs do(0..n-1) with f.workers goroutines, stopping at the first error.
func (f *filler) parallel(ctx context.Context, n int, do func(context.Context, int) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(f.workers)
	for i := range n {
		g.Go(func() error { return do(gctx, i) })
	}
	return g.Wait()
}
