package devcluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
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
// (found by walking up from the working directory). It fails, naming the directory and how to
// fill it, when either binary is not there.
func AssetsDir() (string, error) {
	if d := os.Getenv("KUBEBUILDER_ASSETS"); d != "" {
		return d, checkAssets(d)
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.Contains(string(data), "module github.com/pvguard/pvguard\n") {
			bin := filepath.Join(dir, "bin")
			return bin, checkAssets(bin)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("cannot find the pvguard module root; set KUBEBUILDER_ASSETS to the directory holding kube-apiserver and etcd")
		}
		dir = parent
	}
}

// binaries are the programs a control plane is started from, all in one assets directory.
var binaries = []string{"etcd", "kube-apiserver"}

// checkAssets fails unless dir holds every one of binaries.
func checkAssets(dir string) error {
	for _, b := range binaries {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return fmt.Errorf("no %s in %s: run `make tools` (it builds the control plane from the Go module proxy into bin/), or point KUBEBUILDER_ASSETS or --assets at a directory holding %s", b, dir, strings.Join(binaries, " and "))
		}
	}
	return nil
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
	// APIServerFlags are extra kube-apiserver flags (name without dashes -> value), e.g.
	// admission-control-config-file.
	APIServerFlags map[string]string
}

// StartWith is Start with options.
func StartWith(assets string, o Options) (*ControlPlane, error) {
	if err := checkAssets(assets); err != nil {
		return nil, err
	}
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
	for name, value := range o.APIServerFlags {
		env.ControlPlane.GetAPIServer().Configure().Set(name, value)
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
