package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pvbinder "github.com/pvguard/pvguard/binder"
	"github.com/pvguard/pvguard/explain"
	"github.com/pvguard/pvguard/internal/cli"
	"github.com/pvguard/pvguard/test/harness"
	"github.com/pvguard/pvguard/test/testobj"
	"github.com/pvguard/pvguard/webhook"
)

// TestAnswersNameOnlyWhatTheRequesterReads: two tenants (ServiceAccounts that may create, get
// and list claims in their own namespace), a cluster reader (may get and list every claim and
// volume) and an anonymous caller (anyone who reaches the webhook port). Each answer pvguard gives
// names of the other tenant nothing: not its namespace, claim names, uids or volumes.
//
//   - Admission, through the apiserver: tenant A's claim naming tenant B's bound volume is refused
//     (PVG004), the message saying "a claim in another namespace".
//   - Admission, a review posted straight to the webhook port claiming to be system:masters: a
//     volume naming B's claim with a guessed uid is refused (PVG002) without B's live uid, and the
//     same as if the claim did not exist.
//   - Admission on a pvguard that trusts its reviews' identities (--admission-read-rights=rbac):
//     the cluster reader is told "team-b/x" by its RBAC (SubjectAccessReviews on the real
//     apiserver), tenant A is not.
//   - A NoVolumeFits event on tenant A's Pending claim whose closest volume is B's: the event, in
//     A's namespace, names neither the volume nor B's claim.
//   - The report and the explanation of tenant A's claim that names B's volume (an exempt seeder
//     made it): neither names B's volume or claim; the cluster reader's report does.
func TestAnswersNameOnlyWhatTheRequesterReads(t *testing.T) {
	ctx := context.Background()
	ta, tb := newTenant(t, "redact-a", "a"), newTenant(t, "redact-b", "b")
	// Of tenant B, a request may be told back only what it named itself.
	secrets := append([]string{tb.volume, tb.prebound}, tb.secrets...)
	noSecrets := func(what, text string, named ...string) {
		t.Helper()
		for _, s := range secrets {
			if slices.Contains(named, s) {
				continue
			}
			if i := strings.Index(text, s); i >= 0 {
				t.Errorf("%s shows %q of the other tenant: ...%s...", what, s, text[max(0, i-120):min(len(text), i+len(s)+60)])
			}
		}
	}
	allowCreate(t, ta.ns)

	// Admission through the apiserver, as tenant A.
	tenantA := tokenRESTClient(t, ta.token)
	grab := harness.FreshPVC(testobj.PVC(ta.ns, "grab", testobj.VolumeName(tb.volume), testobj.ClaimClass("silver")))
	err := tenantA.Create(ctx, grab, client.DryRunAll)
	if err == nil || !strings.Contains(err.Error(), "PVG004") {
		t.Fatalf("tenant A's claim naming tenant B's bound volume: %v, want PVG004's denial", err)
	}
	noSecrets("the admission message to tenant A", err.Error(), tb.volume)
	if !strings.Contains(err.Error(), "already claimed by a claim in another namespace") {
		t.Errorf("the admission message to tenant A does not say what is in the way: %v", err)
	}

	// A review posted straight to the webhook port, claiming to be a cluster admin: PVG002 on a
	// guessed uid of B's claim tells neither its uid nor whether it exists.
	crafted := func(base, name string) string {
		pv := testobj.PV(uniq(t, "probe"), testobj.ClaimRef(tb.ns, name, "00000000-0000-4000-8000-000000000001"))
		return postReview(t, base, webhook.PathValidatePV, "persistentvolumes", pv, authenticationv1.UserInfo{Username: "kubernetes-admin", Groups: []string{"system:masters"}}, false)
	}
	exists, absent := crafted(suite.baseURL, tb.bound), crafted(suite.baseURL, "no-such-claim")
	if !strings.Contains(exists, "PVG002") {
		t.Fatalf("the crafted review was told %q, want PVG002's denial", exists)
	}
	if strings.Contains(exists, tb.boundUID) || strings.ReplaceAll(exists, tb.bound, "no-such-claim") != absent {
		t.Errorf("a crafted review learns about %s/%s:\n exists: %s\n absent: %s", tb.ns, tb.bound, exists, absent)
	}
	grabReview := func(base string, u authenticationv1.UserInfo) string {
		return postReview(t, base, webhook.PathValidatePVC, "persistentvolumeclaims",
			testobj.PVC(ta.ns, "grab", testobj.VolumeName(tb.volume), testobj.ClaimClass("silver")), u, true)
	}
	noSecrets("the crafted review's answer", exists, tb.ns, tb.bound)
	noSecrets("the crafted review's answer", grabReview(suite.baseURL, authenticationv1.UserInfo{Username: "kubernetes-admin", Groups: []string{"system:masters"}}), tb.volume)

	// A pvguard that trusts its reviews' identities, with a binder in shadow mode posting
	// NoVolumeFits after a second.
	inst, err := suite.h.Serve(func(o *cli.ServeFlags) {
		o.Webhook.ReadRights = "rbac"
		o.Binder.Mode = pvbinder.ModeShadow
		o.LeaderElection.Elect = false
		o.Binder.NoVolumeFitsAfter = time.Second
		o.Binder.Resync = time.Second
	})
	harness.Must(t, err, "starting a pvguard that trusts its reviews' identities")
	t.Cleanup(func() { _ = inst.Stop() })
	readerUser := authenticationv1.UserInfo{Username: "system:serviceaccount:" + harness.ClusterReaderNamespace + ":reader",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + harness.ClusterReaderNamespace, "system:authenticated"}}
	tenantUser := authenticationv1.UserInfo{Username: "system:serviceaccount:" + ta.ns + ":tenant",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ta.ns, "system:authenticated"}}
	if msg := grabReview(inst.BaseURL, readerUser); !strings.Contains(msg, "already claimed by PersistentVolumeClaim "+tb.ns+"/"+tb.bound) {
		t.Errorf("the cluster reader is told %q, want %s/%s named", msg, tb.ns, tb.bound)
	}
	msg := grabReview(inst.BaseURL, tenantUser)
	noSecrets("the admission message to tenant A from a pvguard that trusts identities", msg, tb.volume)
	if !strings.Contains(msg, "PVG004") {
		t.Errorf("tenant A is told %q, want PVG004's denial", msg)
	}

	// NoVolumeFits on tenant A's claim whose closest volume is a free volume too small (the only
	// one with the label the claim selects): not A's, so not named to A's namespace.
	a := admin(t)
	free := uniq(t, "vol-free")
	secrets = append(secrets, free)
	freePV := harness.FreshPV(testobj.PV(free, testobj.Class("gold"), testobj.Capacity("1Gi"), testobj.PVMeta(testobj.Label("redact", "closest"))))
	harness.Must(t, a.Create(ctx, freePV), "creating "+free)
	t.Cleanup(func() { _ = a.Delete(ctx, testobj.PV(free)) })
	freePV.Status.Phase = corev1.VolumeAvailable // no cluster binder runs here to say so
	harness.Must(t, a.Status().Update(ctx, freePV), "marking "+free+" Available")
	lonely := harness.FreshPVC(testobj.PVC(ta.ns, "lonely", testobj.ClaimClass("gold"), testobj.Request("5Gi"),
		testobj.Selector(map[string]string{"redact": "closest"})))
	harness.Must(t, a.Create(ctx, lonely), "creating "+ta.ns+"/lonely")
	var event string
	harness.WaitFor(t, time.Minute, "a NoVolumeFits event on "+ta.ns+"/lonely", func(context.Context) (bool, error) {
		var evs corev1.EventList
		if err := a.List(ctx, &evs, client.InNamespace(ta.ns)); err != nil {
			return false, err
		}
		for _, ev := range evs.Items {
			if ev.InvolvedObject.Name == "lonely" && ev.Reason == explain.ReasonNoVolumeFits {
				event = ev.Message
				return true, nil
			}
		}
		return false, nil
	})
	noSecrets("the NoVolumeFits event in tenant A's namespace", event)
	if !strings.Contains(event, "a volume you cannot read") {
		t.Errorf("the NoVolumeFits event %q does not say what kind of volume is closest", event)
	}

	// The report and an explanation of a claim in A's namespace that names B's volume.
	seeded := harness.FreshPVC(testobj.PVC(ta.ns, "seeded", testobj.VolumeName(tb.volume), testobj.ClaimClass("silver")))
	harness.Must(t, newActor(t, seederUser, "system:masters", "system:authenticated").Create(ctx, seeded), "seeding "+ta.ns+"/seeded")
	harness.Eventually(t, time.Minute, "the seeded claim's finding in tenant A's report", func(context.Context) error {
		code, body := fetchAs(t, ta.token, "/api/v1/report")
		if code != http.StatusOK || !strings.Contains(body, `"seeded"`) {
			return fmt.Errorf("HTTP %d: %.300s", code, body)
		}
		return nil
	})
	_, body := fetchAs(t, ta.token, "/api/v1/report")
	noSecrets("tenant A's report", body, tb.volume) // the seeded claim names it
	_, full := fetchAs(t, suite.readerToken, "/api/v1/report")
	if !strings.Contains(full, tb.volume) {
		t.Errorf("the cluster reader's report does not name %s", tb.volume)
	}
	for _, path := range []string{"/api/v1/explain/pvc/" + ta.ns + "/seeded", "/explain/pvc/" + ta.ns + "/lonely", "/api/v1/explain/pvc/" + ta.ns + "/" + ta.pending} {
		code, body := fetchAs(t, ta.token, path)
		if code != http.StatusOK {
			t.Errorf("GET %s as tenant A: HTTP %d: %.300s", path, code, body)
		}
		if strings.HasSuffix(path, "/seeded") {
			noSecrets("GET "+path+" as tenant A", body, tb.volume) // the claim names it
			continue
		}
		noSecrets("GET "+path+" as tenant A", body)
	}
	if _, body := fetchAs(t, ta.token, "/api/v1/explain/pvc/"+ta.ns+"/lonely"); !strings.Contains(body, "you cannot read") {
		t.Errorf("tenant A's explanation of its claim does not count the volumes it cannot read: %.500s", body)
	}
}

// allowCreate lets the ServiceAccount "tenant" of namespace create claims there.
func allowCreate(t *testing.T, namespace string) {
	t.Helper()
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(suite.cfg)
	harness.Must(t, err, "building a clientset")
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "create-claims"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"}, Verbs: []string{"create"}}}}
	_, err = cs.RbacV1().Roles(namespace).Create(ctx, role, metav1.CreateOptions{})
	harness.Must(t, err, "creating the tenant's create Role")
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "create-claims"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: "tenant"}}}
	_, err = cs.RbacV1().RoleBindings(namespace).Create(ctx, rb, metav1.CreateOptions{})
	harness.Must(t, err, "binding the tenant's create Role")
}

// tokenRESTClient is a client of the apiserver that authenticates with token alone.
func tokenRESTClient(t *testing.T, token string) client.Client {
	t.Helper()
	cfg := rest.AnonymousClientConfig(suite.cfg)
	cfg.BearerToken = token
	c, err := client.New(cfg, client.Options{})
	harness.Must(t, err, "building the tenant's client")
	return c
}

// postReview posts an AdmissionReview of a create of obj by u straight to the webhook at base
// and returns the denial's message ("" when admitted).
func postReview(t *testing.T, base, path, resource string, obj runtime.Object, u authenticationv1.UserInfo, claim bool) string {
	t.Helper()
	raw, err := json.Marshal(obj)
	harness.Must(t, err, "encoding the object")
	gvk := metav1.GroupVersionKind{Version: "v1", Kind: "PersistentVolume"}
	ns := ""
	if claim {
		gvk.Kind = "PersistentVolumeClaim"
		ns = obj.(*corev1.PersistentVolumeClaim).Namespace
	}
	review := admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: types.UID("review-" + fmt.Sprint(time.Now().UnixNano())), Kind: gvk,
			Resource: metav1.GroupVersionResource{Version: "v1", Resource: resource},
			Name:     obj.(client.Object).GetName(), Namespace: ns, Operation: admissionv1.Create, UserInfo: u,
			Object: runtime.RawExtension{Raw: raw}, DryRun: ptr(true)}}
	body, err := json.Marshal(review)
	harness.Must(t, err, "encoding the review")
	resp, err := tokenClient("").Post(base+path, "application/json", bytes.NewReader(body))
	harness.Must(t, err, "posting the review")
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	harness.Must(t, err, "reading the answer")
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(data, &out); err != nil || out.Response == nil {
		t.Fatalf("POST %s: HTTP %d: %.300s", path, resp.StatusCode, data)
	}
	if out.Response.Allowed || out.Response.Result == nil {
		return ""
	}
	return out.Response.Result.Message
}

func ptr[T any](v T) *T { return &v }
