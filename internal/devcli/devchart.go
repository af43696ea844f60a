package devcli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/pvguard/pvguard/charts"
)

// devValues are the chart values pvguard-dev installs with: one replica, the binder active
// (no kube-controller-manager runs beside it), a quick resync and shutdown for a local loop, and
// the demo's policy (volume-grab denied). Everything else is the chart's default; in particular
// the chart adds its own ServiceAccount to the policy's controllers, as for any active install.
func devValues() map[string]any {
	return map[string]any{
		"replicas":        1,
		"binder":          map[string]any{"mode": "active", "resync": "2s"},
		"shutdownDelay":   "0s",
		"shutdownTimeout": "5s",
		"policy": map[string]any{
			"rules": map[string]any{"volume-grab": map[string]any{"action": "deny"}},
		},
	}
}

// chartInstall is what `helm install` of the chart puts into a cluster, as far as a pvguard
// running outside the cluster needs it: the ServiceAccount and RBAC to create, the arguments the
// Deployment runs `pvguard serve` with, and the policy config its ConfigMap holds.
type chartInstall struct {
	Namespace      string
	ServiceAccount string
	// Objects are the ServiceAccount, (Cluster)Roles and (Cluster)RoleBindings as rendered.
	Objects []*unstructured.Unstructured
	// ServeArgs are the pvguard container's arguments after "serve".
	ServeArgs []string
	// Policy is the policy ConfigMap's policy.yaml.
	Policy string
}

// renderChartInstall renders the chart and picks out what a local pvguard runs with. The
// Service, webhook configurations (installed pointing at a URL instead) and the Deployment
// itself are left out: pvguard runs in this process, not in a pod.
func renderChartInstall(release, namespace string, values map[string]any) (*chartInstall, error) {
	manifests, err := charts.Render(release, namespace, values)
	if err != nil {
		return nil, err
	}
	ci := &chartInstall{Namespace: namespace}
	var podServiceAccount string
	var deployments, policies int
	for _, m := range manifests {
		obj := m.Object
		switch obj.GetKind() {
		case "ServiceAccount":
			if ci.ServiceAccount != "" {
				return nil, fmt.Errorf("%s: a second ServiceAccount %s", m.Template, obj.GetName())
			}
			ci.ServiceAccount = obj.GetName()
			ci.Objects = append(ci.Objects, obj)
		case "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
			ci.Objects = append(ci.Objects, obj)
		case "Deployment":
			deployments++
			d := &appsv1.Deployment{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, d); err != nil {
				return nil, fmt.Errorf("%s: Deployment %s: %w", m.Template, obj.GetName(), err)
			}
			podServiceAccount = d.Spec.Template.Spec.ServiceAccountName
			for _, c := range d.Spec.Template.Spec.Containers {
				if c.Name == "pvguard" {
					if len(c.Args) == 0 || c.Args[0] != "serve" {
						return nil, fmt.Errorf("%s: container pvguard runs %q, not serve", m.Template, c.Args)
					}
					args, err := charts.ContainerArgs(c, namespace)
					if err != nil {
						return nil, fmt.Errorf("%s: %w", m.Template, err)
					}
					ci.ServeArgs = args[1:]
				}
			}
			if ci.ServeArgs == nil {
				return nil, fmt.Errorf("%s: Deployment %s has no container pvguard", m.Template, obj.GetName())
			}
		case "ConfigMap":
			data, _, err := unstructured.NestedStringMap(obj.Object, "data")
			if err != nil {
				return nil, fmt.Errorf("%s: ConfigMap %s: %w", m.Template, obj.GetName(), err)
			}
			if p, ok := data["policy.yaml"]; ok {
				policies++
				ci.Policy = p
			}
		}
	}
	switch {
	case deployments != 1:
		return nil, fmt.Errorf("the chart rendered %d Deployments, want 1", deployments)
	case policies != 1:
		return nil, fmt.Errorf("the chart rendered %d policy ConfigMaps, want 1", policies)
	case ci.ServiceAccount == "":
		return nil, errors.New("the chart rendered no ServiceAccount")
	case podServiceAccount != ci.ServiceAccount:
		return nil, fmt.Errorf("the chart's Deployment runs as ServiceAccount %q, but it creates %q", podServiceAccount, ci.ServiceAccount)
	}
	return ci, nil
}

// Username is the apiserver's name for the ServiceAccount.
func (ci *chartInstall) Username() string {
	return serviceaccount.MakeUsername(ci.Namespace, ci.ServiceAccount)
}

// waitForRBAC waits until the apiserver allows the ServiceAccount every rule of the rendered
// Roles and ClusterRoles. RBAC takes effect a moment after its objects are created (the
// authorizer reads them through informers), and pvguard's start (SelfSubjectReview, informers,
// the certificate Secret) must not meet a passing "forbidden". A rule the bindings do not grant
// the ServiceAccount ends in a timeout naming it.
func waitForRBAC(ctx context.Context, cs kubernetes.Interface, ci *chartInstall) error {
	var checks []authorizationv1.ResourceAttributes
	for _, obj := range ci.Objects {
		if k := obj.GetKind(); k != "Role" && k != "ClusterRole" {
			continue
		}
		var role struct {
			Rules []rbacv1.PolicyRule `json:"rules"`
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &role); err != nil {
			return fmt.Errorf("%s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
		for _, r := range role.Rules {
			name := ""
			if len(r.ResourceNames) > 0 {
				name = r.ResourceNames[0]
			}
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					res, sub, _ := strings.Cut(res, "/")
					for _, v := range r.Verbs {
						checks = append(checks, authorizationv1.ResourceAttributes{
							Namespace: obj.GetNamespace(), Verb: v, Group: g, Resource: res, Subresource: sub, Name: name,
						})
					}
				}
			}
		}
	}
	groups := append(serviceaccount.MakeGroupNames(ci.Namespace), user.AllAuthenticated)
	var denied *authorizationv1.ResourceAttributes
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		denied = nil
		for len(checks) > 0 {
			sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User: ci.Username(), Groups: groups, ResourceAttributes: &checks[0],
			}}
			r, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
			if err != nil {
				return false, fmt.Errorf("asking whether %s may %s %s: %w", ci.Username(), checks[0].Verb, checks[0].Resource, err)
			}
			if !r.Status.Allowed {
				denied = &checks[0]
				return false, nil
			}
			checks = checks[1:]
		}
		return true, nil
	})
	if err != nil && denied != nil {
		return fmt.Errorf("the chart's RBAC does not let %s %s %s/%s %q in namespace %q: %w",
			ci.Username(), denied.Verb, denied.Resource, denied.Subresource, denied.Name, denied.Namespace, err)
	}
	return err
}

// tokenLifetime is how long the ServiceAccount tokens pvguard-dev mints live. As the kubelet
// does for a pod's projected token, a new one replaces it at 80% of its life; client-go reads
// the token file of the kubeconfig again every minute.
const tokenLifetime = time.Hour

// mintToken asks the TokenRequest API for a token of the ServiceAccount and writes it to path
// (replacing the file at once, so a reader never sees half a token). It returns when the token
// expires.
func mintToken(ctx context.Context, cs kubernetes.Interface, ci *chartInstall, path string) (time.Time, error) {
	seconds := int64(tokenLifetime / time.Second)
	tr, err := cs.CoreV1().ServiceAccounts(ci.Namespace).CreateToken(ctx, ci.ServiceAccount,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}}, metav1.CreateOptions{})
	if err != nil {
		return time.Time{}, fmt.Errorf("requesting a token for ServiceAccount %s/%s: %w", ci.Namespace, ci.ServiceAccount, err)
	}
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(tr.Status.Token), 0o600); err != nil {
		return time.Time{}, fmt.Errorf("writing the ServiceAccount token: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return time.Time{}, fmt.Errorf("writing the ServiceAccount token: %w", err)
	}
	return tr.Status.ExpirationTimestamp.Time, nil
}

// renewToken mints a new token at 80% of the life of the current one, until ctx ends.
func renewToken(ctx context.Context, mint func(context.Context) (time.Time, error), expires time.Time, log logr.Logger) {
	next := renewIn(time.Until(expires))
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(next):
		}
		exp, err := mint(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			log.Error(err, "renewing the ServiceAccount token; retrying in 10s", "expires", expires)
			next = 10 * time.Second
			continue
		}
		expires, next = exp, renewIn(time.Until(exp))
	}
}

// renewIn is when to renew a token that expires in left: at 80% of it, as the kubelet renews a
// projected token, and never in a tight loop (a token found expired, after the machine slept,
// is renewed a second later).
func renewIn(left time.Duration) time.Duration {
	return max(left*8/10, time.Second)
}

// writeServiceAccountKubeconfig writes a kubeconfig for the cluster of the admin's kubeconfig
// that authenticates with the token in tokenFile only: what pvguard gets in a pod.
func writeServiceAccountKubeconfig(admin []byte, tokenFile, path string) error {
	kc, err := clientcmd.Load(admin)
	if err != nil {
		return fmt.Errorf("reading the control plane's kubeconfig: %w", err)
	}
	cur, ok := kc.Contexts[kc.CurrentContext]
	if !ok || kc.Clusters[cur.Cluster] == nil {
		return fmt.Errorf("the control plane's kubeconfig has no cluster for its current context %q", kc.CurrentContext)
	}
	out := clientcmdapi.NewConfig()
	out.Clusters["dev"] = kc.Clusters[cur.Cluster]
	out.AuthInfos["pvguard"] = &clientcmdapi.AuthInfo{TokenFile: tokenFile}
	out.Contexts["pvguard"] = &clientcmdapi.Context{Cluster: "dev", AuthInfo: "pvguard"}
	out.CurrentContext = "pvguard"
	if err := clientcmd.WriteToFile(*out, path); err != nil {
		return fmt.Errorf("writing pvguard's kubeconfig: %w", err)
	}
	return nil
}
