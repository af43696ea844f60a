package charts_test

import (
	"reflect"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/pvguard/pvguard/charts"
	"github.com/pvguard/pvguard/policy"
)

// TestChartAdmissionPoliciesAreThePolicyConfigs: the chart's admission policies are exactly what
// `pvguard admission-policies --params` makes, and their parameter object holds exactly what
// pvguard's elected replica writes into it for the policy config the chart renders, for configs
// with exemptions of every kind, controllers, an action changed, a renamed confirmation
// annotation and pvguard's own binder.
func TestChartAdmissionPoliciesAreThePolicyConfigs(t *testing.T) {
	cases := map[string]map[string]any{
		"defaults":      {},
		"binder active": vals("binder.mode", "active"),
		"exemptions, controllers, actions": {"policy": map[string]any{
			"exemptions":  map[string]any{"users": []any{"alice"}, "groups": []any{"ops"}, "namespaces": []any{"kube-*", "backup"}},
			"controllers": map[string]any{"serviceAccounts": []any{"csi/csi-provisioner"}, "users": []any{"populator"}, "groups": []any{"movers"}},
			"rules": map[string]any{
				"PVG011":               map[string]any{"exemptions": map[string]any{"serviceAccounts": []any{"velero/velero"}}},
				"volumename-immutable": map[string]any{"action": "warn"},
				"PVG012":               map[string]any{"exemptions": map[string]any{"namespaces": []any{"scratch-?"}, "groups": []any{"b", "a", "b"}}},
			},
			"reclaimConfirmAnnotation": "example.com/yes-delete",
		}},
		"policies off": vals("admissionPolicies.enabled", false),
	}
	for name, values := range cases {
		t.Run(name, func(t *testing.T) {
			manifests, err := charts.Render(release, namespace, values)
			if err != nil {
				t.Fatal(err)
			}
			var cfgYAML string
			var params *corev1.ConfigMap
			got := map[string]admissionregistrationv1.ValidatingAdmissionPolicySpec{}
			bindings := map[string]admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{}
			for _, m := range manifests {
				switch m.Object.GetKind() {
				case "ConfigMap":
					var cm corev1.ConfigMap
					fromUnstructured(t, m, &cm)
					switch {
					case strings.HasSuffix(cm.Name, "-policy"):
						cfgYAML = cm.Data["policy.yaml"]
					case cm.Name == fullname+"-admission-policy-params":
						params = &cm
					}
				case "ValidatingAdmissionPolicy":
					var p admissionregistrationv1.ValidatingAdmissionPolicy
					fromUnstructured(t, m, &p)
					got[p.Name] = p.Spec
				case "ValidatingAdmissionPolicyBinding":
					var b admissionregistrationv1.ValidatingAdmissionPolicyBinding
					fromUnstructured(t, m, &b)
					bindings[b.Name] = b.Spec
				}
			}
			cfg, err := policy.ParseConfig([]byte(cfgYAML))
			if err != nil {
				t.Fatalf("the rendered policy config: %v", err)
			}
			obj := policy.ParamObject{Namespace: namespace, Name: fullname + "-admission-policy-params"}
			want := policy.AdmissionPolicies(cfg, policy.AdmissionPolicyOptions{Prefix: fullname, Params: &obj})
			if values["admissionPolicies"] != nil {
				want = nil
				if params != nil {
					t.Errorf("the chart renders the parameter object %s without the policies", params.Name)
				}
			} else if params == nil || params.Namespace != obj.Namespace {
				t.Errorf("the chart renders no parameter object %s/%s", obj.Namespace, obj.Name)
			} else if wantData := policy.AdmissionPolicyParams(cfg); !reflect.DeepEqual(params.Data, wantData) {
				t.Errorf("the parameter object differs:\nchart:   %s\npvguard: %s", toJSON(params.Data), toJSON(wantData))
			}
			if len(got) != len(want) || len(bindings) != len(want) {
				t.Fatalf("the chart renders %d policies and %d bindings, pvguard makes %d", len(got), len(bindings), len(want))
			}
			for _, ap := range want {
				spec, ok := got[ap.Policy.Name]
				if !ok {
					t.Errorf("the chart has no %s", ap.Policy.Name)
					continue
				}
				if !reflect.DeepEqual(spec, ap.Policy.Spec) {
					t.Errorf("%s differs:\nchart:   %s\npvguard: %s", ap.Policy.Name, toJSON(spec), toJSON(ap.Policy.Spec))
				}
				if b := bindings[ap.Policy.Name]; !reflect.DeepEqual(b, ap.Binding.Spec) {
					t.Errorf("binding %s differs: chart %s, pvguard %s", ap.Policy.Name, toJSON(b), toJSON(ap.Binding.Spec))
				}
			}
		})
	}
}

// TestChartRefusesLineBreaksInPolicyLists: the parameter object holds a list one item per line,
// so an item with a line break would become two; the chart refuses to render one.
func TestChartRefusesLineBreaksInPolicyLists(t *testing.T) {
	_, err := charts.Render(release, namespace, map[string]any{"policy": map[string]any{
		"exemptions": map[string]any{"users": []any{"alice\nsystem:kube-scheduler"}},
	}})
	if err == nil || !strings.Contains(err.Error(), "line break") {
		t.Fatalf("err = %v, want a refusal naming the line break", err)
	}
}

// TestChartRefusesNamespacePatternsItCannotRender: a character class in a namespace exemption
// cannot be turned into the policies' regular expression by the chart: it says so, rather than
// install a policy that exempts other namespaces than pvguard does.
func TestChartRefusesNamespacePatternsItCannotRender(t *testing.T) {
	_, err := charts.Render(release, namespace, map[string]any{"policy": map[string]any{
		"exemptions": map[string]any{"namespaces": []any{"team-[ab]"}},
	}})
	if err == nil || !strings.Contains(err.Error(), "character class") {
		t.Fatalf("err = %v, want a refusal naming the character class", err)
	}
}

func fromUnstructured(t *testing.T, m charts.Manifest, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m.Object.Object, into); err != nil {
		t.Fatalf("%s: %v", m.Template, err)
	}
}
