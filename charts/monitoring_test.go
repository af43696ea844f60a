package charts_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/pvguard/pvguard/charts"
)

// The PrometheusRule's and the dashboard's PromQL is checked by the real promtool (`promtool
// check rules`, which parses every expression with Prometheus' own PromQL parser, checks each
// rule's fields and alert templates, and lints), built from the Go module proxy into bin/ by
// hack/build-tools.sh at the version pinned in hack/tools/pins. The alternative, Prometheus'
// rulefmt and promql/parser packages as a library in this test, would add
// github.com/prometheus/prometheus to pvguard's own go.mod, whose minimal version selection
// would raise the Kubernetes, OpenTelemetry and gRPC modules pvguard builds with to whatever
// Prometheus requires; the binary keeps its own dependency graph and is what an operator runs.

// alertNames are the alerts metrics.prometheusRule renders, and whether each needs the binder.
var alertNames = map[string]bool{
	"PvguardWebhookFailingOpen":             false,
	"PvguardWebhookCallsFailing":            false,
	"PvguardWebhookLatencyHigh":             false,
	"PvguardAdmissionDenialsHigh":           false,
	"PvguardAdmissionReviewErrors":          false,
	"PvguardServingCertificateExpiringSoon": false,
	"PvguardAdmissionPolicyParamsDrift":     false,
	"PvguardClaimPendingTooLong":            false,
	"PvguardBinderQueueBacklog":             true,
}

// monitoringOn turns on the PrometheusRule and the dashboard, over extra.
func monitoringOn(extra ...any) map[string]any {
	return vals(append([]any{"metrics.prometheusRule.enabled", true, "metrics.grafanaDashboard.enabled", true}, extra...)...)
}

// monitoringCases are the values the monitoring tests render.
func monitoringCases() map[string]map[string]any {
	return map[string]map[string]any{
		"defaults":      monitoringOn(),
		"binder active": monitoringOn("binder.mode", "active"),
		"binder shadow, timeout 10s, any apiserver job, no kube-state-metrics, no admission policies": monitoringOn("binder.mode", "shadow",
			"webhook.timeoutSeconds", 10, "metrics.prometheusRule.apiserverSelector", "",
			"metrics.prometheusRule.alerts.claimPending.enabled", false, "admissionPolicies.enabled", false),
		"selectors, labels, fullnameOverride, dashboard label": monitoringOn("fullnameOverride", "guard",
			"metrics.prometheusRule.apiserverSelector", `job="kube-apiserver", cluster=~"prod-.*"`,
			"metrics.prometheusRule.kubeStateMetricsSelector", `job="kube-state-metrics"`,
			"metrics.prometheusRule.labels", map[string]any{"release": "kube-prometheus-stack"},
			"metrics.grafanaDashboard.labelName", "grafana.example.com/dashboard", "metrics.grafanaDashboard.labelValue", "pvguard",
			"metrics.grafanaDashboard.annotations", map[string]any{"grafana_folder": "Storage"}),
	}
}

// TestMonitoringOffByDefault: neither the PrometheusRule nor the dashboard renders unless asked.
func TestMonitoringOffByDefault(t *testing.T) {
	for name, values := range map[string]map[string]any{
		"defaults":                  nil,
		"service monitor only":      vals("metrics.serviceMonitor.enabled", true),
		"rule only":                 vals("metrics.prometheusRule.enabled", true),
		"dashboard only":            vals("metrics.grafanaDashboard.enabled", true),
		"both off explicitly, full": vals("metrics.prometheusRule.enabled", false, "metrics.grafanaDashboard.enabled", false, "binder.mode", "active"),
	} {
		t.Run(name, func(t *testing.T) {
			manifests, err := charts.Render(release, namespace, values)
			if err != nil {
				t.Fatal(err)
			}
			wantRule := strings.Contains(name, "rule only")
			wantDashboard := strings.Contains(name, "dashboard only")
			rules, dashboards := 0, 0
			for _, m := range manifests {
				switch {
				case m.Object.GetKind() == "PrometheusRule":
					rules++
				case m.Object.GetKind() == "ConfigMap" && strings.HasSuffix(m.Object.GetName(), "-dashboard"):
					dashboards++
				}
			}
			if (rules == 1) != wantRule || rules > 1 {
				t.Errorf("%d PrometheusRules, want %v", rules, wantRule)
			}
			if (dashboards == 1) != wantDashboard || dashboards > 1 {
				t.Errorf("%d dashboard ConfigMaps, want %v", dashboards, wantDashboard)
			}
		})
	}
}

// rule is one rule of a PrometheusRule, as rendered.
type rule struct {
	Alert       string            `json:"alert,omitempty"`
	Record      string            `json:"record,omitempty"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type ruleGroup struct {
	Name  string `json:"name"`
	Rules []rule `json:"rules"`
}

// renderMonitoring renders values and returns the PrometheusRule, its groups and the dashboard
// ConfigMap.
func renderMonitoring(t *testing.T, values map[string]any) (*unstructured.Unstructured, []ruleGroup, *corev1.ConfigMap, rendered) {
	t.Helper()
	manifests, err := charts.Render(release, namespace, values)
	if err != nil {
		t.Fatal(err)
	}
	r := decodeAll(t, manifests)
	if n := len(r.raw["PrometheusRule"]); n != 1 {
		t.Fatalf("%d PrometheusRules, want 1", n)
	}
	pr := r.raw["PrometheusRule"][0]
	raw, _, _ := unstructured.NestedSlice(pr.Object, "spec", "groups")
	data, err := json.Marshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	var groups []ruleGroup
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&groups); err != nil {
		t.Fatalf("PrometheusRule groups: %v", err)
	}
	var dashboard *corev1.ConfigMap
	for _, o := range r.objects["ConfigMap"] {
		if cm := o.(*corev1.ConfigMap); strings.HasSuffix(cm.Name, "-dashboard") {
			dashboard = cm
		}
	}
	if dashboard == nil {
		t.Fatal("no dashboard ConfigMap")
	}
	return pr, groups, dashboard, r
}

// TestPrometheusRule checks what the alerts select and say: pvguard's series by the job and
// namespace the ServiceMonitor gives them, the apiserver's by exactly the webhook names the
// chart's webhook configurations carry, the thresholds and for: durations from the values, and
// a summary, description, runbook_url and severity on every alert.
func TestPrometheusRule(t *testing.T) {
	for name, values := range monitoringCases() {
		t.Run(name, func(t *testing.T) {
			pr, groups, _, r := renderMonitoring(t, values)
			fullName := fullname
			if o, ok := values["fullnameOverride"].(string); ok {
				fullName = o
			}
			if pr.GetAPIVersion() != "monitoring.coreos.com/v1" || pr.GetName() != fullName || pr.GetNamespace() != namespace {
				t.Errorf("PrometheusRule is %s %s/%s", pr.GetAPIVersion(), pr.GetNamespace(), pr.GetName())
			}
			wantLabels, _, _ := unstructured.NestedStringMap(values, "metrics", "prometheusRule", "labels")
			for k, v := range wantLabels {
				if pr.GetLabels()[k] != v {
					t.Errorf("PrometheusRule label %s = %q, want %q", k, pr.GetLabels()[k], v)
				}
			}
			// The ServiceMonitor's targets get job=<Service name> and the release namespace.
			svc := r.one(t, "Service").(*corev1.Service)
			pvSel := fmt.Sprintf(`job=%q, namespace=%q`, svc.Name, svc.Namespace)
			hooks := webhookNames(t, values)
			binder, _, _ := unstructured.NestedString(values, "binder", "mode")
			pending := true
			if v, ok, _ := unstructured.NestedBool(values, "metrics", "prometheusRule", "alerts", "claimPending", "enabled"); ok {
				pending = v
			}
			policies := true
			if v, ok, _ := unstructured.NestedBool(values, "admissionPolicies", "enabled"); ok {
				policies = v
			}
			timeout := int64(2)
			if v, ok, _ := unstructured.NestedFieldNoCopy(values, "webhook", "timeoutSeconds"); ok {
				timeout = int64(v.(int))
			}
			apiserverSel := `job="apiserver"`
			if v, ok, _ := unstructured.NestedString(values, "metrics", "prometheusRule", "apiserverSelector"); ok {
				apiserverSel = v
			}

			seen := map[string]rule{}
			for _, g := range groups {
				for _, rl := range g.Rules {
					if _, dup := seen[rl.Alert]; dup {
						t.Errorf("alert %s twice", rl.Alert)
					}
					seen[rl.Alert] = rl
					for _, a := range []string{"summary", "description", "runbook_url"} {
						if strings.TrimSpace(rl.Annotations[a]) == "" {
							t.Errorf("%s has no %s", rl.Alert, a)
						}
					}
					if !strings.HasSuffix(rl.Annotations["runbook_url"], "docs/install.md#"+strings.ToLower(rl.Alert)) {
						t.Errorf("%s runbook_url %q", rl.Alert, rl.Annotations["runbook_url"])
					}
					if s := rl.Labels["severity"]; s != "warning" && s != "critical" {
						t.Errorf("%s severity %q", rl.Alert, s)
					}
					if rl.For == "" {
						t.Errorf("%s has no for:", rl.Alert)
					}
					switch {
					case strings.Contains(rl.Expr, "pvguard_") && !strings.Contains(rl.Expr, pvSel):
						t.Errorf("%s does not select pvguard's series by %s: %s", rl.Alert, pvSel, rl.Expr)
					case strings.Contains(rl.Expr, "apiserver_admission_webhook"):
						got := webhookRegexp.FindStringSubmatch(rl.Expr)
						if got == nil {
							t.Errorf("%s selects no webhook names: %s", rl.Alert, rl.Expr)
							break
						}
						names := strings.Split(strings.ReplaceAll(got[1], `\\.`, "."), "|")
						slices.Sort(names)
						if !slices.Equal(names, hooks) {
							t.Errorf("%s selects webhooks %v, the chart's are %v", rl.Alert, names, hooks)
						}
						if apiserverSel != "" && !strings.Contains(rl.Expr, ", "+apiserverSel) {
							t.Errorf("%s lacks the apiserver selector %s: %s", rl.Alert, apiserverSel, rl.Expr)
						}
					}
				}
			}
			for a, needsBinder := range alertNames {
				want := (!needsBinder || binder == "shadow" || binder == "active") && (a != "PvguardClaimPendingTooLong" || pending) &&
					(a != "PvguardAdmissionPolicyParamsDrift" || policies)
				if _, ok := seen[a]; ok != want {
					t.Errorf("alert %s rendered: %v, want %v", a, ok, want)
				}
			}
			if len(seen) > len(alertNames) {
				t.Errorf("alerts %v, known %v", slices.Sorted(maps.Keys(seen)), alertNames)
			}
			// The latency threshold follows webhook.timeoutSeconds (timeoutFraction 0.5).
			wantLatency := strconv.FormatFloat(float64(timeout)/2, 'f', -1, 64)
			if e := seen["PvguardWebhookLatencyHigh"].Expr; !strings.HasSuffix(strings.TrimSpace(e), "> "+wantLatency) {
				t.Errorf("PvguardWebhookLatencyHigh threshold is not %ss: %s", wantLatency, e)
			}
			if rl := seen["PvguardServingCertificateExpiringSoon"]; !strings.Contains(rl.Expr, "< 14 * 86400") || rl.For != "1h" {
				t.Errorf("certificate expiry alert: %s for %s", rl.Expr, rl.For)
			}
			if rl, ok := seen["PvguardBinderQueueBacklog"]; ok && (!strings.Contains(rl.Expr, "> 1000") || rl.For != "15m") {
				t.Errorf("binder queue alert: %s for %s", rl.Expr, rl.For)
			}
		})
	}
}

// webhookRegexp is the name matcher of the apiserver's webhook series.
var webhookRegexp = regexp.MustCompile(`name=~"([^"]*)"`)

// webhookNames are the names of the webhooks the chart renders, sorted.
func webhookNames(t *testing.T, values map[string]any) []string {
	t.Helper()
	v, m, err := charts.WebhookConfigurations(release, namespace, values)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, w := range v.Webhooks {
		names = append(names, w.Name)
	}
	for _, w := range m.Webhooks {
		names = append(names, w.Name)
	}
	slices.Sort(names)
	return names
}

// grafanaDashboard is the part of the dashboard JSON the test reads.
type grafanaDashboard struct {
	Title  string           `json:"title"`
	UID    string           `json:"uid"`
	Panels []dashboardPanel `json:"panels"`
}

type dashboardPanel struct {
	ID      int    `json:"id"`
	Title   string `json:"title"`
	Type    string `json:"type"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
}

// dashboardPanels are the signals the dashboard must show, by a word of the panel title.
var dashboardPanels = []string{"reviews by decision", "Denied", "latency", "rejections", "fail open",
	"Review errors", "queue depth", "binds", "Pending claims", "certificate"}

// TestGrafanaDashboard checks the dashboard ConfigMap: the sidecar's label, valid JSON with a
// panel for every signal, every panel's expressions selecting pvguard's series as the rules do.
func TestGrafanaDashboard(t *testing.T) {
	for name, values := range monitoringCases() {
		t.Run(name, func(t *testing.T) {
			_, _, cm, r := renderMonitoring(t, values)
			labelName, labelValue := "grafana_dashboard", "1"
			if v, ok, _ := unstructured.NestedString(values, "metrics", "grafanaDashboard", "labelName"); ok {
				labelName = v
			}
			if v, ok, _ := unstructured.NestedString(values, "metrics", "grafanaDashboard", "labelValue"); ok {
				labelValue = v
			}
			if cm.Labels[labelName] != labelValue {
				t.Errorf("dashboard ConfigMap labels %v, want %s: %q", cm.Labels, labelName, labelValue)
			}
			if folder, ok, _ := unstructured.NestedString(values, "metrics", "grafanaDashboard", "annotations", "grafana_folder"); ok && cm.Annotations["grafana_folder"] != folder {
				t.Errorf("dashboard ConfigMap annotations %v", cm.Annotations)
			}
			d := parseDashboard(t, cm)
			svc := r.one(t, "Service").(*corev1.Service)
			if d.UID == "" || len(d.UID) > 40 || !strings.Contains(d.Title, svc.Name) {
				t.Errorf("dashboard uid %q title %q", d.UID, d.Title)
			}
			pvSel := fmt.Sprintf(`job=%q, namespace=%q`, svc.Name, svc.Namespace)
			hooks := webhookNames(t, values)
			for _, want := range dashboardPanels {
				if !slices.ContainsFunc(d.Panels, func(p dashboardPanel) bool {
					return strings.Contains(strings.ToLower(p.Title), strings.ToLower(want))
				}) {
					t.Errorf("no panel for %q", want)
				}
			}
			for _, p := range d.Panels {
				if len(p.Targets) == 0 {
					t.Errorf("panel %q has no query", p.Title)
				}
				for _, tg := range p.Targets {
					if strings.Contains(tg.Expr, "__PVGUARD") {
						t.Errorf("panel %q: placeholder left: %s", p.Title, tg.Expr)
					}
					if strings.Contains(tg.Expr, "pvguard_") && !strings.Contains(tg.Expr, pvSel) {
						t.Errorf("panel %q does not select pvguard's series by %s: %s", p.Title, pvSel, tg.Expr)
					}
					if m := webhookRegexp.FindStringSubmatch(tg.Expr); m != nil {
						names := strings.Split(strings.ReplaceAll(m[1], `\\.`, "."), "|")
						slices.Sort(names)
						if !slices.Equal(names, hooks) {
							t.Errorf("panel %q selects webhooks %v, the chart's are %v", p.Title, names, hooks)
						}
					}
				}
			}
		})
	}
}

func parseDashboard(t *testing.T, cm *corev1.ConfigMap) grafanaDashboard {
	t.Helper()
	raw, ok := cm.Data["pvguard.json"]
	if !ok {
		t.Fatalf("dashboard ConfigMap has keys %v, want pvguard.json", slices.Sorted(maps.Keys(cm.Data)))
	}
	var d grafanaDashboard
	if err := json.Unmarshal([]byte(raw), &d); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	if len(d.Panels) == 0 {
		t.Fatal("dashboard has no panels")
	}
	return d
}

// promtool is bin/promtool, built by hack/build-tools.sh (make tools).
func promtool(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "bin", "promtool"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("no promtool in bin/: run `make tools` (hack/build-tools.sh builds it from the version pinned in hack/tools/pins): %v", err)
	}
	return p
}

// checkRules writes groups as a Prometheus rule file and runs `promtool check rules` on it,
// lint problems included; it returns promtool's output and whether it passed.
func checkRules(t *testing.T, groups any) (string, bool) {
	t.Helper()
	data, err := yaml.Marshal(map[string]any{"groups": groups})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(t.Context(), promtool(t), "check", "rules", "--lint=all", "--lint-fatal", file).CombinedOutput()
	return string(out), err == nil
}

// dashboardRuleGroups turns every panel query into a recording rule, so promtool parses the
// dashboard's PromQL as it parses the alerts'. Grafana's $__rate_interval becomes 5m, as
// Grafana substitutes a duration for it before sending the query.
func dashboardRuleGroups(d grafanaDashboard) []ruleGroup {
	g := ruleGroup{Name: "dashboard"}
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			g.Rules = append(g.Rules, rule{
				Record: fmt.Sprintf("pvguard_dashboard:panel_%d_%s", p.ID, strings.ToLower(tg.RefID)),
				Expr:   strings.ReplaceAll(tg.Expr, "$__rate_interval", "5m"),
			})
		}
	}
	return []ruleGroup{g}
}

// TestPromtoolChecksRulesAndDashboard runs `promtool check rules` on the rendered rule file and
// on the dashboard's queries, for every case.
func TestPromtoolChecksRulesAndDashboard(t *testing.T) {
	for name, values := range monitoringCases() {
		t.Run(name, func(t *testing.T) {
			_, groups, cm, _ := renderMonitoring(t, values)
			if out, ok := checkRules(t, groups); !ok {
				t.Errorf("promtool check rules on the PrometheusRule:\n%s", out)
			}
			if out, ok := checkRules(t, dashboardRuleGroups(parseDashboard(t, cm))); !ok {
				t.Errorf("promtool check rules on the dashboard's queries:\n%s", out)
			}
		})
	}
}

// TestPromtoolCatchesABrokenExpression: the check above can fail. One alert's expression and one
// panel's, each broken as a typo would break it, are refused by promtool and named in its output.
func TestPromtoolCatchesABrokenExpression(t *testing.T) {
	_, groups, cm, _ := renderMonitoring(t, monitoringOn())
	broken := slices.Clone(groups)
	broken[0].Rules = slices.Clone(broken[0].Rules)
	broken[0].Rules[0].Expr = strings.Replace(broken[0].Rules[0].Expr, "sum by (name) (", "sum by (name (", 1)
	if broken[0].Rules[0].Expr == groups[0].Rules[0].Expr {
		t.Fatalf("did not break %s: %s", groups[0].Rules[0].Alert, groups[0].Rules[0].Expr)
	}
	if out, ok := checkRules(t, broken); ok || !strings.Contains(out, "parse error") {
		t.Errorf("promtool accepted %q:\n%s", broken[0].Rules[0].Expr, out)
	}
	dashboard := dashboardRuleGroups(parseDashboard(t, cm))
	dashboard[0].Rules[0].Expr = strings.Replace(dashboard[0].Rules[0].Expr, "[5m]", "[5 m]", 1)
	if out, ok := checkRules(t, dashboard); ok || !strings.Contains(out, "parse error") {
		t.Errorf("promtool accepted %q:\n%s", dashboard[0].Rules[0].Expr, out)
	}
}

// TestPromtoolAlertsFire runs `promtool test rules` on the rendered alerts (annotations dropped:
// promtool compares them whole, and check rules above has parsed their templates) over series as
// the apiserver and pvguard export them: each alert fires on its signal, with its labels, and a
// webhook that is not pvguard's or a pvguard of another release fires nothing.
func TestPromtoolAlertsFire(t *testing.T) {
	_, groups, _, _ := renderMonitoring(t, monitoringOn("binder.mode", "active"))
	for i := range groups {
		groups[i].Rules = slices.Clone(groups[i].Rules)
		for j := range groups[i].Rules {
			groups[i].Rules[j].Annotations = nil
		}
	}
	dir := t.TempDir()
	rules, err := yaml.Marshal(map[string]any{"groups": groups})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), rules, 0o600); err != nil {
		t.Fatal(err)
	}
	const pv = `job="pvguard", namespace="pvguard-system", instance="10.0.0.1:9443"`
	const other = `job="pvguard", namespace="elsewhere", instance="10.0.0.2:9443"`
	const apiserver = `job="apiserver", instance="10.0.0.9:6443"`
	tests := `rule_files: [rules.yaml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'apiserver_admission_webhook_fail_open_count{` + apiserver + `, name="validate-pvc.pvguard.io", type="validating"}'
        values: '0 0 0 1 2 2 2'
      - series: 'apiserver_admission_webhook_fail_open_count{` + apiserver + `, name="validate.other.example.com", type="validating"}'
        values: '0 5 10 15 20 25 30'
      - series: 'apiserver_admission_webhook_rejection_count{` + apiserver + `, name="validate-pv.pvguard.io", type="validating", operation="CREATE", error_type="calling_webhook_error", rejection_code="500"}'
        values: '0+3x10'
      - series: 'apiserver_admission_webhook_rejection_count{` + apiserver + `, name="validate-pv.pvguard.io", type="validating", operation="CREATE", error_type="no_error", rejection_code="403"}'
        values: '0+3x10'
      - series: 'pvguard_serving_certificate_expiry_timestamp_seconds{` + pv + `}'
        values: '864000x150'
      - series: 'pvguard_serving_certificate_expiry_timestamp_seconds{` + other + `}'
        values: '864000x150'
      - series: 'pvguard_binder_queue_depth{` + pv + `, queue="sync"}'
        values: '2000x30'
      - series: 'pvguard_binder_queue_depth{` + pv + `, queue="plan"}'
        values: '1x30'
      - series: 'pvguard_admission_policy_params_in_sync{` + pv + `}'
        values: '1 1 0 0 0 0 0 0 0 0 1 1 1'
      - series: 'pvguard_admission_policy_params_in_sync{` + other + `}'
        values: '0x12'
    alert_rule_test:
      - eval_time: 5m
        alertname: PvguardWebhookFailingOpen
        exp_alerts:
          - exp_labels: {name: validate-pvc.pvguard.io, severity: critical}
      - eval_time: 5m
        alertname: PvguardWebhookCallsFailing
        exp_alerts:
          - exp_labels: {name: validate-pv.pvguard.io, error_type: calling_webhook_error, severity: critical}
      - eval_time: 30m
        alertname: PvguardWebhookFailingOpen
      - eval_time: 10m
        alertname: PvguardBinderQueueBacklog
      - eval_time: 20m
        alertname: PvguardBinderQueueBacklog
        exp_alerts:
          - exp_labels: {job: pvguard, namespace: pvguard-system, severity: warning}
      - eval_time: 5m
        alertname: PvguardAdmissionPolicyParamsDrift
      - eval_time: 8m
        alertname: PvguardAdmissionPolicyParamsDrift
        exp_alerts:
          - exp_labels: {job: pvguard, namespace: pvguard-system, instance: "10.0.0.1:9443", severity: warning}
      - eval_time: 11m
        alertname: PvguardAdmissionPolicyParamsDrift
      - eval_time: 30m
        alertname: PvguardServingCertificateExpiringSoon
      - eval_time: 90m
        alertname: PvguardServingCertificateExpiringSoon
        exp_alerts:
          - exp_labels: {job: pvguard, namespace: pvguard-system, severity: warning}
`
	if err := os.WriteFile(filepath.Join(dir, "tests.yaml"), []byte(tests), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), promtool(t), "test", "rules", "tests.yaml")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool test rules: %v\n%s", err, out)
	}
}
