package cluster

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/binder"
)

// ControllerManagerArgs are kube-controller-manager's flags in a mode, after
// hack/local-up-cluster.sh: every default controller ("*") but the node-lifecycle-controller (no
// kubelet renews the nodes' Leases, so it would mark them NotReady and taint them) and, in
// ModePVGuard, the persistentvolume-binder-controller; each controller as its own
// ServiceAccount (--use-service-account-credentials; the token controller signs with the
// apiserver's service-account key, the root CA is published to namespaces); no leader election
// (one replica) and no serving port. The client rate limits and --pvclaimbinder-sync-period
// (15 s) keep their defaults.
func (c *Cluster) ControllerManagerArgs(m Mode) []string {
	controllers := "*,-node-lifecycle-controller"
	if m == ModePVGuard {
		controllers += ",-persistentvolume-binder-controller"
	}
	args := []string{
		"--kubeconfig=" + c.files.kcmKubeconfig,
		"--use-service-account-credentials=true",
		"--service-account-private-key-file=" + c.cp.ServiceAccountSigningKeyFile(),
		"--root-ca-file=" + c.files.caFile,
		"--controllers=" + controllers,
		"--leader-elect=false",
		"--secure-port=0",
		"--v=2",
	}
	return append(args, c.kcmExtra...)
}

// Use runs the cluster in mode m: kube-controller-manager and pvguard are (re)started when the
// mode changes, pvguard's webhook configurations are pointed at the new instance, and Use returns
// once both answer: a new volume is made Available by the mode's binder and removed through the
// pv-protection controller, and a claim is removed through the pvc-protection controller.
func (c *Cluster) Use(m Mode) error {
	if m != ModePVGuard && m != ModeUpstream {
		return fmt.Errorf("cluster mode %q: want %q or %q", m, ModePVGuard, ModeUpstream)
	}
	if c.mode == m && c.pvguard != nil && c.Alive() == nil {
		return nil
	}
	if err := c.stopMode(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var err error
	c.kcm, err = StartProcess(c.LogDir, "kube-controller-manager", filepath.Join(c.assets, "kube-controller-manager"), c.ControllerManagerArgs(m)...)
	if err != nil {
		return err
	}
	mode := binder.ModeOff
	switch {
	case m == ModePVGuard:
		mode = binder.ModeActive
	case c.shadow:
		mode = binder.ModeShadow
	}
	if c.pvguard, err = c.startPVGuard(ctx, mode); err != nil {
		return err
	}
	c.mode = m
	if err := c.probeMode(ctx, m); err != nil {
		return fmt.Errorf("mode %s: %w", m, err)
	}
	return nil
}

// stopMode stops pvguard and kube-controller-manager, pvguard first: with both binders briefly
// running, pvguard's active binder must never overlap kube-controller-manager's.
func (c *Cluster) stopMode() error {
	var errs []error
	if c.pvguard != nil {
		errs = append(errs, c.pvguard.Stop())
		c.pvguard = nil
	}
	if c.kcm != nil {
		errs = append(errs, c.kcm.Stop())
		c.kcm = nil
	}
	c.mode, c.stoppedBinder = "", ""
	return errors.Join(errs...)
}

// probeMode checks what every flow relies on.
func (c *Cluster) probeMode(ctx context.Context, m Mode) error {
	name := fmt.Sprintf("cluster-probe-%s-%d", m, time.Now().UnixNano())
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              "cluster-probe",
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/probe"}},
		},
	}
	if err := c.Client.Create(ctx, pv); err != nil {
		return fmt.Errorf("creating probe volume: %w", err)
	}
	if err := c.poll(ctx, time.Minute, "the "+string(m)+" binder to make the probe volume Available", func(ctx context.Context) (bool, error) {
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(pv), pv); err != nil {
			return false, err
		}
		return pv.Status.Phase == corev1.VolumeAvailable, c.Alive()
	}); err != nil {
		return err
	}
	if err := c.Client.Delete(ctx, pv); err != nil {
		return fmt.Errorf("deleting probe volume: %w", err)
	}
	if err := c.poll(ctx, time.Minute, "the pv-protection controller to let the probe volume go", func(ctx context.Context) (bool, error) {
		err := c.Client.Get(ctx, client.ObjectKeyFromObject(pv), pv)
		return apierrors.IsNotFound(err), errors.Join(ignoreNotFound(err), c.Alive())
	}); err != nil {
		return err
	}
	empty := ""
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: probeNamespace, Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &empty,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")}},
		},
	}
	if err := c.Client.Create(ctx, pvc); err != nil {
		return fmt.Errorf("creating probe claim: %w", err)
	}
	if err := c.Client.Delete(ctx, pvc); err != nil {
		return fmt.Errorf("deleting probe claim: %w", err)
	}
	return c.poll(ctx, time.Minute, "the pvc-protection controller to let the probe claim go", func(ctx context.Context) (bool, error) {
		err := c.Client.Get(ctx, client.ObjectKeyFromObject(pvc), pvc)
		return apierrors.IsNotFound(err), errors.Join(ignoreNotFound(err), c.Alive())
	})
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// ControllerManagerLog is kube-controller-manager's log file.
func (c *Cluster) ControllerManagerLog() string {
	return filepath.Join(c.LogDir, "kube-controller-manager.log")
}

// SchedulerLog is kube-scheduler's log file.
func (c *Cluster) SchedulerLog() string { return filepath.Join(c.LogDir, "kube-scheduler.log") }

// StopControllerManager stops kube-controller-manager and leaves everything else running, as
// during a rollout of it; StartControllerManager starts it again with the same flags. pvguard
// keeps running, and its counters go on. A starting kube-controller-manager re-processes every
// object its controllers watch: with the PersistentVolumeClaimUnusedSinceTime gate on (beta,
// default on in 1.37) the pvc-protection controller writes the Unused condition of each claim
// whose condition is missing or out of date.
func (c *Cluster) StopControllerManager() error {
	if c.kcm == nil {
		return errors.New("kube-controller-manager is not running: use Use")
	}
	err := c.kcm.Stop()
	c.kcm = nil
	if err != nil {
		return fmt.Errorf("stopping kube-controller-manager: %w", err)
	}
	return nil
}

// StartControllerManager starts the kube-controller-manager StopControllerManager stopped, with
// the flags of the cluster's mode. It returns once the process runs; what it writes then is the
// caller's to wait for.
func (c *Cluster) StartControllerManager() error {
	if c.kcm != nil {
		return errors.New("kube-controller-manager is running")
	}
	if c.mode == "" {
		return errors.New("the cluster runs no mode: use Use")
	}
	var err error
	c.kcm, err = StartProcess(c.LogDir, "kube-controller-manager", filepath.Join(c.assets, "kube-controller-manager"), c.ControllerManagerArgs(c.mode)...)
	return err
}
