package newrule

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/pvguard/pvguard/audit"
	"github.com/pvguard/pvguard/clusterstate"
	"github.com/pvguard/pvguard/docs"
	"github.com/pvguard/pvguard/internal/clusterview"
	"github.com/pvguard/pvguard/internal/web"
	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/storage"
	"github.com/pvguard/pvguard/test/testobj"
	"github.com/pvguard/pvguard/webhook"
)

// classExists is the throwaway rule: everything about it is declared here, and nothing outside
// this file names it. It judges a state (a volume naming a StorageClass that does not exist), so
// admission and the audit both run it; it reads StorageClasses; and its finding says an object
// is missing, so the audit confirms it with a live read first.
func classExists() policy.Rule {
	return policy.Rule{
		ID:          "PVG099",
		Name:        "class-exists",
		Default:     policy.ActionDeny,
		Judges:      policy.JudgesState,
		Kinds:       []policy.Kind{policy.KindPersistentVolume},
		Reads:       []policy.Kind{policy.KindStorageClass},
		ConfirmLive: []string{"spec.storageClassName"},
		Summary:     "a volume names a StorageClass that exists",
		Check: func(r *policy.Review, v policy.View, _ *policy.Config) ([]policy.Finding, error) {
			name := storage.VolumeClass(r.PV)
			if name == "" {
				return nil, nil
			}
			classes, err := v.StorageClasses()
			if err != nil {
				return nil, err
			}
			for _, sc := range classes {
				if sc.Name == name {
					return nil, nil
				}
			}
			return []policy.Finding{{Field: "spec.storageClassName",
				Message: policy.Textf("%s names StorageClass %s, which does not exist", r.Object(), policy.Word(name)),
				Hint:    policy.Plain("create the class or name one that exists")}}, nil
		},
	}
}

// row is the line docs/rules.md would get for the rule.
const row = "| PVG099 | class-exists | deny | a volume names a StorageClass that exists |\n"

func TestAThrowawayRuleIsPickedUpEverywhere(t *testing.T) {
	rules := append(policy.Catalogue(), classExists())
	engine := policy.NewEngineWith(nil, rules)
	gold := testobj.StorageClass("gold", "csi.example.com")
	late := testobj.StorageClass("late", "csi.example.com") // in the apiserver, not yet in the cache
	silverPV := testobj.PV("pv-silver", testobj.Class("silver"))
	latePV := testobj.PV("pv-late", testobj.Class("late"))
	goldPV := testobj.PV("pv-gold", testobj.Class("gold"))

	t.Run("admission and its metrics", func(t *testing.T) {
		h, reg := admissionServer(engine, gold)
		if resp := admit(t, h, silverPV); resp.Allowed || !strings.Contains(resp.Result.Message, "[PVG099 class-exists] PersistentVolume pv-silver names StorageClass silver") {
			t.Errorf("creating pv-silver: allowed %v, %+v", resp.Allowed, resp.Result)
		}
		if resp := admit(t, h, goldPV); !resp.Allowed {
			t.Errorf("creating pv-gold: refused: %+v", resp.Result)
		}
		if n := metric(t, reg, "pvguard_admission_findings_total", "PVG099"); n != 1 {
			t.Errorf("pvguard_admission_findings_total{rule=PVG099} = %v, want 1", n)
		}
	})

	t.Run("audit, its reports and its metrics", func(t *testing.T) {
		cache := fake.NewClientBuilder().WithObjects(gold.DeepCopy(), silverPV.DeepCopy(), latePV.DeepCopy(), goldPV.DeepCopy()).Build()
		live := fake.NewClientBuilder().WithObjects(gold.DeepCopy(), late.DeepCopy(), silverPV.DeepCopy(), latePV.DeepCopy(), goldPV.DeepCopy()).Build()
		reg := prometheus.NewRegistry()
		now := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
		r := audit.NewRunner(audit.RunnerOptions{Cache: cache, Live: clusterview.New(cache, live).LiveView, Engine: func() *policy.Engine { return engine },
			Registry: reg, Log: logr.Discard(), Now: func() time.Time { return now }})
		if err := r.RunOnce(context.Background()); err != nil {
			t.Fatalf("RunOnce: %v", err)
		}
		// pv-late's class is missing only from the cache: the live read the rule asks for clears it.
		if got := objectsOf(r.Latest().Findings); got != "pv-silver" {
			t.Errorf("PVG099 findings on %q, want on pv-silver only", got)
		}
		data, err := json.Marshal(r.Latest())
		if err != nil || !bytes.Contains(data, []byte(`"rule":"PVG099","name":"class-exists","action":"deny","kind":"PersistentVolume","object":"pv-silver"`)) {
			t.Errorf("report JSON has no PVG099 finding on pv-silver: %s (%v)", data, err)
		}
		found, _, _ := r.LatestFindings()
		_, cluster := audit.OpenReports(found, now, 0, nil, nil)
		inReport := false
		for _, c := range cluster {
			for _, res := range c.Results {
				inReport = inReport || (res.Rule == "PVG099" && res.Result == "fail" && res.Subjects[0].Name == "pv-silver")
			}
		}
		if !inReport {
			t.Errorf("no ClusterReport result for PVG099 on pv-silver: %+v", cluster)
		}
		if n := metric(t, reg, "pvguard_audit_findings", "PVG099"); n != 1 {
			t.Errorf("pvguard_audit_findings{rule=PVG099} = %v, want 1", n)
		}

		// The offline audit (`pvguard audit -f`) has no live reads: the manifests are the whole truth.
		offline, err := engine.Audit(clusterstate.New(nil, []*corev1.PersistentVolume{silverPV, latePV, goldPV}, []*storagev1.StorageClass{gold}, nil), now, nil)
		if err != nil || objectsOf(offline) != "pv-late pv-silver" {
			t.Errorf("offline audit: PVG099 on %q (%v), want pv-late and pv-silver", objectsOf(offline), err)
		}
	})

	t.Run("docs check", func(t *testing.T) {
		errs := docs.CheckRules(docs.Pages, rules)
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), `no row starting "| PVG099 | class-exists | deny |"`) {
			t.Fatalf("docs check on the pages as they are: %v, want PVG099's row missing", errs)
		}
		pages := fstest.MapFS{}
		if err := fs.WalkDir(docs.Pages, ".", func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			data, err := fs.ReadFile(docs.Pages, path)
			if path == "rules.md" {
				data = bytes.Replace(data, []byte("\n## Audit-only rules\n"), []byte(row+"\n## Audit-only rules\n"), 1)
			}
			pages[path] = &fstest.MapFile{Data: data}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if errs := docs.CheckRules(pages, rules); len(errs) != 0 {
			t.Errorf("docs check with PVG099's row added: %v", errs)
		}
	})
}

// admit sends the creation of a volume or a claim to the validating webhook and returns its
// answer.
func admit(t *testing.T, h http.Handler, obj client.Object) *admissionv1.AdmissionResponse {
	t.Helper()
	kind, resource, path := "PersistentVolume", "persistentvolumes", webhook.PathValidatePV
	if _, ok := obj.(*corev1.PersistentVolumeClaim); ok {
		kind, resource, path = "PersistentVolumeClaim", "persistentvolumeclaims", webhook.PathValidatePVC
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: "1", Kind: metav1.GroupVersionKind{Version: "v1", Kind: kind}, Operation: admissionv1.Create,
			Resource: metav1.GroupVersionResource{Version: "v1", Resource: resource}, Name: obj.GetName(), Namespace: obj.GetNamespace(),
			Object: runtime.RawExtension{Raw: raw}, UserInfo: authenticationv1.UserInfo{Username: "alice"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var ar admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &ar); err != nil || ar.Response == nil {
		t.Fatalf("HTTP %d, not an AdmissionReview with a response: %s (%v)", rec.Code, rec.Body, err)
	}
	return ar.Response
}

// metric sums a metric's samples labelled with the rule.
func metric(t *testing.T, g prometheus.Gatherer, name, rule string) float64 {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range families {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "rule" && l.GetValue() == rule {
					sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
				}
			}
		}
	}
	return sum
}

// objectsOf lists the objects of the PVG099 findings, in order.
func objectsOf(found any) string {
	var out []string
	switch list := found.(type) {
	case []policy.Finding:
		for _, f := range list {
			if f.Rule == "PVG099" {
				out = append(out, f.Object.Name)
			}
		}
	case []audit.Finding:
		for _, f := range list {
			if f.Rule == "PVG099" {
				out = append(out, f.Object)
			}
		}
	}
	return strings.Join(out, " ")
}

// admissionServer is pvguard's web server judging reviews with engine over a view of objs, and the
// registry its metrics are in.
func admissionServer(engine *policy.Engine, objs ...runtime.Object) (http.Handler, *prometheus.Registry) {
	reg := prometheus.NewRegistry()
	return web.NewServer(web.Options{
		Engines: webhook.StaticEngine{E: engine}, Views: webhook.StaticView{V: testobj.NewView(objs...)}, Registry: reg,
		ReadyChecks: map[string]func() error{"cache": func() error { return nil }},
	}).Handler(), reg
}
