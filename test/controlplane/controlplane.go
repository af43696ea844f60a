// Package controlplane starts a real kube-apiserver and etcd (controller-runtime envtest) from
// the binaries the tools module builds into bin/, and installs pvguard's webhook configurations
// against a locally served pvguard. The end-to-end tests and `pvguard dev` both use it.
package controlplane

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/pvguard/pvguard/charts"
)

// ControlPlane is a running kube-apiserver with its etcd.
type ControlPlane struct {
	env  *envtest.Environment
	logs []*os.File
	// Config reaches the apiserver as a cluster admin.
	Config *rest.Config
	// KubeConfig is the same as a kubeconfig file.
	KubeConfig []byte
}

// AssetsDir finds kube-apiserver and etcd: $KUBEBUILDER_ASSETS, else bin/ at the module root
// (found by walking up from the working directory).
func AssetsDir() (string, error) {
	if d := os.Getenv("KUBEBUILDER_ASSETS"); d != "" {
		return d, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.Contains(string(data), "module github.com/pvguard/pvguard\n") {
			bin := filepath.Join(dir, "bin")
			if _, err := os.Stat(filepath.Join(bin, "kube-apiserver")); err != nil {
				return "", fmt.Errorf("no kube-apiserver in %s: run `make tools` (it builds the control plane from the Go module proxy)", bin)
			}
			return bin, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("cannot find the pvguard module root; set KUBEBUILDER_ASSETS to the directory holding kube-apiserver and etcd")
		}
		dir = parent
	}
}

// Start starts etcd and kube-apiserver from the binaries in assets.
func Start(assets string) (*ControlPlane, error) { return StartWith(assets, Options{}) }

// Options adjust StartWith.
type Options struct {
	// LogDir, when set, receives the output of kube-apiserver and etcd (kube-apiserver.log,
	// etcd.log); otherwise it is discarded.
	LogDir string
	// EtcdFlags are extra etcd flags (name without dashes -> value), e.g. a larger
	// quota-backend-bytes for a control plane filled with hundreds of thousands of objects.
	EtcdFlags map[string]string
}

// StartWith is Start with options.
func StartWith(assets string, o Options) (*ControlPlane, error) {
	env := &envtest.Environment{
		BinaryAssetsDirectory:    assets,
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}
	c := &ControlPlane{env: env}
	etcd := &envtest.Etcd{}
	env.ControlPlane.Etcd = etcd
	for name, value := range o.EtcdFlags {
		etcd.Configure().Set(name, value)
	}
	if o.LogDir != "" {
		api, err := c.logFile(o.LogDir, "kube-apiserver.log")
		if err != nil {
			return nil, err
		}
		etcdLog, err := c.logFile(o.LogDir, "etcd.log")
		if err != nil {
			c.closeLogs()
			return nil, err
		}
		env.ControlPlane.GetAPIServer().Out, env.ControlPlane.GetAPIServer().Err = api, api
		etcd.Out, etcd.Err = etcdLog, etcdLog
	}
	cfg, err := env.Start()
	if err != nil {
		c.closeLogs()
		return nil, fmt.Errorf("starting kube-apiserver and etcd from %s: %w", assets, err)
	}
	c.Config, c.KubeConfig = cfg, env.KubeConfig
	return c, nil
}

func (c *ControlPlane) logFile(dir, name string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening the control plane's log: %w", err)
	}
	c.logs = append(c.logs, f)
	return f, nil
}

func (c *ControlPlane) closeLogs() {
	for _, f := range c.logs {
		_ = f.Close()
	}
	c.logs = nil
}

// Stop stops the apiserver and etcd and removes their data.
func (c *ControlPlane) Stop() error {
	defer c.closeLogs()
	return c.env.Stop()
}

// UserKubeconfig returns a kubeconfig that authenticates as the user name in groups with a
// client certificate the apiserver trusts (envtest's AddUser): how kube-controller-manager and
// kube-scheduler reach the apiserver as system:kube-controller-manager and system:kube-scheduler,
// the identities the apiserver's bootstrap RBAC grants their permissions to.
func (c *ControlPlane) UserKubeconfig(name string, groups ...string) ([]byte, error) {
	u, err := c.env.AddUser(envtest.User{Name: name, Groups: groups}, nil)
	if err != nil {
		return nil, fmt.Errorf("adding user %s: %w", name, err)
	}
	kc, err := u.KubeConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig of user %s: %w", name, err)
	}
	return kc, nil
}

// ServiceAccountSigningKeyFile is the private key the apiserver signs and verifies service
// account tokens with (envtest generates it into the apiserver's certificate directory); given
// to kube-controller-manager's --service-account-private-key-file, its token controller signs
// the tokens it issues with it.
func (c *ControlPlane) ServiceAccountSigningKeyFile() string {
	return filepath.Join(c.env.ControlPlane.GetAPIServer().CertDir, "sa-signer.key")
}

// WebhookOptions say how the apiserver reaches a pvguard served outside the cluster.
type WebhookOptions struct {
	// BaseURL is https://host:port of pvguard's listener.
	BaseURL  string
	CABundle []byte
	// FailurePolicy defaults to Fail, as in production.
	FailurePolicy admissionregistrationv1.FailurePolicyType
}

// InstallWebhooks creates (or replaces) pvguard's webhook configurations exactly as the Helm chart
// renders them (charts.WebhookConfigurations), but pointed at a URL instead of a Service, and
// waits until the apiserver calls them.
func InstallWebhooks(ctx context.Context, cfg *rest.Config, o WebhookOptions) error {
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return fmt.Errorf("creating client: %w", err)
	}
	values := map[string]any{}
	if o.FailurePolicy != "" {
		values["webhook"] = map[string]any{"failurePolicy": string(o.FailurePolicy)}
	}
	v, m, err := charts.WebhookConfigurations(ChartRelease, ChartNamespace, values)
	if err != nil {
		return fmt.Errorf("rendering the chart's webhook configurations: %w", err)
	}
	for i := range v.Webhooks {
		toURL(&v.Webhooks[i].ClientConfig, o.BaseURL, o.CABundle)
	}
	for i := range m.Webhooks {
		toURL(&m.Webhooks[i].ClientConfig, o.BaseURL, o.CABundle)
	}
	for _, obj := range []client.Object{v, m} {
		if err := c.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("removing old %s: %w", obj.GetName(), err)
		}
		if err := c.Create(ctx, obj); err != nil {
			return fmt.Errorf("creating webhook configuration %s: %w", obj.GetName(), err)
		}
	}
	return WaitForWebhook(ctx, c)
}

// toURL points a webhook rendered for in-cluster use (a Service) at a URL: a test apiserver
// cannot reach a Service.
func toURL(cc *admissionregistrationv1.WebhookClientConfig, base string, caBundle []byte) {
	url := strings.TrimSuffix(base, "/") + *cc.Service.Path
	cc.URL, cc.Service = &url, nil
	if len(caBundle) > 0 {
		cc.CABundle = caBundle
	}
}

// The release the chart is rendered as for the test control plane and `pvguard dev`.
const (
	ChartRelease   = "pvguard"
	ChartNamespace = "pvguard-system"
)

// WaitForWebhook waits until the apiserver sends volumes to pvguard: a dry-run create of a
// volume whose claimRef has the wrong kind is refused by PVG014.
func WaitForWebhook(ctx context.Context, c client.Client) error {
	probe := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pvguard-probe"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/probe"}},
			ClaimRef:               &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "default", Name: "probe"},
		},
	}
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		last = c.Create(ctx, probe.DeepCopy(), client.DryRunAll)
		return last != nil && strings.Contains(last.Error(), "[PVG014"), nil
	})
	if err != nil {
		return fmt.Errorf("pvguard's webhook never answered (last probe result: %v): %w", last, err)
	}
	return nil
}
