package populators

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/internal/devcluster"
	"github.com/pvguard/pvguard/test/csisidecars"
)

// Conn is a stand-in's connection to the apiserver as its own ServiceAccount, with what the
// apiserver told it: warnings (client-go's warning handler) and the errors of its writes.
type Conn struct {
	// ServiceAccount is namespace/name.
	ServiceAccount string
	Kube           kubernetes.Interface
	Dynamic        dynamic.Interface
	// Config is the connection's config (its token, its warning handler).
	Config *rest.Config

	warnings *devcluster.Warnings
	mu       sync.Mutex
	errs     []string
	seenWarn []string
}

// Connect installs rbac (the component's upstream RBAC, created or replaced), mints a token for
// the ServiceAccount namespace/name through the TokenRequest API (a kubeconfig in dir, as
// test/csisidecars gives the sidecars) and connects with it.
func Connect(ctx context.Context, admin *rest.Config, rbac []client.Object, namespace, name, dir string) (*Conn, error) {
	c, err := client.New(admin, client.Options{})
	if err != nil {
		return nil, err
	}
	if err := csisidecars.EnsureNamespace(ctx, c, namespace); err != nil {
		return nil, err
	}
	if err := csisidecars.Apply(ctx, c, rbac); err != nil {
		return nil, fmt.Errorf("installing %s/%s's RBAC: %w", namespace, name, err)
	}
	kubeconfig := filepath.Join(dir, namespace+"-"+name+".kubeconfig")
	if err := csisidecars.ServiceAccountKubeconfig(ctx, admin, namespace, name, kubeconfig); err != nil {
		return nil, err
	}
	cfg, err := csisidecars.RESTConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	w := &devcluster.Warnings{}
	cfg.WarningHandler = w
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Conn{ServiceAccount: namespace + "/" + name, Kube: kc, Dynamic: dc, Config: cfg, warnings: w}, nil
}

// Warnings returns every warning the apiserver relayed to the stand-in so far.
func (c *Conn) Warnings() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seenWarn = append(c.seenWarn, c.warnings.Take()...)
	return append([]string(nil), c.seenWarn...)
}

// recordErr keeps a failed step's error (the stand-in retries as upstream does).
func (c *Conn) recordErr(err error) {
	if err == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.errs = append(c.errs, err.Error())
}

// Errors returns the errors the stand-in's steps failed with so far (upstream retries them).
func (c *Conn) Errors() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.errs...)
}

// Denials returns the errors that were an admission webhook's denial.
func (c *Conn) Denials() []string {
	var out []string
	for _, e := range c.Errors() {
		if strings.Contains(e, "denied the request") {
			out = append(out, e)
		}
	}
	return out
}

// pollClaims is the stand-ins' stand-in for an informer: every 100 ms until ctx ends, it lists
// every claim and hands sync each one whose resourceVersion is not the one done records for it
// (a claim the stand-in has finished with at that version), recording sync's errors.
func (c *Conn) pollClaims(ctx context.Context, done map[types.UID]string, sync func(*corev1.PersistentVolumeClaim) error) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		claims, err := c.Kube.CoreV1().PersistentVolumeClaims("").List(ctx, metav1.ListOptions{})
		if err != nil {
			if ctx.Err() == nil {
				c.recordErr(err)
			}
			continue
		}
		for i := range claims.Items {
			pvc := &claims.Items[i]
			if done[pvc.UID] == pvc.ResourceVersion {
				continue
			}
			if err := sync(pvc); err != nil && ctx.Err() == nil {
				c.recordErr(fmt.Errorf("syncing claim %s/%s: %w", pvc.Namespace, pvc.Name, err))
			}
		}
	}
}
