package webhook_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/pvguard/pvguard/internal/web"
	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/test/gen"
	"github.com/pvguard/pvguard/test/testobj"
	"github.com/pvguard/pvguard/webhook"
)

// Hostile and fuzzed AdmissionReviews through the whole handler chain (router, content-type and
// size guard, review decoding, controller-runtime's admission.Webhook, the handlers, the policy
// engine). Inputs the fuzzer found are kept under testdata/fuzz/FuzzReview/ and run with the
// seeds on every `go test`.
//
//	go test ./webhook/ -run '^$' -fuzz '^FuzzReview$' -fuzztime 2m -parallel 1

var webhookPaths = []string{webhook.PathValidatePV, webhook.PathValidatePVC, webhook.PathValidateSC, webhook.PathMutatePV, webhook.PathMutatePVC}

// endpointKinds is the kind each path judges.
var endpointKinds = map[string]metav1.GroupVersionKind{
	webhook.PathValidatePV:  {Version: "v1", Kind: "PersistentVolume"},
	webhook.PathMutatePV:    {Version: "v1", Kind: "PersistentVolume"},
	webhook.PathValidatePVC: {Version: "v1", Kind: "PersistentVolumeClaim"},
	webhook.PathMutatePVC:   {Version: "v1", Kind: "PersistentVolumeClaim"},
	webhook.PathValidateSC:  {Group: "storage.k8s.io", Version: "v1", Kind: "StorageClass"},
}

// Header variants of a fuzzed request: the low three bits pick the Content-Type; the next two
// send the body without a Content-Length (chunked) or declare one over the limit.
var fuzzContentTypes = []struct {
	value  string
	accept bool
}{
	{"application/json", true},
	{"application/json; charset=utf-8", true},
	{"Application/JSON", true},
	{"", false},
	{"text/plain", false},
	{"application/json;;", false},
	{"application/yaml", false},
	{"application/jsonx", false},
}

const (
	fuzzChunked      = 0x08
	fuzzDeclaredHuge = 0x10
)

// fuzzServer is pvguard's router over a small cluster, with the optional class alignment on so
// that both mutations can patch.
func fuzzServer(tb testing.TB) http.Handler {
	tb.Helper()
	cfg, err := policy.ParseConfig([]byte("mutation:\n  alignPreboundClaimClass: true\n"))
	if err != nil {
		tb.Fatal(err)
	}
	claim := testobj.PVC("team-a", "data")
	view := testobj.NewView(
		testobj.StorageClass("fast", "example.com/csi", testobj.DefaultClass),
		testobj.PV("pv-local", testobj.Class("local")), testobj.PV("pv-7"),
		testobj.PV("pv-b", testobj.BoundTo(claim)), testobj.PVCWith(claim, testobj.ClaimBoundTo("pv-b")),
		testobj.Node("node-1", nil))
	return web.NewServer(web.Options{
		Engines: webhook.StaticEngine{E: policy.NewEngine(cfg)},
		Views:   webhook.StaticView{V: view},
	}).Handler()
}

// reviewJSON is an AdmissionReview body as the apiserver sends it.
func reviewJSON(apiVersion string, req *admissionv1.AdmissionRequest) []byte {
	ar := admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: apiVersion, Kind: "AdmissionReview"}, Request: req}
	data, err := json.Marshal(ar)
	if err != nil {
		panic(err)
	}
	return data
}

func rawObject(o runtime.Object) runtime.RawExtension {
	if o == nil {
		return runtime.RawExtension{}
	}
	data, err := json.Marshal(o)
	if err != nil {
		panic(err)
	}
	return runtime.RawExtension{Raw: data}
}

// request is an admission request for a write of obj (and old) by alice.
func request(kind metav1.GroupVersionKind, op admissionv1.Operation, obj, old runtime.Object) *admissionv1.AdmissionRequest {
	return &admissionv1.AdmissionRequest{
		UID: "req-1", Kind: kind, Operation: op,
		Object: rawObject(obj), OldObject: rawObject(old),
		UserInfo: authenticationv1.UserInfo{Username: "alice", Groups: []string{"system:authenticated"}},
	}
}

// withRaw is the AdmissionReview body of req with its object (and old object, if given)
// replaced by raw bytes, which need not be valid JSON or UTF-8.
func withRaw(req *admissionv1.AdmissionRequest, obj, old string) []byte {
	req.Object = runtime.RawExtension{Raw: []byte(`"\u0000object"`)}
	if old != "" {
		req.OldObject = runtime.RawExtension{Raw: []byte(`"\u0000old"`)}
	}
	body := reviewJSON("admission.k8s.io/v1", req)
	body = bytes.Replace(body, []byte(`"\u0000object"`), []byte(obj), 1)
	return bytes.Replace(body, []byte(`"\u0000old"`), []byte(old), 1)
}

// hostileCase is one row of TestHostileReviews; the small ones also seed FuzzReview.
type hostileCase struct {
	name        string
	path        string
	contentType string // "application/json" unless set; "-" sends none
	body        []byte
	// chunked sends the body without a Content-Length.
	chunked bool
	// wantHTTP is the HTTP status; for 200, the in-band answer follows.
	wantHTTP    int
	wantAllowed bool
	wantCode    int32
	// wantUID is the uid the response must echo ("" for bodies whose uid cannot be read).
	wantUID string
	// wantAPIVersion is the version of the AdmissionReview answered (default admission.k8s.io/v1).
	wantAPIVersion string
	// wantText must appear in the HTTP body, or the in-band message and warnings.
	wantText string
}

const maxBody = 7 << 20

func hostileCases() []hostileCase {
	v1 := "admission.k8s.io/v1"
	pvKind, pvcKind := endpointKinds[webhook.PathValidatePV], endpointKinds[webhook.PathValidatePVC]
	pv := testobj.PV("pv-1")
	pvJSON := string(rawObject(pv).Raw)
	good := reviewJSON(v1, request(pvKind, admissionv1.Create, pv, nil))
	deep := strings.Repeat(`{"a":`, 10_000) + `1` + strings.Repeat(`}`, 10_000)
	deepArr := strings.Repeat(`[`, 10_001) + strings.Repeat(`]`, 10_001)
	// A name and an annotation that are not UTF-8; json.Marshal would have replaced the bytes.
	badName := strings.Replace(pvJSON, `"name":"pv-1"`, "\"name\":\"pv-\xff\xfe\"", 1)
	badAnnotation := strings.Replace(pvJSON, `"name":"pv-1"`, "\"name\":\"pv-1\",\"annotations\":{\"note\":\"caf\xe9\"}", 1)
	generated := testobj.PVC("team-a", "", testobj.ClaimMeta(func(m *metav1.ObjectMeta) { m.GenerateName = "data-" }))
	bare := testobj.PV("pv-1")
	bare.Spec.ClaimRef = &corev1.ObjectReference{Namespace: "ns", Name: "c"}

	return []hostileCase{
		{name: "oversized body with its length declared", path: webhook.PathValidatePV,
			body: append(good, bytes.Repeat([]byte(" "), 10<<20)...), wantHTTP: http.StatusRequestEntityTooLarge, wantText: "larger than 7340032 bytes"},
		{name: "oversized body sent chunked", path: webhook.PathValidatePV, chunked: true,
			body: append(good, bytes.Repeat([]byte(" "), 10<<20)...), wantHTTP: http.StatusRequestEntityTooLarge, wantText: "larger than 7340032 bytes"},
		{name: "body at the limit is read", path: webhook.PathValidatePV,
			body: append(good, bytes.Repeat([]byte(" "), maxBody-len(good))...), wantHTTP: http.StatusOK, wantAllowed: true, wantCode: 200, wantUID: "req-1"},
		{name: "wrong content type", path: webhook.PathValidatePV, contentType: "text/plain", body: good,
			wantHTTP: http.StatusUnsupportedMediaType, wantText: `Content-Type "text/plain" is not application/json`},
		{name: "no content type", path: webhook.PathValidatePVC, contentType: "-", body: good,
			wantHTTP: http.StatusUnsupportedMediaType, wantText: `Content-Type "" is not application/json`},
		{name: "malformed content type", path: webhook.PathValidatePVC, contentType: "application/json;;", body: good,
			wantHTTP: http.StatusUnsupportedMediaType, wantText: "is not application/json"},
		{name: "empty body", path: webhook.PathValidatePV, body: nil,
			wantHTTP: http.StatusOK, wantCode: 400, wantText: "request body is empty"},
		{name: "blank body", path: webhook.PathMutatePV, body: []byte(" \n\t"),
			wantHTTP: http.StatusOK, wantCode: 400, wantText: "request body is empty"},
		{name: "not JSON", path: webhook.PathValidatePV, body: []byte("{{{"),
			wantHTTP: http.StatusOK, wantCode: 400, wantText: "decoding the AdmissionReview"},
		{name: "JSON nested 10,000 deep in the review", path: webhook.PathValidatePV,
			body:     []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":` + deep + `}`),
			wantHTTP: http.StatusOK, wantCode: 400, wantText: "exceeded max depth"},
		{name: "JSON nested 10,000 deep in the object", path: webhook.PathValidatePV,
			body:     withRaw(request(pvKind, admissionv1.Create, nil, nil), `{"metadata":{"name":"pv-1"},"x":`+deepArr+`}`, ""),
			wantHTTP: http.StatusOK, wantCode: 400, wantText: "exceeded max depth"},
		{name: "invalid UTF-8 in the name", path: webhook.PathValidatePV,
			body:     withRaw(request(pvKind, admissionv1.Create, nil, nil), badName, ""),
			wantHTTP: http.StatusOK, wantCode: 400, wantUID: "req-1", wantText: "decoding PersistentVolume: object: not valid UTF-8"},
		{name: "invalid UTF-8 in an annotation", path: webhook.PathMutatePV,
			body:     withRaw(request(pvKind, admissionv1.Create, nil, nil), badAnnotation, ""),
			wantHTTP: http.StatusOK, wantCode: 400, wantUID: "req-1", wantText: "object: not valid UTF-8"},
		{name: "invalid UTF-8 in the old object", path: webhook.PathValidatePV,
			body:     withRaw(request(pvKind, admissionv1.Update, nil, nil), pvJSON, badName),
			wantHTTP: http.StatusOK, wantCode: 400, wantUID: "req-1", wantText: "oldObject: not valid UTF-8"},
		{name: "invalid UTF-8 as the review's kind", path: webhook.PathValidatePVC, body: []byte("{\"kind\":\"\xff\xfe\"}"),
			wantHTTP: http.StatusOK, wantCode: 400, wantText: "pvguard answers kind AdmissionReview"},
		{name: "AdmissionReview admission.k8s.io/v2", path: webhook.PathValidatePV,
			body:     reviewJSON("admission.k8s.io/v2", request(pvKind, admissionv1.Create, pv, nil)),
			wantHTTP: http.StatusOK, wantCode: 400, wantUID: "req-1", wantText: `apiVersion "admission.k8s.io/v2" kind "AdmissionReview"`},
		{name: "AdmissionReview without apiVersion and kind", path: webhook.PathValidatePV,
			body:     bytes.Replace(good, []byte(`"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1",`), nil, 1),
			wantHTTP: http.StatusOK, wantCode: 400, wantUID: "req-1", wantText: `apiVersion "" kind ""`},
		{name: "a Pod instead of an AdmissionReview", path: webhook.PathValidatePV,
			body:     bytes.Replace(good, []byte(`"kind":"AdmissionReview"`), []byte(`"kind":"Pod"`), 1),
			wantHTTP: http.StatusOK, wantCode: 400, wantUID: "req-1", wantText: `kind "Pod"`},
		{name: "AdmissionReview v1beta1 is answered in v1beta1", path: webhook.PathValidatePV,
			body:     reviewJSON("admission.k8s.io/v1beta1", request(pvKind, admissionv1.Create, pv, nil)),
			wantHTTP: http.StatusOK, wantAllowed: true, wantCode: 200, wantUID: "req-1", wantAPIVersion: "admission.k8s.io/v1beta1"},
		{name: "review without request", path: webhook.PathValidatePV, body: reviewJSON(v1, nil),
			wantHTTP: http.StatusOK, wantCode: 400, wantText: "AdmissionReview has no request"},
		{name: "request without uid", path: webhook.PathValidatePV,
			body:     reviewJSON(v1, &admissionv1.AdmissionRequest{Kind: pvKind, Operation: admissionv1.Create, Object: rawObject(pv)}),
			wantHTTP: http.StatusOK, wantCode: 400, wantText: "request has no uid"},
		{name: "request without kind", path: webhook.PathValidatePV,
			body:     reviewJSON(v1, &admissionv1.AdmissionRequest{UID: "req-1", Operation: admissionv1.Create, Object: rawObject(pv)}),
			wantHTTP: http.StatusOK, wantCode: 400, wantUID: "req-1", wantText: "names no kind"},
		{name: "create without object", path: webhook.PathValidatePV,
			body:     reviewJSON(v1, request(pvKind, admissionv1.Create, nil, nil)),
			wantHTTP: http.StatusOK, wantCode: 400, wantUID: "req-1", wantText: "CREATE request carries no object"},
		{name: "create with a null object", path: webhook.PathValidatePVC,
			body:     withRaw(request(pvcKind, admissionv1.Create, nil, nil), "null", ""),
			wantHTTP: http.StatusOK, wantCode: 400, wantUID: "req-1", wantText: "CREATE request carries no object"},
		{name: "update with only the old object, validating", path: webhook.PathValidatePV,
			body:     reviewJSON(v1, request(pvKind, admissionv1.Update, nil, bare)),
			wantHTTP: http.StatusOK, wantCode: 400, wantUID: "req-1", wantText: "UPDATE request carries no object"},
		{name: "update with only the old object, mutating", path: webhook.PathMutatePV,
			body:     reviewJSON(v1, request(pvKind, admissionv1.Update, nil, bare)),
			wantHTTP: http.StatusOK, wantCode: 400, wantUID: "req-1", wantText: "UPDATE request carries no object"},
		{name: "update without the old object", path: webhook.PathValidatePV,
			body:     reviewJSON(v1, request(pvKind, admissionv1.Update, pv, nil)),
			wantHTTP: http.StatusOK, wantCode: 400, wantUID: "req-1", wantText: "UPDATE request carries no oldObject"},
		{name: "object without a name", path: webhook.PathValidatePV,
			body:     withRaw(request(pvKind, admissionv1.Create, nil, nil), "{}", ""),
			wantHTTP: http.StatusOK, wantCode: 400, wantUID: "req-1", wantText: "neither metadata.name nor metadata.generateName"},
		// go-json-experiment words this "cannot unmarshal" or "unable to unmarshal", chosen at
		// random once per process so that nobody depends on either.
		{name: "object that is not an object", path: webhook.PathValidateSC,
			body:     withRaw(request(endpointKinds[webhook.PathValidateSC], admissionv1.Create, nil, nil), `"fast"`, ""),
			wantHTTP: http.StatusOK, wantCode: 400, wantUID: "req-1", wantText: "unmarshal JSON string into Go v1.StorageClass"},
		{name: "object of the wrong kind for the path", path: webhook.PathValidatePV,
			body:     reviewJSON(v1, request(pvKind, admissionv1.Create, &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Name: "p"}}, nil)),
			wantHTTP: http.StatusOK, wantCode: 400, wantUID: "req-1", wantText: `object is apiVersion "v1" kind "Pod", not a PersistentVolume`},
		{name: "object of the wrong API group for the path", path: webhook.PathValidateSC,
			body:     reviewJSON(v1, request(endpointKinds[webhook.PathValidateSC], admissionv1.Create, testobj.PV("pv-1"), nil)),
			wantHTTP: http.StatusOK, wantCode: 400, wantUID: "req-1", wantText: "not a StorageClass.storage.k8s.io"},
		{name: "request of another kind is let through with a warning", path: webhook.PathValidatePV,
			body:     reviewJSON(v1, request(metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, admissionv1.Create, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}, nil)),
			wantHTTP: http.StatusOK, wantAllowed: true, wantCode: 200, wantUID: "req-1", wantText: "Pod sent to the PersistentVolume endpoint was not checked"},
		{name: "claim sent to the volume endpoint is let through with a warning", path: webhook.PathMutatePV,
			body:     reviewJSON(v1, request(pvcKind, admissionv1.Create, testobj.PVC("ns", "c"), nil)),
			wantHTTP: http.StatusOK, wantAllowed: true, wantCode: 200, wantUID: "req-1", wantText: "PersistentVolumeClaim sent to the PersistentVolume endpoint"},
		{name: "operation the apiserver never sends for volumes", path: webhook.PathValidatePV,
			body:     reviewJSON(v1, request(pvKind, admissionv1.Connect, pv, nil)),
			wantHTTP: http.StatusOK, wantCode: 400, wantUID: "req-1", wantText: `operation "CONNECT"`},
		{name: "delete is not judged", path: webhook.PathValidatePV,
			body:     reviewJSON(v1, request(pvKind, admissionv1.Delete, nil, pv)),
			wantHTTP: http.StatusOK, wantAllowed: true, wantCode: 200, wantUID: "req-1"},
		{name: "claim created with generateName reaches the mutating webhook unnamed", path: webhook.PathMutatePVC,
			body:     reviewJSON(v1, request(pvcKind, admissionv1.Create, generated, nil)),
			wantHTTP: http.StatusOK, wantAllowed: true, wantCode: 200, wantUID: "req-1"},
	}
}

// send serves one request and returns the recorder.
func send(h http.Handler, path, contentType string, body []byte, chunked bool, declared int64) *httptest.ResponseRecorder {
	var r io.Reader = bytes.NewReader(body)
	if chunked {
		r = io.MultiReader(r) // hides the length
	}
	req := httptest.NewRequest(http.MethodPost, path, r)
	if chunked {
		req.ContentLength = -1
	}
	if declared != 0 {
		req.ContentLength = declared
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestHostileReviews(t *testing.T) {
	h := fuzzServer(t)
	for _, tc := range hostileCases() {
		t.Run(tc.name, func(t *testing.T) {
			ct := tc.contentType
			switch ct {
			case "":
				ct = "application/json"
			case "-":
				ct = ""
			}
			rec := send(h, tc.path, ct, tc.body, tc.chunked, 0)
			if rec.Code != tc.wantHTTP {
				t.Fatalf("HTTP %d, want %d: %.300s", rec.Code, tc.wantHTTP, rec.Body.String())
			}
			if rec.Code != http.StatusOK {
				if !strings.Contains(rec.Body.String(), tc.wantText) {
					t.Fatalf("HTTP %d body %q does not say %q", rec.Code, rec.Body.String(), tc.wantText)
				}
				return
			}
			ar := decodeResponse(t, rec)
			resp := ar.Response
			wantVersion := tc.wantAPIVersion
			if wantVersion == "" {
				wantVersion = "admission.k8s.io/v1"
			}
			if ar.APIVersion != wantVersion || ar.Kind != "AdmissionReview" {
				t.Errorf("answered as %s %s, want %s AdmissionReview", ar.APIVersion, ar.Kind, wantVersion)
			}
			if resp.Allowed != tc.wantAllowed || resp.Result == nil || resp.Result.Code != tc.wantCode {
				t.Fatalf("allowed=%v result=%+v, want allowed=%v code %d", resp.Allowed, resp.Result, tc.wantAllowed, tc.wantCode)
			}
			if string(resp.UID) != tc.wantUID {
				t.Errorf("uid %q, want %q", resp.UID, tc.wantUID)
			}
			text := resp.Result.Message + " " + strings.Join(resp.Warnings, " ")
			if !strings.Contains(text, tc.wantText) {
				t.Errorf("answer %q does not say %q", text, tc.wantText)
			}
			if !resp.Allowed && !strings.Contains(resp.Result.Message, "PersistentVolume") && !strings.Contains(resp.Result.Message, "StorageClass") &&
				!strings.Contains(resp.Result.Message, "AdmissionReview") && !strings.Contains(resp.Result.Message, "body") {
				t.Errorf("denial %q does not say what could not be read", resp.Result.Message)
			}
		})
	}
}

func decodeResponse(t *testing.T, rec *httptest.ResponseRecorder) admissionv1.AdmissionReview {
	t.Helper()
	var ar admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &ar); err != nil || ar.Response == nil {
		t.Fatalf("HTTP 200 without an AdmissionReview response (%v): %.300s", err, rec.Body.String())
	}
	return ar
}

// TestMutationPatchesOnlyWhatItChanges: the patch touches the fields the mutation sets, and
// nothing the handler's API types could not read (a newer apiserver's fields) or would write back
// in another form (quantities, timestamps).
func TestMutationPatchesOnlyWhatItChanges(t *testing.T) {
	h := fuzzServer(t)
	pv := `{"apiVersion":"v1","kind":"PersistentVolume","metadata":{"name":"pv-1","creationTimestamp":"2026-01-01T00:00:00.123Z"},` +
		`"spec":{"futureField":{"a":1},"capacity":{"storage":"1.5Gi"},"accessModes":["ReadWriteOnce"],"hostPath":{"path":"/x"},` +
		`"claimRef":{"name":"c","namespace":"ns"}}}`
	pvc := `{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":"c","namespace":"ns"},` +
		`"spec":{"futureField":true,"storageClassName":"fast","volumeName":"pv-local","accessModes":["ReadWriteOnce"],"resources":{"requests":{"storage":"0.5Gi"}}}}`
	for _, tc := range []struct {
		path, obj string
		kind      metav1.GroupVersionKind
		want      string
	}{
		{webhook.PathMutatePV, pv, endpointKinds[webhook.PathMutatePV],
			`[{"op":"add","path":"/spec/claimRef/kind","value":"PersistentVolumeClaim"},{"op":"add","path":"/spec/claimRef/apiVersion","value":"v1"}]`},
		{webhook.PathMutatePVC, pvc, endpointKinds[webhook.PathMutatePVC],
			`[{"op":"replace","path":"/spec/storageClassName","value":"local"}]`},
	} {
		body := withRaw(request(tc.kind, admissionv1.Create, nil, nil), tc.obj, "")
		rec := send(h, tc.path, "application/json", body, false, 0)
		resp := decodeResponse(t, rec).Response
		if !resp.Allowed || resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch {
			t.Fatalf("%s: want an allowed JSON patch, got %+v", tc.path, resp)
		}
		if string(resp.Patch) != tc.want {
			t.Errorf("%s: patch %s, want %s", tc.path, resp.Patch, tc.want)
		}
	}
}

// FuzzReview posts fuzzed bodies with a few header variants to each webhook path and checks the
// answer: HTTP 200 with a well-formed AdmissionReview response, or a 4xx, never a 5xx or a
// recovered panic; the request's uid echoed whenever it could be read; and a write allowed on a
// validating path only when its objects decode (or, for a kind the endpoint does not judge, with
// a warning saying so).
func FuzzReview(f *testing.F) {
	for _, tc := range hostileCases() {
		if len(tc.body) > 64<<10 {
			continue // the size limit is the table's; large seeds slow every mutation
		}
		i := uint8(0)
		for j, p := range webhookPaths {
			if p == tc.path {
				i = uint8(j)
			}
		}
		f.Add(i, uint8(0), tc.body)
	}
	for _, c := range gen.AdmissionCases() {
		for j, p := range webhookPaths {
			if p == c.Path {
				f.Add(uint8(j), uint8(1), c.Body)
			}
		}
	}
	pvcKind, pvKind := endpointKinds[webhook.PathValidatePVC], endpointKinds[webhook.PathValidatePV]
	block := corev1.PersistentVolumeBlock
	bare := testobj.PV("pv-1")
	bare.Spec.ClaimRef = &corev1.ObjectReference{Namespace: "ns", Name: "c"}
	claim := testobj.PVC("team-a", "data")
	for _, s := range []struct {
		path string
		req  *admissionv1.AdmissionRequest
	}{
		{webhook.PathValidatePVC, request(pvcKind, admissionv1.Create, testobj.PVC("team-a", "data", testobj.ClaimVolumeMode(block), testobj.VolumeName("pv-7")), nil)},
		{webhook.PathValidatePVC, request(pvcKind, admissionv1.Create, testobj.PVC("team-b", "grab", testobj.VolumeName("pv-b")), nil)},
		{webhook.PathValidatePVC, request(pvcKind, admissionv1.Update, testobj.PVCWith(claim, testobj.ClaimBoundTo("pv-b"), testobj.VolumeName("")), testobj.PVCWith(claim, testobj.ClaimBoundTo("pv-b")))},
		{webhook.PathValidatePV, request(pvKind, admissionv1.Update, testobj.PV("pv-b", testobj.BoundTo(claim), testobj.ClaimRefUID("x")), testobj.PV("pv-b", testobj.BoundTo(claim)))},
		{webhook.PathValidateSC, request(endpointKinds[webhook.PathValidateSC], admissionv1.Create, testobj.StorageClass("second", "x", testobj.DefaultClass), nil)},
		{webhook.PathValidateSC, request(endpointKinds[webhook.PathValidateSC], admissionv1.Update,
			testobj.StorageClass("fast", "example.com/csi"), testobj.StorageClass("fast", "example.com/csi", testobj.DefaultClass))},
		{webhook.PathMutatePV, request(pvKind, admissionv1.Create, bare, nil)},
		{webhook.PathMutatePVC, request(pvcKind, admissionv1.Create, testobj.PVC("ns", "c", testobj.ClaimClass("fast"), testobj.VolumeName("pv-local")), nil)},
	} {
		for j, p := range webhookPaths {
			if p == s.path {
				f.Add(uint8(j), uint8(2), reviewJSON("admission.k8s.io/v1", s.req))
			}
		}
	}

	h := fuzzServer(f)
	f.Fuzz(func(t *testing.T, pathIndex, headers uint8, body []byte) {
		path := webhookPaths[int(pathIndex)%len(webhookPaths)]
		ct := fuzzContentTypes[int(headers&0x07)]
		var declared int64
		if headers&fuzzDeclaredHuge != 0 {
			declared = maxBody + 1
		}
		rec := send(h, path, ct.value, body, headers&fuzzChunked != 0, declared)
		switch {
		case !ct.accept:
			if rec.Code != http.StatusUnsupportedMediaType {
				t.Fatalf("Content-Type %q: HTTP %d, want 415", ct.value, rec.Code)
			}
			return
		case declared > maxBody:
			if rec.Code != http.StatusRequestEntityTooLarge {
				t.Fatalf("declared %d bytes: HTTP %d, want 413", declared, rec.Code)
			}
			return
		case rec.Code != http.StatusOK:
			t.Fatalf("HTTP %d for a %d-byte body: %.300s", rec.Code, len(body), rec.Body.String())
		}
		checkAnswer(t, path, body, decodeResponse(t, rec))
	})
}

// checkAnswer asserts what an in-band answer must be for a body, judged independently of the
// handler: its version, its uid, its code, and that nothing unreadable was allowed.
func checkAnswer(t *testing.T, path string, body []byte, ar admissionv1.AdmissionReview) {
	t.Helper()
	resp := ar.Response
	if ar.Kind != "AdmissionReview" || (ar.APIVersion != "admission.k8s.io/v1" && ar.APIVersion != "admission.k8s.io/v1beta1") {
		t.Fatalf("answered as %q %q", ar.APIVersion, ar.Kind)
	}
	if resp.Result == nil || resp.Result.Code >= 500 || resp.Result.Code < 200 {
		t.Fatalf("in-band result %+v (a 5xx here is a panic or a failed evaluation)", resp.Result)
	}
	if !resp.Allowed && (resp.Result.Code < 400 || resp.Result.Message == "") {
		t.Fatalf("refused without a 4xx saying why: %+v", resp.Result)
	}
	var in admissionv1.AdmissionReview
	readable := utiljson.Unmarshal(body, &in) == nil && in.Kind == "AdmissionReview" &&
		(in.APIVersion == "admission.k8s.io/v1" || in.APIVersion == "admission.k8s.io/v1beta1") &&
		in.Request != nil && in.Request.UID != ""
	if !readable {
		if resp.Allowed {
			t.Fatalf("a body that is not a v1 or v1beta1 AdmissionReview with a request was allowed")
		}
		if in.Request != nil && resp.UID != "" && resp.UID != in.Request.UID {
			t.Fatalf("uid %q answered for request %q", resp.UID, in.Request.UID)
		}
		return
	}
	req := in.Request
	if resp.UID != req.UID {
		t.Fatalf("uid %q answered for request %q", resp.UID, req.UID)
	}
	if ar.APIVersion != in.APIVersion {
		t.Fatalf("%s review answered in %s", in.APIVersion, ar.APIVersion)
	}
	if !resp.Allowed {
		return
	}
	want := endpointKinds[path]
	if req.Kind.Group != want.Group || req.Kind.Kind != want.Kind {
		if len(resp.Warnings) == 0 {
			t.Fatalf("%s allowed on the %s endpoint without a warning", req.Kind.Kind, want.Kind)
		}
		return
	}
	if req.Operation == admissionv1.Delete {
		return
	}
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		t.Fatalf("operation %q allowed", req.Operation)
	}
	if !decodes(want.Kind, req.Object.Raw, true) || (req.Operation == admissionv1.Update && !decodes(want.Kind, req.OldObject.Raw, false)) {
		t.Fatalf("%s of an object that does not decode was allowed:\nobject    %q\noldObject %q", req.Operation, req.Object.Raw, req.OldObject.Raw)
	}
	if len(resp.Patch) > 0 {
		checkPatch(t, want.Kind, resp)
	}
}

// decodes reports whether raw is a readable object of the kind: valid UTF-8 JSON of that kind,
// with a name or generateName when it is the new object.
func decodes(kind string, raw []byte, named bool) bool {
	if len(raw) == 0 || string(raw) == "null" || !utf8.Valid(raw) {
		return false
	}
	var obj runtime.Object
	switch kind {
	case "PersistentVolume":
		obj = &corev1.PersistentVolume{}
	case "PersistentVolumeClaim":
		obj = &corev1.PersistentVolumeClaim{}
	case "StorageClass":
		obj = &storagev1.StorageClass{}
	}
	if json.Unmarshal(raw, obj) != nil {
		return false
	}
	if k := obj.GetObjectKind().GroupVersionKind().Kind; k != "" && k != kind {
		return false
	}
	m := obj.(metav1.ObjectMetaAccessor).GetObjectMeta()
	return !named || m.GetName() != "" || m.GetGenerateName() != ""
}

// checkPatch: the mutations touch only the claimRef's kind and apiVersion, or a claim's class.
func checkPatch(t *testing.T, kind string, resp *admissionv1.AdmissionResponse) {
	t.Helper()
	if resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch {
		t.Fatalf("patch without type JSONPatch: %+v", resp.PatchType)
	}
	var ops []struct{ Op, Path string }
	if err := json.Unmarshal(resp.Patch, &ops); err != nil || len(ops) == 0 {
		t.Fatalf("patch %q is not a JSON patch: %v", resp.Patch, err)
	}
	allowed := map[string][]string{
		"PersistentVolume":      {"/spec/claimRef/kind", "/spec/claimRef/apiVersion"},
		"PersistentVolumeClaim": {"/spec/storageClassName"},
	}[kind]
	for _, op := range ops {
		ok := false
		for _, p := range allowed {
			ok = ok || op.Path == p
		}
		if !ok || (op.Op != "add" && op.Op != "replace") {
			t.Fatalf("mutation of a %s patches %s %s", kind, op.Op, op.Path)
		}
	}
}
