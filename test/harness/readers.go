package harness

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// ClusterReaderNamespace holds the ServiceAccount "reader" of ClusterReaderToken.
const ClusterReaderNamespace = "pvguard-e2e-reader"

// ServiceAccountToken creates the namespace and the ServiceAccount namespace/name if they do
// not exist and returns a token of it from the TokenRequest API, as `kubectl create token` gets
// one.
func ServiceAccountToken(ctx context.Context, cs kubernetes.Interface, namespace, name string) (string, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("creating namespace %s: %w", namespace, err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if _, err := cs.CoreV1().ServiceAccounts(namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("creating ServiceAccount %s/%s: %w", namespace, name, err)
	}
	seconds := int64(2 * time.Hour / time.Second)
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("requesting a token of %s/%s: %w", namespace, name, err)
	}
	return tr.Status.Token, nil
}

// ClusterReaderToken is a token of a ServiceAccount bound to a ClusterRole that lists claims,
// volumes and classes everywhere: a caller who may read all of pvguard's dashboard, report and
// explanations. It creates what is missing, so suites may call it more than once.
func ClusterReaderToken(cfg *rest.Config) (string, error) {
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: ClusterReaderNamespace}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"persistentvolumes", "persistentvolumeclaims"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{"storage.k8s.io"}, Resources: []string{"storageclasses"}, Verbs: []string{"get", "list"}},
	}}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("creating ClusterRole %s: %w", role.Name, err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: ClusterReaderNamespace},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ClusterReaderNamespace, Name: "reader"}}}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("creating ClusterRoleBinding %s: %w", binding.Name, err)
	}
	return ServiceAccountToken(ctx, cs, ClusterReaderNamespace, "reader")
}

// WithBearer is hc presenting token on every request; it waits out pvguard's per-caller limit of
// explanations (429 with Retry-After) on requests without a body, as a patient client does.
func WithBearer(hc *http.Client, token string) *http.Client {
	next := hc.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	c := *hc
	c.Transport = bearer{token: token, next: next}
	return &c
}

type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+b.token)
	for try := 0; ; try++ {
		resp, err := b.next.RoundTrip(req)
		if err != nil || resp.StatusCode != http.StatusTooManyRequests || (req.Body != nil && req.Body != http.NoBody) || try == 30 {
			return resp, err
		}
		wait, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		select {
		case <-req.Context().Done():
			return nil, req.Context().Err()
		case <-time.After(time.Duration(max(wait, 1)) * time.Second):
		}
	}
}
