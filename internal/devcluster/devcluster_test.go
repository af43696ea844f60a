package devcluster_test

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/internal/devcluster"
	"github.com/pvguard/pvguard/test/testobj"
)

// TestControlPlane starts a control plane from the real binaries and checks what `pvguard-dev`
// and the end-to-end suites rely on, then stops it.
func TestControlPlane(t *testing.T) {
	assets, err := devcluster.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	logDir := t.TempDir()
	cp, err := devcluster.StartWith(assets, devcluster.Options{LogDir: logDir})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = cp.Stop()
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	admin, err := devcluster.NewClient(cp.Config, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("kubeconfig reaches the apiserver as an admin", func(t *testing.T) {
		cfg, err := clientcmd.RESTConfigFromKubeConfig(cp.KubeConfig)
		if err != nil {
			t.Fatal(err)
		}
		review, err := kubernetes.NewForConfigOrDie(cfg).AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(review.Status.UserInfo.Groups, "system:masters") {
			t.Errorf("the kubeconfig authenticates as %+v, want a member of system:masters", review.Status.UserInfo)
		}
	})

	// pvguard-dev serves pvguard as the chart's ServiceAccount with a token from the
	// TokenRequest API, and waits for its RBAC with SubjectAccessReviews.
	t.Run("service account tokens and access reviews", func(t *testing.T) {
		mustCreate(ctx, t, admin, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tokens"}})
		mustCreate(ctx, t, admin, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "tokens", Name: "app"}})
		tr, err := cs.CoreV1().ServiceAccounts("tokens").CreateToken(ctx, "app", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cfg := rest.AnonymousClientConfig(cp.Config)
		cfg.BearerToken = tr.Status.Token
		review, err := kubernetes.NewForConfigOrDie(cfg).AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := review.Status.UserInfo.Username, "system:serviceaccount:tokens:app"; got != want {
			t.Errorf("the token authenticates as %q, want %q", got, want)
		}
		sar, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:               "system:serviceaccount:tokens:app",
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "list", Resource: "persistentvolumes"},
		}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if sar.Status.Allowed {
			t.Error("a ServiceAccount without RBAC may list volumes")
		}
	})

	t.Run("webhooks pointed at a local server", func(t *testing.T) {
		srv := httptest.NewTLSServer(http.HandlerFunc(fakePVGuard))
		defer srv.Close()
		caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
		for _, policy := range []admissionregistrationv1.FailurePolicyType{"", admissionregistrationv1.Ignore} {
			o := devcluster.WebhookOptions{BaseURL: srv.URL, CABundle: caPEM, FailurePolicy: policy}
			if err := devcluster.InstallWebhooks(ctx, cp.Config, o); err != nil {
				t.Fatalf("failure policy %q: %v", policy, err)
			}
			want := policy
			if want == "" {
				want = admissionregistrationv1.Fail
			}
			checkWebhooks(ctx, t, admin, srv.URL, caPEM, want)
		}

		warns := &devcluster.Warnings{}
		user, err := devcluster.NewClient(cp.Config, warns, "")
		if err != nil {
			t.Fatal(err)
		}
		if err := user.Create(ctx, testobj.PV("warn-me")); err != nil {
			t.Fatal(err)
		}
		if got := warns.Take(); !slices.Equal(got, []string{"fake warning for warn-me"}) {
			t.Errorf("warnings %q, want the webhook's", got)
		}
		if got := warns.Take(); len(got) != 0 {
			t.Errorf("warnings taken twice: %q", got)
		}
		err = devcluster.PatchPV(ctx, user, "warn-me", func(pv *corev1.PersistentVolume) {
			pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimDelete
		})
		if err != nil {
			t.Fatal(err)
		}
		pv := &corev1.PersistentVolume{}
		if err := admin.Get(ctx, client.ObjectKey{Name: "warn-me"}, pv); err != nil {
			t.Fatal(err)
		}
		if pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
			t.Errorf("PatchPV left the reclaim policy %s", pv.Spec.PersistentVolumeReclaimPolicy)
		}
		for _, c := range []client.Object{
			&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: devcluster.ChartRelease}},
			&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: devcluster.ChartRelease}},
		} {
			if err := admin.Delete(ctx, c); err != nil {
				t.Fatal(err)
			}
		}
	})

	// The demo acts as the pvc-protection controller, whose permissions the apiserver's
	// bootstrap RBAC grants.
	t.Run("clients act as the identity they are given", func(t *testing.T) {
		other, err := devcluster.NewClient(cp.Config, nil, "someone", "some-group")
		if err != nil {
			t.Fatal(err)
		}
		err = other.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "not-allowed"}})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `"someone"`) {
			t.Errorf("creating a namespace as someone: %v, want Forbidden for someone", err)
		}
		protector, err := devcluster.NewClient(cp.Config, nil, "system:serviceaccount:kube-system:pvc-protection-controller", "system:serviceaccounts", "system:authenticated")
		if err != nil {
			t.Fatal(err)
		}
		if err := protector.List(ctx, &corev1.PersistentVolumeClaimList{}); err != nil {
			t.Errorf("the pvc-protection controller listing claims: %v", err)
		}
	})

	// test/cluster runs kube-controller-manager and kube-scheduler with these.
	t.Run("user kubeconfigs and the service account signing key", func(t *testing.T) {
		kc, err := cp.UserKubeconfig("alice", "team")
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := clientcmd.RESTConfigFromKubeConfig(kc)
		if err != nil {
			t.Fatal(err)
		}
		review, err := kubernetes.NewForConfigOrDie(cfg).AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if u := review.Status.UserInfo; u.Username != "alice" || !slices.Contains(u.Groups, "team") {
			t.Errorf("the user's kubeconfig authenticates as %+v, want alice in team", u)
		}
		if _, err := os.Stat(cp.ServiceAccountSigningKeyFile()); err != nil {
			t.Error(err)
		}
	})

	stopped = true
	if err := cp.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.Discovery().ServerVersion(); err == nil {
		t.Error("the apiserver still answers after Stop")
	}
	for _, name := range []string{"kube-apiserver.log", "etcd.log"} {
		if fi, err := os.Stat(filepath.Join(logDir, name)); err != nil || fi.Size() == 0 {
			t.Errorf("%s in LogDir: %v (want a non-empty log)", name, err)
		}
	}
}

// TestMissingBinaries: without etcd and kube-apiserver, the error names the directory and says
// how to build them.
func TestMissingBinaries(t *testing.T) {
	empty := t.TempDir()
	onlyEtcd := t.TempDir()
	if err := os.WriteFile(filepath.Join(onlyEtcd, "etcd"), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, dir, missing string
	}{
		{"empty", empty, "etcd"},
		{"no kube-apiserver", onlyEtcd, "kube-apiserver"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := devcluster.Start(tc.dir)
			checkMissing(t, "Start", err, tc.dir, tc.missing)
			t.Setenv("KUBEBUILDER_ASSETS", tc.dir)
			_, err = devcluster.AssetsDir()
			checkMissing(t, "AssetsDir", err, tc.dir, tc.missing)
		})
	}
}

func checkMissing(t *testing.T, what string, err error, dir, missing string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error", what)
	}
	for _, want := range []string{"no " + missing + " in " + dir, "make tools"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %q does not say %q", what, err, want)
		}
	}
}

func checkWebhooks(ctx context.Context, t *testing.T, c client.Client, base string, caPEM []byte, policy admissionregistrationv1.FailurePolicyType) {
	t.Helper()
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	m := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := c.Get(ctx, client.ObjectKey{Name: devcluster.ChartRelease}, v); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: devcluster.ChartRelease}, m); err != nil {
		t.Fatal(err)
	}
	var configs []admissionregistrationv1.WebhookClientConfig
	var policies []admissionregistrationv1.FailurePolicyType
	var names []string
	for _, w := range v.Webhooks {
		configs, policies, names = append(configs, w.ClientConfig), append(policies, *w.FailurePolicy), append(names, w.Name)
	}
	for _, w := range m.Webhooks {
		configs, policies, names = append(configs, w.ClientConfig), append(policies, *w.FailurePolicy), append(names, w.Name)
	}
	if len(configs) == 0 {
		t.Fatal("no webhooks installed")
	}
	for i, cc := range configs {
		if cc.Service != nil || cc.URL == nil || !strings.HasPrefix(*cc.URL, base+"/") || string(cc.CABundle) != string(caPEM) {
			t.Errorf("webhook %d: client config %+v, want a URL under %s with the server's CA", i, cc, base)
		}
		// FailurePolicy is the people's; the components' webhooks keep the chart's default.
		want := policy
		if strings.HasSuffix(names[i], "-components.pvguard.io") {
			want = admissionregistrationv1.Ignore
		}
		if policies[i] != want {
			t.Errorf("webhook %s: failure policy %s, want %s", names[i], policies[i], want)
		}
	}
}

// fakePVGuard answers admission reviews as pvguard would for what the tests send: PVG014 for a
// volume whose claimRef is not a claim (what WaitForWebhook probes with), a warning for a volume
// named warn-me, and allowed otherwise.
func fakePVGuard(w http.ResponseWriter, r *http.Request) {
	review := &admissionv1.AdmissionReview{}
	if err := json.NewDecoder(r.Body).Decode(review); err != nil || review.Request == nil {
		http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
		return
	}
	resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
	pv := &corev1.PersistentVolume{}
	if review.Request.Kind.Kind == "PersistentVolume" && json.Unmarshal(review.Request.Object.Raw, pv) == nil {
		switch {
		case pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.Kind == "Pod":
			resp.Allowed = false
			resp.Result = &metav1.Status{Code: http.StatusForbidden, Message: "[PVG014 fake] claimRef is not a claim"}
		case pv.Name == "warn-me" && strings.HasPrefix(r.URL.Path, "/validate/"):
			resp.Warnings = []string{"fake warning for warn-me"}
		}
	}
	review.Response = resp
	review.Request = nil
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(review)
}

func mustCreate(ctx context.Context, t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(ctx, obj); err != nil {
		t.Fatalf("creating %s: %v", obj.GetName(), err)
	}
}
