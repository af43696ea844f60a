package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/explain"
	"github.com/pvguard/pvguard/internal/cli"
	"github.com/pvguard/pvguard/test/harness"
	"github.com/pvguard/pvguard/test/testobj"
)

// tenantToken is the token of a ServiceAccount "tenant" of namespace with a Role that lists the
// claims of that namespace, and nothing else.
func tenantToken(t *testing.T, namespace string) string {
	t.Helper()
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(suite.cfg)
	harness.Must(t, err, "building a clientset")
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "claims"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"}, Verbs: []string{"get", "list", "watch"}}}}
	_, err = cs.RbacV1().Roles(namespace).Create(ctx, role, metav1.CreateOptions{})
	harness.Must(t, err, "creating the tenant's Role")
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "claims"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: "tenant"}}}
	_, err = cs.RbacV1().RoleBindings(namespace).Create(ctx, rb, metav1.CreateOptions{})
	harness.Must(t, err, "binding the tenant's Role")
	token, err := harness.ServiceAccountToken(ctx, cs, namespace, "tenant")
	harness.Must(t, err, "getting the tenant's token")
	return token
}

// fetchAs is GET path from the suite's pvguard with token ("" for none): status and body.
func fetchAs(t *testing.T, token, path string) (int, string) {
	t.Helper()
	resp, err := tokenClient(token).Get(suite.baseURL + path)
	harness.Must(t, err, "GET "+path)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	harness.Must(t, err, "reading "+path)
	return resp.StatusCode, string(body)
}

// tenantWorld is one tenant's objects: a bound pair whose classes differ (a PVG007 finding on the
// claim), a pending claim with a selected node, and a volume pre-bound to that pending claim.
type tenantWorld struct {
	ns, token                          string
	bound, pending                     string // claim names
	volume, prebound                   string // volume names
	node                               string
	boundUID, pendingUID               string
	secrets                            []string // what no other tenant may see
	selfView                           []string // what the tenant must see of its own
	endpoints                          []string // the tenant's own read paths
	otherClaimPath, otherVolumeAPIPath string
}

func newTenant(t *testing.T, prefix, letter string) *tenantWorld {
	t.Helper()
	ctx := context.Background()
	a := admin(t)
	w := &tenantWorld{ns: harness.PrefixedNamespace(t, admin(t), prefix), bound: "claim-of-" + letter, pending: "pending-of-" + letter,
		volume: uniq(t, "vol-"+letter+"1"), prebound: uniq(t, "vol-"+letter+"2")}
	w.node = "node-of-" + w.ns
	createPair(t, a, w.volume, w.ns, w.bound, []testobj.PVMod{testobj.Class("silver")}, []testobj.PVCMod{testobj.ClaimClass("gold")})
	harness.Must(t, bindAsUpstream(ctx, binder(t), w.volume, w.ns, w.bound), "binding "+w.ns+"/"+w.bound)
	pvc := harness.FreshPVC(testobj.PVC(w.ns, w.pending, testobj.ClaimClass("gold"), testobj.Request("5Gi")))
	setAnnotation(&pvc.Annotations, "volume.kubernetes.io/selected-node", w.node)
	harness.Must(t, a.Create(ctx, pvc), "creating "+w.ns+"/"+w.pending)
	pre := harness.FreshPV(testobj.PV(w.prebound, testobj.Class("gold"), testobj.Capacity("5Gi")))
	pre.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: w.ns, Name: w.pending}
	harness.Must(t, a.Create(ctx, pre), "creating "+w.prebound)

	var bound corev1.PersistentVolumeClaim
	harness.Must(t, a.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: w.bound}, &bound), "reading the bound claim")
	w.boundUID, w.pendingUID = string(bound.UID), string(pvc.UID)
	w.secrets = []string{w.ns, w.bound, w.pending, w.node, w.boundUID, w.pendingUID}
	w.selfView = []string{w.ns, w.bound, w.pending}
	w.endpoints = []string{"/api/v1/report", "/",
		"/api/v1/explain/pvc/" + w.ns + "/" + w.pending, "/explain/pvc/" + w.ns + "/" + w.pending,
		"/api/v1/explain/pvc/" + w.ns + "/" + w.bound, "/explain/pvc/" + w.ns + "/" + w.bound,
		"/api/v1/explain/pv/" + w.volume, "/explain/pv/" + w.volume}
	w.token = tenantToken(t, w.ns)
	return w
}

// TestTenantsSeeOnlyTheirOwn: with two tenants (each a ServiceAccount that may list the claims of
// its namespace), a cluster reader and an anonymous caller, every read endpoint answers the
// anonymous caller 401, shows each tenant its own claims, findings and explanations and nothing
// of the other's (no namespace, claim name, uid or node, even where the other's volumes are
// candidates for its claim), and shows the cluster reader everything.
func TestTenantsSeeOnlyTheirOwn(t *testing.T) {
	ta, tb := newTenant(t, "tenant-a", "a"), newTenant(t, "tenant-b", "b")

	// The audit has seen both tenants' findings (as the cluster reader sees it).
	harness.Eventually(t, time.Minute, "both tenants' PVG007 findings in the report", func(context.Context) error {
		r := report(t)
		if !hasFinding(r, "PVG007", ta.bound) || !hasFinding(r, "PVG007", tb.bound) {
			return fmt.Errorf("not yet: %d findings", len(r.Findings))
		}
		return nil
	})

	for _, path := range ta.endpoints {
		if code, _ := fetchAs(t, "", path); code != http.StatusUnauthorized {
			t.Errorf("GET %s without a token: HTTP %d, want 401", path, code)
		}
		if code, _ := fetchAs(t, "not-a-token", path); code != http.StatusUnauthorized {
			t.Errorf("GET %s with a forged token: HTTP %d, want 401", path, code)
		}
	}
	if code, _ := fetchAs(t, "", "/healthz"); code != http.StatusOK {
		t.Errorf("GET /healthz without a token: HTTP %d, want 200", code)
	}

	for _, tc := range []struct {
		name         string
		self, others *tenantWorld
	}{{"tenant A", ta, tb}, {"tenant B", tb, ta}} {
		t.Run(tc.name, func(t *testing.T) {
			self, other := tc.self, tc.others
			// The tenant's Role reaches pvguard's cached access reviews within their lifetime.
			harness.Eventually(t, time.Minute, "the tenant's own finding in its report", func(context.Context) error {
				code, body := fetchAs(t, self.token, "/api/v1/report")
				if code != http.StatusOK || !strings.Contains(body, self.bound) {
					return fmt.Errorf("HTTP %d: %.300s", code, body)
				}
				return nil
			})
			seen := map[string]string{}
			for _, path := range self.endpoints {
				code, body := fetchAs(t, self.token, path)
				if code != http.StatusOK {
					t.Errorf("GET %s as its tenant: HTTP %d: %.300s", path, code, body)
				}
				seen[path] = body
			}
			for path, body := range seen {
				for _, s := range other.secrets {
					if i := strings.Index(body, s); i >= 0 {
						t.Errorf("GET %s as %s shows %q of the other tenant: ...%s...", path, tc.name, s, body[max(0, i-150):min(len(body), i+len(s)+80)])
					}
				}
			}
			// Nothing was vacuous: the report and the dashboard show the tenant's own, the
			// explanation of its pending claim lists the other tenant's pre-bound volume, and says
			// whom it is for without naming it.
			for path, want := range map[string][]string{"/api/v1/report": {self.ns, self.bound}, "/": self.selfView} {
				for _, s := range want {
					if !strings.Contains(seen[path], s) {
						t.Errorf("GET %s as %s lacks its own %q", path, tc.name, s)
					}
				}
			}
			if !strings.Contains(seen["/"], `id="filtered"`) {
				t.Errorf("the dashboard as %s does not say what it left out", tc.name)
			}
			// As a browser shows them, with the tenant's token: the dashboard (its script fills in
			// the report) and the explanation page of the tenant's pending claim.
			page := openDashboardAs(t, self.token)
			for path, want := range map[string]string{"/": self.bound, "/explain/pvc/" + self.ns + "/" + self.pending: self.pending} {
				text, err := page.text(path, want)
				if err != nil {
					t.Errorf("%s in the browser as %s: %v", path, tc.name, err)
				}
				for _, s := range other.secrets {
					if strings.Contains(text, s) {
						t.Errorf("%s in the browser as %s shows %q of the other tenant", path, tc.name, s)
					}
				}
			}
			// The other tenant's volumes are candidates for the tenant's pending claim: they are
			// counted, not named.
			for _, path := range []string{"/api/v1/explain/pvc/" + self.ns + "/" + self.pending, "/explain/pvc/" + self.ns + "/" + self.pending} {
				if body := seen[path]; strings.Contains(body, other.prebound) || !strings.Contains(body, "you cannot read") {
					t.Errorf("GET %s as %s: want the other tenant's volume %s counted among the volumes it cannot read, not named", path, tc.name, other.prebound)
				}
			}
			// The other tenant's objects: forbidden (a claim) or not there (a volume).
			for path, want := range map[string]int{
				"/api/v1/explain/pvc/" + other.ns + "/" + other.pending: http.StatusForbidden,
				"/explain/pvc/" + other.ns + "/" + other.bound:          http.StatusForbidden,
				"/api/v1/explain/pv/" + other.volume:                    http.StatusNotFound,
				"/explain/pv/" + other.prebound:                         http.StatusNotFound,
			} {
				if code, body := fetchAs(t, self.token, path); code != want {
					t.Errorf("GET %s as %s: HTTP %d, want %d: %.300s", path, tc.name, code, want, body)
				}
			}
		})
	}

	t.Run("cluster reader", func(t *testing.T) {
		for _, w := range []*tenantWorld{ta, tb} {
			for _, path := range []string{"/api/v1/report", "/"} {
				code, body := fetchAs(t, suite.readerToken, path)
				if code != http.StatusOK {
					t.Fatalf("GET %s as the cluster reader: HTTP %d", path, code)
				}
				for _, s := range []string{w.ns, w.bound, w.volume} {
					if !strings.Contains(body, s) {
						t.Errorf("GET %s as the cluster reader lacks %q", path, s)
					}
				}
				if strings.Contains(body, `id="filtered"`) {
					t.Errorf("GET %s as the cluster reader says something was filtered out", path)
				}
			}
			path := "/api/v1/explain/pvc/" + w.ns + "/" + w.pending
			if code, body := fetchAs(t, suite.readerToken, path); code != http.StatusOK || !strings.Contains(body, w.node) {
				t.Errorf("GET %s as the cluster reader: HTTP %d, want 200 naming the selected node %s", path, code, w.node)
			}
		}
	})

	t.Run("no permissions", func(t *testing.T) {
		cs, err := kubernetes.NewForConfig(suite.cfg)
		harness.Must(t, err, "building a clientset")
		token, err := harness.ServiceAccountToken(context.Background(), cs, ta.ns, "nobody")
		harness.Must(t, err, "getting a token")
		for _, path := range ta.endpoints {
			if code, _ := fetchAs(t, token, path); code != http.StatusForbidden {
				t.Errorf("GET %s as a ServiceAccount that may list nothing: HTTP %d, want 403", path, code)
			}
		}
	})
}

// TestExplainAsksTheServerWhenForbidden: a tenant's `pvguard explain` (the kubectl plugin's
// code) cannot list every claim and volume itself; it says so and how to ask the server, and with
// --pvguard-server it asks the server first, as the tenant, and prints the tenant's view.
func TestExplainAsksTheServerWhenForbidden(t *testing.T) {
	self, other := newTenant(t, "plugin-a", "a"), newTenant(t, "plugin-b", "b")
	dir := t.TempDir()
	kubeconfig, ca := filepath.Join(dir, "kubeconfig"), filepath.Join(dir, "pvguard-ca.pem")
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: suite.cfg.Host, CertificateAuthorityData: suite.cfg.CAData}
	kc.AuthInfos["tenant"] = &clientcmdapi.AuthInfo{Token: self.token}
	kc.Contexts["tenant"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "tenant", Namespace: self.ns}
	kc.CurrentContext = "tenant"
	harness.Must(t, clientcmd.WriteToFile(*kc, kubeconfig), "writing the tenant's kubeconfig")
	harness.Must(t, os.WriteFile(ca, suite.caPEM, 0o600), "writing pvguard's CA")

	var out, errOut bytes.Buffer
	err := cli.RunExplainClaim(cli.ExplainFlags{Kubeconfig: kubeconfig, Output: "json"}, self.pending, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "forbidden") || !strings.Contains(err.Error(), "--pvguard-server") {
		t.Fatalf("explain as the tenant without a server: %v, want the forbidden read and a hint at --pvguard-server", err)
	}

	o := cli.ExplainFlags{Kubeconfig: kubeconfig, Output: "json", Server: suite.baseURL, ServerCA: ca}
	out.Reset()
	harness.Eventually(t, time.Minute, "the server's explanation of the tenant's claim", func(context.Context) error {
		out.Reset()
		return cli.RunExplainClaim(o, self.pending, &out, &errOut)
	})
	if strings.Contains(errOut.String(), "explaining from your own reads") {
		t.Errorf("explain made the explanation itself instead of printing the server's: %q", errOut.String())
	}
	var e explain.Explanation
	harness.Must(t, json.Unmarshal(out.Bytes(), &e), "decoding the explanation")
	if e.Claim != self.ns+"/"+self.pending {
		t.Errorf("explained %q, want %s/%s", e.Claim, self.ns, self.pending)
	}
	if strings.Contains(out.String(), other.prebound) || !strings.Contains(out.String(), "you cannot read") {
		t.Errorf("the explanation names the other tenant's volume %s, or does not count the volumes the tenant cannot read", other.prebound)
	}
	for _, s := range other.secrets {
		if strings.Contains(out.String(), s) {
			t.Errorf("the tenant's explanation shows %q of the other tenant", s)
		}
	}
	out.Reset()
	o.Output = "table"
	harness.Must(t, cli.RunExplainVolume(o, self.volume, time.Now(), &out, &errOut), "explaining the tenant's volume")
	if !strings.Contains(out.String(), self.ns+"/"+self.bound) {
		t.Errorf("the tenant's volume's explanation lacks its claim:\n%s", out.String())
	}
	err = cli.RunExplainVolume(o, other.volume, time.Now(), &out, &errOut)
	var exit *cli.ExitError
	if !errors.As(err, &exit) || exit.Code != cli.ExitBadInput {
		t.Errorf("explaining the other tenant's volume through the server: %v, want no such volume (exit %d)", err, cli.ExitBadInput)
	}
	err = cli.RunExplainClaim(o, other.ns+"/"+other.bound, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("explaining the other tenant's claim through the server: %v, want a 403", err)
	}
}
