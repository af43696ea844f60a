package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pvguard/pvguard/internal/web"
	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/storage"
	"github.com/pvguard/pvguard/test/testobj"
	"github.com/pvguard/pvguard/webhook"
)

func newTestServer(t *testing.T, cfg *policy.Config, view *testobj.View) http.Handler {
	t.Helper()
	return web.NewServer(web.Options{
		Engines: webhook.StaticEngine{E: policy.NewEngine(cfg)},
		Views:   webhook.StaticView{V: view},
		ReadyChecks: map[string]func() error{
			"cache": func() error { return nil },
		},
	}).Handler()
}

// post sends a body and returns the HTTP status and, for 200, the decoded response.
func post(t *testing.T, h http.Handler, path, contentType string, body io.Reader) (int, *admissionv1.AdmissionResponse) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, path, body)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		return rec.Code, nil
	}
	var ar admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &ar); err != nil {
		t.Fatalf("response is not an AdmissionReview: %v: %s", err, rec.Body.String())
	}
	if ar.Response == nil {
		t.Fatalf("AdmissionReview without response: %s", rec.Body.String())
	}
	return rec.Code, ar.Response
}

func TestMalformedRequestsGetAClearAnswer(t *testing.T) {
	h := newTestServer(t, nil, testobj.NewView())
	goodPVC := testobj.Review(t, testobj.PVCKind, "persistentvolumeclaims", admissionv1.Create, testobj.PVC("ns", "c"), nil, "alice")
	podReview := testobj.Review(t, testobj.PodKind, "pods", admissionv1.Create, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}, nil, "alice")
	badObject := bytes.Replace(testobj.Review(t, testobj.PVKind, "persistentvolumes", admissionv1.Create, testobj.PV("pv-1"), nil, "alice"),
		[]byte(`"spec":{`), []byte(`"spec":{"capacity":"lots",`), 1)
	deep := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":` + strings.Repeat(`{"a":`, 20000) + `1` + strings.Repeat(`}`, 20000) + `}`

	for _, tc := range []struct {
		name        string
		path        string
		contentType string
		body        string
		wantHTTP    int
		// for HTTP 200: the in-band result
		wantAllowed bool
		wantCode    int32
		wantText    string
	}{
		{name: "wrong content type", path: webhook.PathValidatePVC, contentType: "text/plain", body: string(goodPVC), wantHTTP: http.StatusUnsupportedMediaType},
		{name: "no content type", path: webhook.PathValidatePVC, body: string(goodPVC), wantHTTP: http.StatusUnsupportedMediaType},
		{name: "json with charset is fine", path: webhook.PathValidatePVC, contentType: "application/json; charset=utf-8", body: string(goodPVC), wantHTTP: http.StatusOK, wantAllowed: true},
		{name: "unknown path", path: "/validate/pods", contentType: "application/json", body: string(goodPVC), wantHTTP: http.StatusNotFound},
		{name: "empty body", path: webhook.PathValidatePVC, contentType: "application/json", body: "", wantHTTP: http.StatusOK, wantCode: 400},
		{name: "not json", path: webhook.PathValidatePVC, contentType: "application/json", body: "{{{", wantHTTP: http.StatusOK, wantCode: 400},
		{name: "invalid utf-8", path: webhook.PathValidatePVC, contentType: "application/json", body: "{\"kind\":\"\xff\xfe\"}", wantHTTP: http.StatusOK, wantCode: 400},
		{name: "deeply nested json", path: webhook.PathValidatePV, contentType: "application/json", body: deep, wantHTTP: http.StatusOK, wantCode: 400},
		{name: "review without request", path: webhook.PathValidatePV, contentType: "application/json", body: `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`, wantHTTP: http.StatusOK, wantCode: 400, wantText: "no request"},
		{name: "unknown review version", path: webhook.PathValidatePV, contentType: "application/json", body: `{"apiVersion":"admission.k8s.io/v9","kind":"AdmissionReview","request":{"uid":"x"}}`, wantHTTP: http.StatusOK, wantCode: 400},
		{name: "unknown kind is let through with a warning", path: webhook.PathValidatePV, contentType: "application/json", body: string(podReview), wantHTTP: http.StatusOK, wantAllowed: true, wantText: "Pod sent to the PersistentVolume endpoint"},
		{name: "object that does not decode", path: webhook.PathValidatePV, contentType: "application/json", body: string(badObject), wantHTTP: http.StatusOK, wantCode: 400, wantText: "decoding PersistentVolume"},
		{name: "mutating endpoint, object that does not decode", path: webhook.PathMutatePV, contentType: "application/json", body: string(badObject), wantHTTP: http.StatusOK, wantCode: 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, resp := post(t, h, tc.path, tc.contentType, strings.NewReader(tc.body))
			if code != tc.wantHTTP {
				t.Fatalf("HTTP %d, want %d", code, tc.wantHTTP)
			}
			if resp == nil {
				return
			}
			if resp.Allowed != tc.wantAllowed {
				t.Errorf("allowed = %v, want %v (result %+v)", resp.Allowed, tc.wantAllowed, resp.Result)
			}
			if tc.wantCode != 0 && (resp.Result == nil || resp.Result.Code != tc.wantCode) {
				t.Errorf("result %+v, want code %d", resp.Result, tc.wantCode)
			}
			if tc.wantText != "" {
				text := strings.Join(resp.Warnings, " ")
				if resp.Result != nil {
					text += " " + resp.Result.Message
				}
				if !strings.Contains(text, tc.wantText) {
					t.Errorf("response %q does not mention %q", text, tc.wantText)
				}
			}
		})
	}
}

func TestOversizedBodyIsRefused(t *testing.T) {
	h := newTestServer(t, nil, testobj.NewView())
	req := httptest.NewRequest(http.MethodPost, webhook.PathValidatePV, strings.NewReader("{}"))
	req.Header.Set("Content-Type", "application/json")
	req.ContentLength = 8 << 20
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("HTTP %d, want 413", rec.Code)
	}
}

func TestDecisionsBecomeDenialsWarningsAndAuditAnnotations(t *testing.T) {
	block := corev1.PersistentVolumeBlock
	fsPV := testobj.PV("pv-7")
	cfg, err := policy.ParseConfig([]byte("rules:\n  volume-grab: {action: audit}\n"))
	if err != nil {
		t.Fatal(err)
	}
	h := newTestServer(t, cfg, testobj.NewView(fsPV, testobj.PV("pv-fast", testobj.Class("fast"))))

	// Mode mismatch: denied with the field in the causes, grab recorded as an audit annotation.
	_, resp := post(t, h, webhook.PathValidatePVC, "application/json", bytes.NewReader(testobj.Review(t, testobj.PVCKind, "persistentvolumeclaims", admissionv1.Create,
		testobj.PVC("team-a", "data", testobj.ClaimVolumeMode(block), testobj.VolumeName("pv-7")), nil, "alice")))
	if resp.Allowed || resp.Result.Code != http.StatusForbidden {
		t.Fatalf("want a 403 denial, got %+v", resp)
	}
	if !strings.HasPrefix(resp.Result.Message, "[PVG001 volume-mode-match] PersistentVolumeClaim team-a/data requests volumeMode Block") {
		t.Errorf("message %q", resp.Result.Message)
	}
	if len(resp.Result.Details.Causes) != 1 || resp.Result.Details.Causes[0].Field != "spec.volumeName" {
		t.Errorf("causes %+v, want one on spec.volumeName", resp.Result.Details.Causes)
	}
	if !strings.Contains(resp.AuditAnnotations["pvg010-volume-grab"], "[PVG010 volume-grab]") {
		t.Errorf("audit annotations %v", resp.AuditAnnotations)
	}

	// Class mismatch is a warning and is admitted.
	_, resp = post(t, h, webhook.PathValidatePVC, "application/json", bytes.NewReader(testobj.Review(t, testobj.PVCKind, "persistentvolumeclaims", admissionv1.Create,
		testobj.PVC("team-a", "data", testobj.ClaimClass("slow"), testobj.VolumeName("pv-fast")), nil, "alice")))
	if !resp.Allowed || len(resp.Warnings) != 1 || !strings.HasPrefix(resp.Warnings[0], "[PVG007 storage-class-match]") {
		t.Fatalf("want admitted with one PVG007 warning, got allowed=%v warnings=%q", resp.Allowed, resp.Warnings)
	}
}

func TestUnreadableRelatedObjectsFailTheReview(t *testing.T) {
	view := testobj.NewView()
	view.Err = errors.New("apiserver unavailable")
	h := newTestServer(t, nil, view)
	_, resp := post(t, h, webhook.PathValidatePVC, "application/json", bytes.NewReader(testobj.Review(t, testobj.PVCKind, "persistentvolumeclaims", admissionv1.Create,
		testobj.PVC("team-a", "data", testobj.VolumeName("pv-7")), nil, "alice")))
	if resp.Allowed || resp.Result.Code != http.StatusInternalServerError || !strings.Contains(resp.Result.Message, "apiserver unavailable") {
		t.Fatalf("want a 500 naming the cause (so failurePolicy applies), got %+v", resp.Result)
	}
}

func TestMutations(t *testing.T) {
	fast := testobj.StorageClass("fast", "example.com/csi", testobj.DefaultClass)
	cfgOn, err := policy.ParseConfig([]byte("mutation:\n  alignPreboundClaimClass: true\n"))
	if err != nil {
		t.Fatal(err)
	}
	view := testobj.NewView(fast, testobj.PV("pv-local", testobj.Class("local")))
	bare := testobj.PV("pv-1")
	bare.Spec.ClaimRef = &corev1.ObjectReference{Namespace: "ns", Name: "c"}

	for _, tc := range []struct {
		name    string
		cfg     *policy.Config
		path    string
		body    []byte
		wantOps []string
	}{
		{name: "claimRef kind and apiVersion filled", path: webhook.PathMutatePV,
			body:    testobj.Review(t, testobj.PVKind, "persistentvolumes", admissionv1.Create, bare, nil, "admin"),
			wantOps: []string{"add /spec/claimRef/apiVersion", "add /spec/claimRef/kind"}},
		{name: "complete claimRef untouched", path: webhook.PathMutatePV,
			body: testobj.Review(t, testobj.PVKind, "persistentvolumes", admissionv1.Create, testobj.PV("pv-1", testobj.ClaimRef("ns", "c", "")), nil, "admin")},
		{name: "pre-bound claim given the default class gets the volume's class", cfg: cfgOn, path: webhook.PathMutatePVC,
			body:    testobj.Review(t, testobj.PVCKind, "persistentvolumeclaims", admissionv1.Create, testobj.PVC("ns", "c", testobj.ClaimClass("fast"), testobj.VolumeName("pv-local")), nil, "alice"),
			wantOps: []string{"replace /spec/storageClassName"}},
		{name: "class alignment is off by default", path: webhook.PathMutatePVC,
			body: testobj.Review(t, testobj.PVCKind, "persistentvolumeclaims", admissionv1.Create, testobj.PVC("ns", "c", testobj.ClaimClass("fast"), testobj.VolumeName("pv-local")), nil, "alice")},
		{name: "a chosen non-default class is left alone", cfg: cfgOn, path: webhook.PathMutatePVC,
			body: testobj.Review(t, testobj.PVCKind, "persistentvolumeclaims", admissionv1.Create, testobj.PVC("ns", "c", testobj.ClaimClass("gold"), testobj.VolumeName("pv-local")), nil, "alice")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, resp := post(t, newTestServer(t, tc.cfg, view), tc.path, "application/json", bytes.NewReader(tc.body))
			if !resp.Allowed {
				t.Fatalf("mutation refused: %+v", resp.Result)
			}
			var ops []string
			if len(resp.Patch) > 0 {
				var patch []struct{ Op, Path string }
				if err := json.Unmarshal(resp.Patch, &patch); err != nil {
					t.Fatal(err)
				}
				for _, p := range patch {
					ops = append(ops, p.Op+" "+p.Path)
				}
			}
			if strings.Join(sorted(ops), ",") != strings.Join(tc.wantOps, ",") {
				t.Fatalf("patch ops %q, want %q", ops, tc.wantOps)
			}
		})
	}
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// TestMalformedClaimRefIsDeniedByItsRuleNotAnError: a claimRef with a uid but no name or no
// namespace names no claim, so no rule may read one (the live view's client refuses a get
// without a name); the write is denied with PVG014's finding, not answered with a 500.
func TestMalformedClaimRefIsDeniedByItsRuleNotAnError(t *testing.T) {
	claim := testobj.PVC("team-a", "data", testobj.ClaimUID("uid-1"))
	view := testobj.NewView(claim)
	view.StrictNames = true
	h := newTestServer(t, nil, view)
	for _, tc := range []struct {
		name, namespace, field string
	}{
		{name: "", namespace: "team-a", field: "spec.claimRef.name"},
		{name: "data", namespace: "", field: "spec.claimRef.namespace"},
	} {
		t.Run(tc.field, func(t *testing.T) {
			pv := testobj.PV("pv-7", testobj.ClaimRef(tc.namespace, tc.name, "uid-1"))
			_, resp := post(t, h, webhook.PathValidatePV, "application/json", bytes.NewReader(testobj.Review(t, testobj.PVKind, "persistentvolumes", admissionv1.Create, pv, nil, "admin")))
			if resp.Allowed || resp.Result.Code != http.StatusForbidden {
				t.Fatalf("want a 403 denial, got allowed=%v %+v", resp.Allowed, resp.Result)
			}
			if !strings.HasPrefix(resp.Result.Message, "[PVG014 claimref-shape] PersistentVolume pv-7 has a spec.claimRef without a") {
				t.Errorf("message %q, want PVG014's", resp.Result.Message)
			}
			if strings.Contains(resp.Result.Message, "could not") {
				t.Errorf("message %q mentions a failed evaluation; nothing should have failed", resp.Result.Message)
			}
			if len(resp.Result.Details.Causes) != 1 || resp.Result.Details.Causes[0].Field != tc.field {
				t.Errorf("causes %+v, want one on %s", resp.Result.Details.Causes, tc.field)
			}
		})
	}
}

// nodesDown is a view whose Node reads fail, so that only the node-affinity rule cannot judge.
type nodesDown struct{ *testobj.View }

func (nodesDown) Node(string) (*corev1.Node, error) {
	return nil, errors.New("nodes: connection refused")
}

// TestDenialStandsWhenAnotherRuleCannotJudge: one rule failing to read does not turn a write the
// other rules refuse into a 500; it is denied with their findings, and the message says what
// could not be evaluated.
func TestDenialStandsWhenAnotherRuleCannotJudge(t *testing.T) {
	h := web.NewServer(web.Options{
		Engines: webhook.StaticEngine{E: policy.NewEngine(nil)},
		Views:   webhook.StaticView{V: nodesDown{testobj.NewView(testobj.PV("pv-7", testobj.NodeAffinity("topology.kubernetes.io/zone", "zone-a")))}},
	}).Handler()
	claim := testobj.PVC("team-a", "data", testobj.ClaimVolumeMode(corev1.PersistentVolumeBlock), testobj.VolumeName("pv-7"),
		testobj.ClaimMeta(testobj.Annotation(storage.AnnSelectedNode, "node-1")))
	_, resp := post(t, h, webhook.PathValidatePVC, "application/json", bytes.NewReader(testobj.Review(t, testobj.PVCKind, "persistentvolumeclaims", admissionv1.Create, claim, nil, "alice")))
	if resp.Allowed || resp.Result.Code != http.StatusForbidden {
		t.Fatalf("want a 403 denial, got allowed=%v %+v", resp.Allowed, resp.Result)
	}
	msg := resp.Result.Message
	if !strings.HasPrefix(msg, "[PVG001 volume-mode-match]") {
		t.Errorf("message %q, want PVG001's finding first", msg)
	}
	if !strings.Contains(msg, "pvguard could not evaluate every rule on PersistentVolumeClaim team-a/data") || !strings.Contains(msg, "PVG009 node-affinity-match") || !strings.Contains(msg, "connection refused") {
		t.Errorf("message %q does not say which rule could not be evaluated and why", msg)
	}
	if len(resp.Result.Details.Causes) != 1 || resp.Result.Details.Causes[0].Field != "spec.volumeName" {
		t.Errorf("causes %+v, want PVG001's on spec.volumeName", resp.Result.Details.Causes)
	}
}

// freshViews is a view source whose cache lags: View shows stale objects, FreshView the live
// ones.
type freshViews struct{ stale, live policy.View }

func (f freshViews) View(context.Context) policy.View      { return f.stale }
func (f freshViews) FreshView(context.Context) policy.View { return f.live }
func (f freshViews) CacheView(context.Context) policy.View { return f.stale }

// TestDenialIsConfirmedOnFreshReads: a claim's bind write judged on a cache that still shows its
// volume linked to the claim it came from (a populator's hand-off a moment ago) is admitted when
// the live objects show the hand-off; a denial the live objects confirm is sent.
func TestDenialIsConfirmedOnFreshReads(t *testing.T) {
	target := testobj.PVC("team-a", "db", testobj.ClaimUID("0f5c3f5e-6b0a-4c47-9d43-7c2f2b1e9a10"))
	prime := testobj.PVC("populators", "prime-0f5c3f5e-6b0a-4c47-9d43-7c2f2b1e9a10", testobj.ClaimBoundTo("pv-1"))
	stale := testobj.NewView(target, prime, testobj.PV("pv-1", testobj.BoundTo(prime)))
	live := testobj.NewView(target, prime, testobj.PV("pv-1", testobj.BoundTo(target)))
	bind := testobj.Review(t, testobj.PVCKind, "persistentvolumeclaims", admissionv1.Update, testobj.PVCWith(target, testobj.ClaimBoundTo("pv-1")), target,
		"system:serviceaccount:kube-system:persistent-volume-binder")
	for _, tc := range []struct {
		name    string
		views   webhook.ViewSource
		allowed bool
	}{
		{"stale cache, live objects show the hand-off", freshViews{stale, live}, true},
		{"the live objects confirm the denial", freshViews{stale, stale}, false},
		{"a view source without fresh reads", webhook.StaticView{V: stale}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := web.NewServer(web.Options{
				Engines: webhook.StaticEngine{E: policy.NewEngine(nil)}, Views: tc.views,
				ReadyChecks: map[string]func() error{"cache": func() error { return nil }},
			}).Handler()
			code, resp := post(t, h, webhook.PathValidatePVC, "application/json", bytes.NewReader(bind))
			if code != http.StatusOK || resp.Allowed != tc.allowed {
				t.Fatalf("status %d, allowed %v (%v), want allowed %v", code, resp != nil && resp.Allowed, resp, tc.allowed)
			}
		})
	}
}

// countingView counts the claims read through it.
type countingView struct {
	policy.View
	claims *int
}

func (c countingView) PersistentVolumeClaim(namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	*c.claims++
	return c.View.PersistentVolumeClaim(namespace, name)
}

// TestALinkToAClaimTheCacheHasNotCaughtUpWithIsJudgedLive: a provisioner creates a volume for a
// claim the scheduler has just given a selected-node, and the cache still shows the claim without
// it. The volume's claimRef carries the resourceVersion the provisioner read (client-go's
// reference helper records it): since the cache holds another, the admission the cache gives is
// judged again on live reads, and the volume made for another node is refused. A claimRef whose
// resourceVersion the cache holds, or a write that does not make the link, is judged on the cache.
func TestALinkToAClaimTheCacheHasNotCaughtUpWithIsJudgedLive(t *testing.T) {
	const uid = "6f1d3c2a-5b4e-4d3c-9a8b-7c6d5e4f3a21"
	cached := testobj.PVC("team-a", "data", testobj.ClaimUID(uid), testobj.ClaimMeta(func(m *metav1.ObjectMeta) { m.ResourceVersion = "41" }))
	scheduled := testobj.PVCWith(cached, testobj.ClaimMeta(testobj.Annotation(storage.AnnSelectedNode, "node-1"), func(m *metav1.ObjectMeta) { m.ResourceVersion = "42" }))
	volume := func(seen string) *corev1.PersistentVolume {
		pv := testobj.PV("pv-elsewhere", testobj.NodeAffinity(corev1.LabelHostname, "node-2"), testobj.ClaimRef("team-a", "data", uid))
		pv.Spec.ClaimRef.ResourceVersion = seen
		return pv
	}
	provisioner := "system:serviceaccount:kube-system:csi-provisioner"
	for _, tc := range []struct {
		name       string
		op         admissionv1.Operation
		pv, old    *corev1.PersistentVolume
		allowed    bool
		liveClaims bool
	}{
		{name: "created for a claim version the cache does not hold", op: admissionv1.Create, pv: volume("42"), liveClaims: true},
		{name: "created for the claim version the cache holds", op: admissionv1.Create, pv: volume("41"), allowed: true},
		{name: "created without a resourceVersion in its claimRef", op: admissionv1.Create, pv: volume(""), allowed: true},
		{name: "a write that keeps the link", op: admissionv1.Update, pv: testobj.PVWith(volume("42"), testobj.PVMeta(testobj.Label("tier", "gold"))), old: volume("42"), allowed: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var live int
			views := freshViews{stale: testobj.NewView(cached), live: countingView{View: testobj.NewView(scheduled), claims: &live}}
			h := web.NewServer(web.Options{
				Engines: webhook.StaticEngine{E: policy.NewEngine(nil)}, Views: views,
				ReadyChecks: map[string]func() error{"cache": func() error { return nil }},
			}).Handler()
			body := testobj.Review(t, testobj.PVKind, "persistentvolumes", tc.op, tc.pv, tc.old, provisioner)
			code, resp := post(t, h, webhook.PathValidatePV, "application/json", bytes.NewReader(body))
			if code != http.StatusOK || resp.Allowed != tc.allowed {
				t.Fatalf("status %d, allowed %v (%v), want allowed %v", code, resp != nil && resp.Allowed, resp, tc.allowed)
			}
			if !tc.allowed && !strings.Contains(resp.Result.Message, "PVG009") {
				t.Errorf("message %q, want PVG009's", resp.Result.Message)
			}
			if (live > 0) != tc.liveClaims {
				t.Errorf("%d live claim reads, want any: %v", live, tc.liveClaims)
			}
		})
	}
}
