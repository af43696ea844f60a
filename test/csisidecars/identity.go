package csisidecars

import (
	"context"
	"errors"
	"fmt"
	"os"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Apply creates each object, or replaces it when it exists (keeping its resourceVersion), and
// creates the namespaces of namespaced objects first.
func Apply(ctx context.Context, c client.Client, objs []client.Object) error {
	for _, o := range objs {
		if ns := o.GetNamespace(); ns != "" {
			if err := EnsureNamespace(ctx, c, ns); err != nil {
				return err
			}
		}
		err := c.Create(ctx, o)
		if apierrors.IsAlreadyExists(err) {
			live := o.DeepCopyObject().(client.Object)
			if err = c.Get(ctx, client.ObjectKeyFromObject(o), live); err == nil {
				o.SetResourceVersion(live.GetResourceVersion())
				err = c.Update(ctx, o)
			}
		}
		if err != nil {
			return fmt.Errorf("applying %T %s: %w", o, client.ObjectKeyFromObject(o), err)
		}
	}
	return nil
}

// EnsureNamespace creates a namespace unless it exists.
func EnsureNamespace(ctx context.Context, c client.Client, name string) error {
	err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", name, err)
	}
	return nil
}

// ServiceAccountKubeconfig writes to file a kubeconfig that reaches the apiserver admin reaches
// (same address and CA) as the ServiceAccount namespace/name, with a token the TokenRequest API
// mints for it, valid for an hour, as a projected token in a Pod would be. The ServiceAccount is
// created if missing.
func ServiceAccountKubeconfig(ctx context.Context, admin *rest.Config, namespace, name, file string) error {
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return fmt.Errorf("creating clientset: %w", err)
	}
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", namespace, err)
	}
	_, err = cs.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating ServiceAccount %s/%s: %w", namespace, name, err)
	}
	hour := int64(3600)
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &hour}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("minting a token for ServiceAccount %s/%s (TokenRequest): %w", namespace, name, err)
	}
	if tr.Status.Token == "" {
		return fmt.Errorf("TokenRequest for ServiceAccount %s/%s returned no token", namespace, name)
	}
	return WriteKubeconfig(admin, tr.Status.Token, file)
}

// WriteKubeconfig writes a kubeconfig for the apiserver admin reaches, authenticating with a
// bearer token.
func WriteKubeconfig(admin *rest.Config, token, file string) error {
	if admin.Host == "" {
		return errors.New("writing a kubeconfig: the admin config has no host")
	}
	ca := admin.CAData
	if len(ca) == 0 && admin.CAFile != "" {
		var err error
		if ca, err = os.ReadFile(admin.CAFile); err != nil {
			return fmt.Errorf("writing a kubeconfig: reading the apiserver's CA: %w", err)
		}
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["test"] = &clientcmdapi.Cluster{Server: admin.Host, CertificateAuthorityData: ca}
	cfg.AuthInfos["test"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "test"}
	cfg.CurrentContext = "test"
	if err := clientcmd.WriteToFile(*cfg, file); err != nil {
		return fmt.Errorf("writing kubeconfig %s: %w", file, err)
	}
	return nil
}

// RESTConfig reads a kubeconfig file, for a client acting as the identity it holds.
func RESTConfig(file string) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", file)
	if err != nil {
		return nil, fmt.Errorf("reading kubeconfig %s: %w", file, err)
	}
	return cfg, nil
}
