// Package cluster runs one real control plane for end-to-end tests in which nothing that can run
// here is impersonated: etcd and kube-apiserver (envtest), the real kube-scheduler and
// kube-controller-manager from bin/, Node objects that the scheduler accepts (no kubelet runs:
// pods are only scheduled), and `pvguard serve` installed as the Helm chart installs it, running as
// the chart's ServiceAccount with the chart's RBAC, policy config and webhook configurations.
//
// The cluster runs in one of two modes at a time (Use):
//
//   - ModePVGuard: kube-controller-manager without its persistentvolume-binder-controller and
//     pvguard --binder=active (the configuration docs/binder.md describes);
//   - ModeUpstream: kube-controller-manager with its binder, pvguard --binder=off, its webhooks
//     still on.
//
// Every component's output goes to a file in LogDir; failure messages name them (Logs).
//
// With Options.CSI, the CSI storage path runs too: a CSI plugin of ours behind the real
// external-provisioner and external-resizer (see CSI); with Options.Snapshots as well, the
// VolumeSnapshot CRDs, the real snapshot-controller and the csi-snapshotter. The local static
// provisioner stand-in (test/localstatic) runs in-process in the tests that need it.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"sort"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/pvguard/pvguard/binder"
	"github.com/pvguard/pvguard/internal/devcluster"
	"github.com/pvguard/pvguard/test/harness"
)

// Mode says which binder the cluster runs.
type Mode string

const (
	// ModePVGuard: pvguard --binder=active, kube-controller-manager without its binder.
	ModePVGuard Mode = "pvguard"
	// ModeUpstream: kube-controller-manager's persistentvolume-binder-controller binds, pvguard
	// runs with --binder=off (webhooks on).
	ModeUpstream Mode = "upstream"
)

// Modes are both modes, pvguard's first.
var Modes = []Mode{ModePVGuard, ModeUpstream}

// Identities the components authenticate as. kube-controller-manager and kube-scheduler use
// client certificates for the users the apiserver's bootstrap RBAC grants their roles to; with
// --use-service-account-credentials kube-controller-manager then asks the apiserver for a token
// per controller (TokenRequest) and each controller acts as its own ServiceAccount in
// kube-system (persistent-volume-binder, pv-protection-controller, pvc-protection-controller,
// expand-controller, generic-garbage-collector, ...), as in a kubeadm cluster.
const (
	ControllerManagerUser = "system:kube-controller-manager"
	SchedulerUser         = "system:kube-scheduler"
)

// Options configure Start.
type Options struct {
	// Nodes are the fake nodes' names (default node-a, node-b, node-c).
	Nodes []string
	// LogDir receives every component's log (default: a new temporary directory).
	LogDir string
	// ControllerManagerArgs are appended to kube-controller-manager's flags in both modes (a
	// later flag wins), e.g. its --kube-api-qps for a like-for-like rate with pvguard's.
	ControllerManagerArgs []string
	// UpstreamPVGuardBinder is pvguard's --binder in ModeUpstream: binder.ModeOff (default, also
	// "") or binder.ModeShadow (pvguard decides beside kube-controller-manager's binder and
	// reports disagreements).
	UpstreamPVGuardBinder binder.Mode
	// CSI starts the CSI storage path (see CSI) once the nodes exist.
	CSI bool
	// Snapshots adds the snapshot path to the CSI one (see CSI); it needs CSI.
	Snapshots bool
	// ChartValues, when set, edits the chart values pvguard is installed with (after binder.mode,
	// certManager.enabled and webhook.components are set), e.g. binder.noVolumeFitsAfter or
	// policy.
	ChartValues func(values map[string]any)
	// Components are identities added to the chart's webhook.components.identities (entries
	// such as {"namespace": "velero"} or {"serviceAccount": "gitops/deployer"}): the storage
	// stack the tests run as ServiceAccounts besides the CSI sidecars, whose writes must go to
	// the components' webhooks as in a cluster whose installer listed them.
	Components []map[string]string
}

// Cluster is the running control plane and components.
type Cluster struct {
	// LogDir holds every component's log and the files given to them.
	LogDir string
	// Admin reaches the apiserver as a cluster admin (envtest's admin user).
	Admin *rest.Config
	// AdminWarnings collects the warnings the apiserver relays to Admin's requests (pvguard's
	// warn findings among them), instead of printing them.
	AdminWarnings *devcluster.Warnings
	// Client is an admin client.
	Client client.Client
	// Clientset is an admin clientset.
	Clientset kubernetes.Interface
	// Nodes are the fake nodes' names.
	Nodes []string
	// CSI is the CSI storage path when Options.CSI asked for it, else nil.
	CSI *CSI

	assets    string
	kcmExtra  []string
	shadow    bool
	cp        *devcluster.ControlPlane
	scheduler *Process
	kcm       *Process
	pvguard   *PVGuard
	mode      Mode
	files     files

	chartValues func(map[string]any) // Options.ChartValues
	components  []map[string]string  // Options.Components
	// webhookValues are the chart values pvguard's webhook configurations were last rendered
	// with; stoppedBinder is the --binder of a pvguard StopPVGuard stopped ("" when none was).
	webhookValues map[string]any
	stoppedBinder binder.Mode
}

// files are the paths of what the components are given.
type files struct {
	caFile, kcmKubeconfig, schedulerConfig string
	pvguardCerts                           string
	pvguardCA                              []byte
}

// Start starts etcd, kube-apiserver, the Node objects and kube-scheduler. Use then starts
// kube-controller-manager and pvguard in a mode.
func Start(o Options) (_ *Cluster, err error) {
	switch o.UpstreamPVGuardBinder {
	case "", binder.ModeOff, binder.ModeShadow:
	default:
		return nil, fmt.Errorf("UpstreamPVGuardBinder %q: want off or shadow", o.UpstreamPVGuardBinder)
	}
	if o.Snapshots && !o.CSI {
		return nil, errors.New("Options.Snapshots needs Options.CSI: snapshots are taken through the CSI plugin")
	}
	if len(o.Nodes) == 0 {
		o.Nodes = []string{"node-a", "node-b", "node-c"}
	}
	if o.LogDir == "" {
		if o.LogDir, err = os.MkdirTemp("", "pvguard-cluster-"); err != nil {
			return nil, err
		}
	}
	assets, err := devcluster.AssetsDir()
	if err != nil {
		return nil, err
	}
	for _, bin := range []string{"kube-controller-manager", "kube-scheduler"} {
		if _, err := os.Stat(filepath.Join(assets, bin)); err != nil {
			return nil, fmt.Errorf("no %s in %s: run `make tools`", bin, assets)
		}
	}
	cp, err := devcluster.StartWith(assets, devcluster.Options{LogDir: o.LogDir})
	if err != nil {
		return nil, fmt.Errorf("%w (logs in %s)", err, o.LogDir)
	}
	c := &Cluster{LogDir: o.LogDir, Admin: rest.CopyConfig(cp.Config), Nodes: o.Nodes, assets: assets, cp: cp, kcmExtra: o.ControllerManagerArgs, shadow: o.UpstreamPVGuardBinder == binder.ModeShadow, chartValues: o.ChartValues, components: o.Components}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.Stop())
		}
	}()
	c.Admin.QPS, c.Admin.Burst = 200, 400 // the tests' own reads must not queue behind their writes
	c.AdminWarnings = &devcluster.Warnings{}
	c.Admin.WarningHandler = c.AdminWarnings
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if c.Client, err = client.New(c.Admin, client.Options{Scheme: scheme}); err != nil {
		return nil, err
	}
	if c.Clientset, err = kubernetes.NewForConfig(c.Admin); err != nil {
		return nil, err
	}
	if err := c.writeFiles(); err != nil {
		return nil, err
	}
	// pvguard's audit writes openreports.io reports: the chart installs their CRDs.
	crds := filepath.Join(repoRoot(), "charts", "pvguard", "crds")
	if _, err := envtest.InstallCRDs(c.Admin, envtest.CRDInstallOptions{Paths: []string{crds}, ErrorIfPathMissing: true}); err != nil {
		return nil, fmt.Errorf("installing the openreports.io CRDs from %s: %w", crds, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, n := range o.Nodes {
		if err := c.createNode(ctx, n); err != nil {
			return nil, err
		}
	}
	if c.scheduler, err = StartProcess(c.LogDir, "kube-scheduler", filepath.Join(assets, "kube-scheduler"),
		"--config="+c.files.schedulerConfig, "--secure-port=0", "--v=2"); err != nil {
		return nil, err
	}
	if err := c.probeScheduler(ctx); err != nil {
		return nil, err
	}
	if o.CSI {
		if c.CSI, err = c.startCSI(ctx, o.Snapshots); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Logs names the log files, for failure messages.
func (c *Cluster) Logs() string {
	entries, _ := os.ReadDir(c.LogDir)
	var names []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".log") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return fmt.Sprintf("logs in %s: %s", c.LogDir, strings.Join(names, ", "))
}

// AdminKubeconfig is the path of a kubeconfig for the cluster's admin, for commands run against
// the cluster (kubectl, pvguard explain).
func (c *Cluster) AdminKubeconfig() string { return filepath.Join(c.LogDir, "admin.kubeconfig") }

// Mode is the current mode ("" before the first Use).
func (c *Cluster) Mode() Mode { return c.mode }

// PVGuard is the running pvguard.
func (c *Cluster) PVGuard() *PVGuard { return c.pvguard }

// Alive returns an error naming the log of any component that stopped on its own.
func (c *Cluster) Alive() error {
	var errs []error
	for _, p := range []*Process{c.scheduler, c.kcm} {
		if p != nil {
			errs = append(errs, p.Alive())
		}
	}
	if c.pvguard != nil {
		errs = append(errs, c.pvguard.Alive())
	}
	if c.CSI != nil {
		errs = append(errs, c.CSI.alive())
	}
	return errors.Join(errs...)
}

// Stop stops every component and the control plane. The log directory is left in place.
func (c *Cluster) Stop() error {
	var errs []error
	if c.CSI != nil {
		errs = append(errs, c.CSI.stop())
		c.CSI = nil
	}
	if c.pvguard != nil {
		errs = append(errs, c.pvguard.Stop())
		c.pvguard = nil
	}
	for _, p := range []*Process{c.kcm, c.scheduler} {
		if p != nil {
			errs = append(errs, p.Stop())
		}
	}
	c.kcm, c.scheduler = nil, nil
	if c.cp != nil {
		errs = append(errs, c.cp.Stop())
		c.cp = nil
	}
	return errors.Join(errs...)
}

// writeFiles writes the CA, the components' kubeconfigs and the scheduler's configuration.
func (c *Cluster) writeFiles() error {
	write := func(name string, data []byte) (string, error) {
		p := filepath.Join(c.LogDir, name)
		return p, os.WriteFile(p, data, 0o600)
	}
	var err error
	if c.files.caFile, err = write("apiserver-ca.crt", c.Admin.CAData); err != nil {
		return err
	}
	if _, err = write("admin.kubeconfig", c.cp.KubeConfig); err != nil {
		return err
	}
	kcm, err := c.cp.UserKubeconfig(ControllerManagerUser)
	if err != nil {
		return err
	}
	if c.files.kcmKubeconfig, err = write("kube-controller-manager.kubeconfig", kcm); err != nil {
		return err
	}
	sched, err := c.cp.UserKubeconfig(SchedulerUser)
	if err != nil {
		return err
	}
	schedKubeconfig, err := write("kube-scheduler.kubeconfig", sched)
	if err != nil {
		return err
	}
	// As hack/local-up-cluster.sh configures it, without leader election (one replica). The
	// VolumeBinding plugin keeps its defaults (bindTimeoutSeconds 600).
	conf := fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %s
leaderElection:
  leaderElect: false
`, schedKubeconfig)
	if c.files.schedulerConfig, err = write("kube-scheduler.yaml", []byte(conf)); err != nil {
		return err
	}
	return c.writePVGuardCerts()
}

// createNode creates a Node as a kubelet registers one (the labels every kubelet sets), reports
// it Ready with room for pods, and removes the not-ready taint the apiserver's admission put on
// it. kube-controller-manager's node-lifecycle-controller is disabled (no kubelet renews a Lease),
// so nothing marks it NotReady or taints it again.
func (c *Cluster) createNode(ctx context.Context, name string) error {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		corev1.LabelHostname: name, corev1.LabelOSStable: "linux", corev1.LabelArchStable: goruntime.GOARCH,
		corev1.LabelTopologyZone: "zone-" + name,
	}}}
	if err := c.Client.Create(ctx, n); err != nil {
		return fmt.Errorf("creating node %s: %w", name, err)
	}
	room := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi"),
		corev1.ResourcePods: resource.MustParse("250"), corev1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
	}
	now := metav1.Now()
	n.Status = corev1.NodeStatus{
		Capacity: room, Allocatable: room,
		Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: now, LastTransitionTime: now},
			{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, LastHeartbeatTime: now, LastTransitionTime: now},
			{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, LastHeartbeatTime: now, LastTransitionTime: now},
			{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, LastHeartbeatTime: now, LastTransitionTime: now},
		},
		NodeInfo: corev1.NodeSystemInfo{OperatingSystem: "linux", Architecture: goruntime.GOARCH, KubeletVersion: "v1.37.2"},
	}
	if err := c.Client.Status().Update(ctx, n); err != nil {
		return fmt.Errorf("reporting node %s Ready: %w", name, err)
	}
	n.Spec.Taints = nil
	if err := c.Client.Update(ctx, n); err != nil {
		return fmt.Errorf("removing the taints of node %s: %w", name, err)
	}
	return nil
}

// probeScheduler waits until the scheduler places a pod.
func (c *Cluster) probeScheduler(ctx context.Context) error {
	if err := c.ensureNamespace(ctx, probeNamespace); err != nil {
		return err
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: probeNamespace, GenerateName: "probe-"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}
	if err := c.Client.Create(ctx, pod); err != nil {
		return fmt.Errorf("creating the scheduler's probe pod: %w", err)
	}
	err := c.poll(ctx, time.Minute, "kube-scheduler to place a pod", func(ctx context.Context) (bool, error) {
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return false, err
		}
		return pod.Spec.NodeName != "", c.scheduler.Alive()
	})
	if err != nil {
		return err
	}
	return c.DeletePod(ctx, pod)
}

// DeletePod deletes a pod at once (grace period 0): no kubelet runs to confirm a graceful
// deletion of a scheduled pod, so a graceful one would leave it Terminating for ever.
func (c *Cluster) DeletePod(ctx context.Context, pod *corev1.Pod) error {
	err := c.Client.Delete(ctx, pod, client.GracePeriodSeconds(0))
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

const probeNamespace = "cluster-probe"

func (c *Cluster) ensureNamespace(ctx context.Context, name string) error {
	err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", name, err)
	}
	return nil
}

// poll waits for cond with harness.Poll; a failure names what was awaited, the last error and
// the logs.
func (c *Cluster) poll(ctx context.Context, timeout time.Duration, what string, cond func(context.Context) (bool, error)) error {
	if err := harness.Poll(ctx, harness.PollInterval, timeout, cond); err != nil {
		return fmt.Errorf("waiting for %s: %w (%s)", what, err, c.Logs())
	}
	return nil
}

// serviceAccountToken asks the apiserver for a token of a ServiceAccount, as the kubelet
// projects one into a pod.
func (c *Cluster) serviceAccountToken(ctx context.Context, namespace, name string) (string, error) {
	exp := int64(24 * 3600)
	tr, err := c.Clientset.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("requesting a token for ServiceAccount %s/%s: %w", namespace, name, err)
	}
	return tr.Status.Token, nil
}

// repoRoot is the checkout this package was built from.
func repoRoot() string {
	_, file, _, _ := goruntime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// ServiceAccountConfig creates the ServiceAccount namespace/name (and its namespace) when
// missing and returns a connection authenticated by a token the apiserver issues for it
// (TokenRequest), as a pod running under it would have: a component given it acts as that
// account, with exactly the permissions bound to it.
func (c *Cluster) ServiceAccountConfig(ctx context.Context, namespace, name string) (*rest.Config, error) {
	if err := c.ensureNamespace(ctx, namespace); err != nil {
		return nil, err
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if err := c.Client.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating ServiceAccount %s/%s: %w", namespace, name, err)
	}
	token, err := c.serviceAccountToken(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	cfg := rest.AnonymousClientConfig(c.Admin)
	cfg.BearerToken = token
	cfg.WarningHandler = nil
	cfg.QPS, cfg.Burst = 0, 0 // client-go's defaults, as the component would have
	return cfg, nil
}
