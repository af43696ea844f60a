package charts_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	certmanagerv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"helm.sh/helm/v4/pkg/chart/common"
	chartutil "helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/v2/lint"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	serializerjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/pvguard/pvguard/charts"
	"github.com/pvguard/pvguard/clusterstate"
	"github.com/pvguard/pvguard/internal/cli"
	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/webhook"
)

const (
	release   = "pvguard"
	namespace = "pvguard-system"
	fullname  = "pvguard"
)

// chartCase is one set of values and what the chart must do with it.
type chartCase struct {
	values map[string]any
	// What the values switch on, as the assertions expect it.
	binder          string // off, shadow, active
	noVolumeFits    string // --no-volume-fits-after
	auditOff        bool
	certManager     bool
	policiesOff     bool // admissionPolicies.enabled=false
	replicas        int
	antiAffinity    string // preferred, required, none
	serviceMonitor  bool
	networkPolicy   bool
	apiserverCIDRs  []string // the only sources of the webhook port (any when empty)
	plainPort       int
	clientCA        string
	matchConditions []admissionregistrationv1.MatchCondition
	failurePolicy   admissionregistrationv1.FailurePolicyType
	// componentsFailurePolicy is the components' webhooks' (default Ignore).
	componentsFailurePolicy admissionregistrationv1.FailurePolicyType
	// component is the CEL condition that sends a write to the components' webhooks (default:
	// defaultComponents, or activeComponents with binder active).
	component      string
	timeoutSeconds int32
	claimSelector  []metav1.LabelSelectorRequirement // beyond the own-namespace exclusion
}

// chartCases covers the defaults and every toggle; the defaults are filled in by withDefaults.
func chartCases() map[string]chartCase {
	cases := map[string]chartCase{
		"defaults":              {},
		"cert-manager":          {values: vals("certManager.enabled", true), certManager: true},
		"binder off (explicit)": {values: vals("binder.mode", "off")},
		"binder shadow":         {values: vals("binder.mode", "shadow"), binder: "shadow"},
		"binder active":         {values: vals("binder.mode", "active"), binder: "active"},
		"binder active, NoVolumeFits off": {
			values: vals("binder.mode", "active", "binder.noVolumeFitsAfter", 0), binder: "active", noVolumeFits: "0",
		},
		"binder shadow, NoVolumeFits after 30s": {
			values: vals("binder.mode", "shadow", "binder.noVolumeFitsAfter", "30s"), binder: "shadow", noVolumeFits: "30s",
		},
		"audit off":                     {values: vals("audit.interval", "0"), auditOff: true},
		"audit off (integer 0)":         {values: vals("audit.interval", 0), auditOff: true},
		"audit off (0m0s)":              {values: vals("audit.interval", "0m0s"), auditOff: true},
		"service monitor":               {values: vals("metrics.serviceMonitor.enabled", true), serviceMonitor: true},
		"prometheus rule and dashboard": {values: vals("metrics.prometheusRule.enabled", true, "metrics.grafanaDashboard.enabled", true)},
		"service monitor, plain":        {values: vals("metrics.serviceMonitor.enabled", true, "metrics.plainPort", 8080), serviceMonitor: true, plainPort: 8080},
		"network policy":                {values: vals("networkPolicy.enabled", true), networkPolicy: true},
		"network policy, plain metrics": {
			values:        vals("networkPolicy.enabled", true, "metrics.plainPort", 8080, "networkPolicy.metricsNamespaceSelector", map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": "monitoring"}}),
			networkPolicy: true, plainPort: 8080,
		},
		"network policy, webhook port from the control plane only": {
			values:        vals("networkPolicy.enabled", true, "networkPolicy.apiserverCIDRs", []any{"10.0.0.0/24", "fd00:10::/64"}),
			networkPolicy: true, apiserverCIDRs: []string{"10.0.0.0/24", "fd00:10::/64"},
		},
		"one replica":            {values: vals("replicas", 1), replicas: 1},
		"anti-affinity required": {values: vals("podAntiAffinity", "required"), antiAffinity: "required"},
		"anti-affinity none":     {values: vals("podAntiAffinity", "none"), antiAffinity: "none"},
		"nothing elected (cert-manager, audit off, no admission policies)": {
			values:      vals("certManager.enabled", true, "audit.interval", "0", "admissionPolicies.enabled", false),
			certManager: true, auditOff: true, policiesOff: true,
		},
		"only the admission policies' parameters elected (cert-manager, audit off)": {
			values:      vals("certManager.enabled", true, "audit.interval", "0"),
			certManager: true, auditOff: true,
		},
		"client CA": {values: vals("tls.clientCA.configMap", "apiserver-client-ca"), clientCA: "apiserver-client-ca"},
		"match conditions": {
			values: vals("webhook.matchConditions", []any{map[string]any{"name": "not-secrets-store", "expression": "!has(object.spec.csi) || object.spec.csi.driver != 'secrets-store.csi.k8s.io'"}}),
			matchConditions: []admissionregistrationv1.MatchCondition{{
				Name: "not-secrets-store", Expression: "!has(object.spec.csi) || object.spec.csi.driver != 'secrets-store.csi.k8s.io'",
			}},
		},
		"failure policy, timeout, claim selector": {
			values: vals("webhook.failurePolicy", "Ignore", "webhook.timeoutSeconds", 10,
				"webhook.namespaceSelector.matchExpressions", []any{map[string]any{"key": "pvguard.io/skip", "operator": "DoesNotExist"}}),
			failurePolicy: admissionregistrationv1.Ignore, timeoutSeconds: 10,
			claimSelector: []metav1.LabelSelectorRequirement{{Key: "pvguard.io/skip", Operator: metav1.LabelSelectorOpDoesNotExist}},
		},
		"components listed": {
			values: vals("webhook.components.identities", []any{
				map[string]any{"user": "system:kube-controller-manager"},
				map[string]any{"serviceAccount": "velero/velero"},
				map[string]any{"namespace": "csi-drivers"},
				map[string]any{"namespace": "populator-*"},
				map[string]any{"group": "storage-ops"},
				map[string]any{"user": `o'brien\`},
			}),
			component: `request.userInfo.username in ['system:kube-controller-manager', 'system:serviceaccount:velero:velero', 'o\'brien\\'] || ` +
				`request.userInfo.username.startsWith('system:serviceaccount:csi-drivers:') || request.userInfo.username.startsWith('system:serviceaccount:populator-') || ` +
				`(has(request.userInfo.groups) && request.userInfo.groups.exists(g, g in ['storage-ops']))`,
		},
		"no components": {values: vals("webhook.components.identities", []any{}), component: "false"},
		"every ServiceAccount, allowed": {
			values:    vals("webhook.components.identities", []any{map[string]any{"namespace": "*"}}, "webhook.components.allowAllServiceAccounts", true),
			component: "request.userInfo.username.startsWith('system:serviceaccount:')",
		},
		"everything": {
			values: vals("certManager.enabled", true, "binder.mode", "active", "audit.interval", "0",
				"metrics.serviceMonitor.enabled", true, "metrics.plainPort", 8080, "networkPolicy.enabled", true,
				"replicas", 3, "tls.clientCA.configMap", "apiserver-client-ca",
				"metrics.prometheusRule.enabled", true, "metrics.grafanaDashboard.enabled", true),
			certManager: true, binder: "active", auditOff: true, serviceMonitor: true, plainPort: 8080,
			networkPolicy: true, replicas: 3, clientCA: "apiserver-client-ca",
		},
	}
	for name, c := range cases {
		cases[name] = c.withDefaults()
	}
	return cases
}

func (c chartCase) withDefaults() chartCase {
	if c.binder == "" {
		c.binder = "off"
	}
	if c.noVolumeFits == "" {
		c.noVolumeFits = "2m"
	}
	if c.replicas == 0 {
		c.replicas = 2
	}
	if c.antiAffinity == "" {
		c.antiAffinity = "preferred"
	}
	if c.failurePolicy == "" {
		c.failurePolicy = admissionregistrationv1.Fail
	}
	if c.componentsFailurePolicy == "" {
		c.componentsFailurePolicy = admissionregistrationv1.Ignore
	}
	if c.timeoutSeconds == 0 {
		c.timeoutSeconds = 2
	}
	if c.component == "" {
		c.component = defaultComponents
		if c.binder == "active" {
			c.component = activeComponents
		}
	}
	return c
}

// The components by default: kube-controller-manager, kube-scheduler, the nodes and
// kube-system's ServiceAccounts (kube-controller-manager's controllers); with binder active,
// pvguard's own ServiceAccount too. Any other ServiceAccount is not one.
const (
	defaultComponents = "request.userInfo.username in ['system:kube-controller-manager', 'system:kube-scheduler'] || " +
		"request.userInfo.username.startsWith('system:serviceaccount:kube-system:') || " +
		"(has(request.userInfo.groups) && request.userInfo.groups.exists(g, g in ['system:nodes']))"
	activeComponents = "request.userInfo.username in ['system:kube-controller-manager', 'system:kube-scheduler', 'system:serviceaccount:" + namespace + ":" + fullname + "'] || " +
		"request.userInfo.username.startsWith('system:serviceaccount:kube-system:') || " +
		"(has(request.userInfo.groups) && request.userInfo.groups.exists(g, g in ['system:nodes']))"
)

// vals builds a values map from dotted keys and values.
func vals(kv ...any) map[string]any {
	out := map[string]any{}
	for i := 0; i < len(kv); i += 2 {
		keys := strings.Split(kv[i].(string), ".")
		m := out
		for _, k := range keys[:len(keys)-1] {
			next, ok := m[k].(map[string]any)
			if !ok {
				next = map[string]any{}
				m[k] = next
			}
			m = next
		}
		m[keys[len(keys)-1]] = kv[i+1]
	}
	return out
}

// TestLint runs Helm's chart linter on charts/pvguard as `helm lint --strict` does: warnings
// fail too.
func TestLint(t *testing.T) {
	for name, c := range chartCases() {
		t.Run(name, func(t *testing.T) {
			linter := lint.RunAll("pvguard", c.values, namespace)
			for _, msg := range linter.Messages {
				if msg.Severity >= support.WarningSev {
					t.Errorf("helm lint --strict: %s", msg)
				}
			}
		})
	}
}

// TestRender renders every case and checks each object strictly against its Go type, then the
// properties the chart promises.
func TestRender(t *testing.T) {
	for name, c := range chartCases() {
		t.Run(name, func(t *testing.T) {
			manifests, err := charts.Render(release, namespace, c.values)
			if err != nil {
				t.Fatal(err)
			}
			r := decodeAll(t, manifests)
			checkNamespacesAndNames(t, manifests)
			checkDeployment(t, c, r)
			checkPDB(t, c, r)
			checkService(t, c, r)
			checkRBAC(t, c, r)
			checkWebhooks(t, c, r)
			checkCertificates(t, c, r)
			checkPolicyConfig(t, c, r)
			checkServiceMonitor(t, c, r)
			checkNetworkPolicy(t, c, r)
		})
	}
}

// rendered holds the typed objects of one render, by kind.
type rendered struct {
	objects map[string][]runtime.Object // kind -> objects
	raw     map[string][]*unstructured.Unstructured
}

func (r rendered) one(t *testing.T, kind string) runtime.Object {
	t.Helper()
	if n := len(r.objects[kind]); n != 1 {
		t.Fatalf("rendered %d %s objects, want 1", n, kind)
	}
	return r.objects[kind][0]
}

// decoderScheme knows the core kinds and cert-manager's.
func decoderScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := certmanagerv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// decodeAll decodes every manifest strictly (an unknown or duplicated field is an error) into
// its Go type. ServiceMonitors, whose types pvguard does not depend on, stay unstructured.
func decodeAll(t *testing.T, manifests []charts.Manifest) rendered {
	t.Helper()
	s := decoderScheme(t)
	strict := serializerjson.NewSerializerWithOptions(serializerjson.DefaultMetaFactory, s, s, serializerjson.SerializerOptions{Strict: true})
	r := rendered{objects: map[string][]runtime.Object{}, raw: map[string][]*unstructured.Unstructured{}}
	for _, m := range manifests {
		kind := m.Object.GetKind()
		r.raw[kind] = append(r.raw[kind], m.Object)
		if m.Object.GroupVersionKind().Group == "monitoring.coreos.com" {
			continue
		}
		data, err := m.Object.MarshalJSON()
		if err != nil {
			t.Fatalf("%s: %v", m.Template, err)
		}
		obj, _, err := strict.Decode(data, nil, nil)
		if err != nil {
			t.Errorf("%s: %s %s does not decode strictly: %v", m.Template, kind, m.Object.GetName(), err)
			continue
		}
		r.objects[kind] = append(r.objects[kind], obj)
	}
	return r
}

// TestStrictDecoderRejectsUnknownFields makes sure the decoder TestRender relies on is strict.
func TestStrictDecoderRejectsUnknownFields(t *testing.T) {
	s := decoderScheme(t)
	strict := serializerjson.NewSerializerWithOptions(serializerjson.DefaultMetaFactory, s, s, serializerjson.SerializerOptions{Strict: true})
	for name, doc := range map[string]string{
		"core":         `{"apiVersion":"v1","kind":"Service","metadata":{"name":"x"},"spec":{"selectr":{}}}`,
		"cert-manager": `{"apiVersion":"cert-manager.io/v1","kind":"Certificate","metadata":{"name":"x"},"spec":{"secretNam":"x"}}`,
	} {
		if _, _, err := strict.Decode([]byte(doc), nil, nil); err == nil {
			t.Errorf("%s: a misspelt field decoded without error", name)
		}
	}
}

func checkNamespacesAndNames(t *testing.T, manifests []charts.Manifest) {
	t.Helper()
	clusterScoped := map[string]bool{"ClusterRole": true, "ClusterRoleBinding": true, "ValidatingWebhookConfiguration": true, "MutatingWebhookConfiguration": true,
		"ValidatingAdmissionPolicy": true, "ValidatingAdmissionPolicyBinding": true}
	seen := map[string]string{}
	for _, m := range manifests {
		o := m.Object
		key := o.GetKind() + "/" + o.GetName()
		if prev, ok := seen[key]; ok {
			t.Errorf("%s rendered twice (%s and %s)", key, prev, m.Template)
		}
		seen[key] = m.Template
		switch {
		case clusterScoped[o.GetKind()] && o.GetNamespace() != "":
			t.Errorf("%s: cluster-scoped %s has namespace %q", m.Template, key, o.GetNamespace())
		case !clusterScoped[o.GetKind()] && o.GetNamespace() != namespace:
			t.Errorf("%s: %s is in namespace %q, want the release namespace %q", m.Template, key, o.GetNamespace(), namespace)
		}
		if o.GetLabels()["app.kubernetes.io/instance"] != release {
			t.Errorf("%s: %s lacks the app.kubernetes.io/instance label", m.Template, key)
		}
	}
}

func container(t *testing.T, d *appsv1.Deployment) corev1.Container {
	t.Helper()
	if len(d.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("Deployment has %d containers, want 1", len(d.Spec.Template.Spec.Containers))
	}
	return d.Spec.Template.Spec.Containers[0]
}

// argValues maps each --flag=value argument to its value.
func argValues(args []string) map[string]string {
	out := map[string]string{}
	for _, a := range args {
		k, v, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		out[k] = v
	}
	return out
}

func checkDeployment(t *testing.T, c chartCase, r rendered) {
	t.Helper()
	d := r.one(t, "Deployment").(*appsv1.Deployment)
	pod := d.Spec.Template.Spec
	ctr := container(t, d)

	if got := ptrVal(d.Spec.Replicas); int(got) != c.replicas {
		t.Errorf("replicas = %d, want %d", got, c.replicas)
	}
	if ctr.Image != "ghcr.io/pvguard/pvguard:0.1.0" {
		t.Errorf("image = %s, want the repository at the chart's appVersion", ctr.Image)
	}
	if len(ctr.Args) == 0 || ctr.Args[0] != "serve" {
		t.Fatalf("args = %v, want serve first", ctr.Args)
	}
	// Every argument is a real flag of `pvguard serve`.
	serve, _, err := cli.NewRootCommand().Find([]string{"serve"})
	if err != nil {
		t.Fatal(err)
	}
	if err := serve.ParseFlags(ctr.Args[1:]); err != nil {
		t.Errorf("pvguard serve does not accept the chart's args %v: %v", ctr.Args[1:], err)
	}
	args := argValues(ctr.Args[1:])
	want := map[string]string{
		"listen":                           ":9443",
		"config":                           "/etc/pvguard/policy.yaml",
		"binder":                           c.binder,
		"no-volume-fits-after":             c.noVolumeFits,
		"leader-elect":                     "true",
		"leader-election-namespace":        namespace,
		"leader-election-id":               fullname + "-leader",
		"kube-api-qps":                     "50",
		"kube-api-burst":                   "100",
		"live-read-qps":                    "50",
		"live-read-burst":                  "100",
		"audit-qps":                        "20",
		"access-qps":                       "20",
		"leader-election-qps":              "5",
		"review-concurrency":               "32",
		"review-concurrency-per-requester": "16",
		"review-queue-length":              "50",
		"review-max-waiting":               "500",
		"review-max-waiting-bytes":         "268435456",
		"live-read-budget":                 "250ms",
		"live-rereads-per-requester":       "10",
		"admission-read-rights":            "auto",
		"shutdown-timeout":                 "25s",
		"shutdown-delay":                   "5s",
		"gc-percent":                       "30",
	}
	for k, v := range want {
		if args[k] != v {
			t.Errorf("--%s=%q, want %q", k, args[k], v)
		}
	}
	if interval, err := time.ParseDuration(args["audit-interval"]); err != nil || (interval == 0) != c.auditOff {
		t.Errorf("--audit-interval=%q, want the audit off=%v", args["audit-interval"], c.auditOff)
	}
	selfManaged := map[string]string{
		"cert-secret": fullname + "-tls", "service-name": fullname, "webhook-configuration-name": fullname,
	}
	if got, ok := args["namespace"]; (!c.certManager || !c.policiesOff) != ok || ok && got != namespace {
		t.Errorf("--namespace=%q (set: %v), want the release namespace exactly with self-managed certificates or the admission policies' parameters", got, ok)
	}
	if got, ok := args["admission-policy-params"]; c.policiesOff == ok || ok && got != fullname+"-admission-policy-params" {
		t.Errorf("--admission-policy-params=%q (set: %v), want the parameter object exactly with the admission policies", got, ok)
	}
	for k, v := range selfManaged {
		switch got, ok := args[k]; {
		case c.certManager && ok:
			t.Errorf("cert-manager mode passes --%s", k)
		case !c.certManager && got != v:
			t.Errorf("self-managed certificates: --%s=%q, want %q", k, got, v)
		}
	}
	if got, ok := args["cert-dir"]; c.certManager != ok || (ok && got != "/certs") {
		t.Errorf("--cert-dir=%q (set: %v), want /certs exactly with cert-manager", got, ok)
	}
	if got, ok := args["metrics-listen"]; (c.plainPort != 0) != ok || (ok && got != fmt.Sprintf(":%d", c.plainPort)) {
		t.Errorf("--metrics-listen=%q (set: %v), want it exactly when metrics.plainPort is set", got, ok)
	}
	if got, ok := args["client-ca-file"]; (c.clientCA != "") != ok || (ok && got != "/client-ca/ca.crt") {
		t.Errorf("--client-ca-file=%q (set: %v), want it exactly when tls.clientCA.configMap is set", got, ok)
	}

	// Shutdown: the kubelet waits longer than pvguard's delay and drain together.
	delay, _ := time.ParseDuration(args["shutdown-delay"])
	timeout, _ := time.ParseDuration(args["shutdown-timeout"])
	if grace := time.Duration(ptrVal(pod.TerminationGracePeriodSeconds)) * time.Second; grace <= delay+timeout {
		t.Errorf("terminationGracePeriodSeconds %v is not longer than --shutdown-delay %v + --shutdown-timeout %v", grace, delay, timeout)
	}

	// Security: non-root, read-only root filesystem, no privilege, no capabilities.
	psc := pod.SecurityContext
	if psc == nil || !ptrVal(psc.RunAsNonRoot) || ptrVal(psc.RunAsUser) != 65532 || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext = %+v, want runAsNonRoot, runAsUser 65532, seccomp RuntimeDefault", psc)
	}
	sc := ctr.SecurityContext
	switch {
	case sc == nil:
		t.Fatal("the container has no securityContext")
	case !ptrVal(sc.RunAsNonRoot) || ptrVal(sc.RunAsUser) != 65532:
		t.Errorf("container runs as %v (runAsNonRoot %v), want 65532 non-root", ptrVal(sc.RunAsUser), ptrVal(sc.RunAsNonRoot))
	case !ptrVal(sc.ReadOnlyRootFilesystem):
		t.Error("container root filesystem is writable")
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Error("container allows privilege escalation")
	case sc.Privileged != nil && *sc.Privileged:
		t.Error("container is privileged")
	case sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0:
		t.Errorf("capabilities = %+v, want drop [ALL] and nothing added", sc.Capabilities)
	case sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
		t.Error("container seccompProfile is not RuntimeDefault")
	}

	// Port, probes, env.
	if len(ctr.Ports) == 0 || ctr.Ports[0].Name != "https" || ctr.Ports[0].ContainerPort != 9443 {
		t.Errorf("ports = %+v, want https 9443 first", ctr.Ports)
	}
	for name, p := range map[string]*corev1.Probe{"/readyz": ctr.ReadinessProbe, "/healthz": ctr.LivenessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != name || p.HTTPGet.Scheme != corev1.URISchemeHTTPS || p.HTTPGet.Port != intstr.FromString("https") {
			t.Errorf("probe %s = %+v, want an HTTPS GET on port https", name, p)
		}
	}
	if !slices.ContainsFunc(ctr.Env, func(e corev1.EnvVar) bool {
		return e.Name == "POD_NAMESPACE" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace"
	}) {
		t.Error("POD_NAMESPACE is not set from the downward API")
	}
	if ctr.Resources.Requests.Cpu().IsZero() || ctr.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources = %+v, want CPU requests and a memory limit", ctr.Resources)
	}

	// Volumes: the policy ConfigMap as a directory (hot reload), /tmp, the cert-manager Secret,
	// the client CA.
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range ctr.VolumeMounts {
		mounts[m.MountPath] = m
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = v
	}
	if m, ok := mounts["/etc/pvguard"]; !ok || m.SubPath != "" || volumes[m.Name].ConfigMap == nil || volumes[m.Name].ConfigMap.Name != fullname+"-policy" {
		t.Errorf("the policy ConfigMap is not mounted as the directory /etc/pvguard: %+v", m)
	}
	if m, ok := mounts["/tmp"]; !ok || volumes[m.Name].EmptyDir == nil {
		t.Error("/tmp is not an emptyDir")
	}
	if m, ok := mounts["/certs"]; c.certManager != ok || (ok && (volumes[m.Name].Secret == nil || volumes[m.Name].Secret.SecretName != fullname+"-tls")) {
		t.Errorf("/certs mounted: %v, want the Secret %s-tls exactly with cert-manager", ok, fullname)
	}
	if m, ok := mounts["/client-ca"]; (c.clientCA != "") != ok || (ok && (volumes[m.Name].ConfigMap == nil || volumes[m.Name].ConfigMap.Name != c.clientCA)) {
		t.Errorf("/client-ca mounted: %v, want ConfigMap %q exactly when tls.clientCA.configMap is set", ok, c.clientCA)
	}

	// Replicas are spread over nodes (preferably, by default).
	var terms []corev1.PodAffinityTerm
	if aff := pod.Affinity; aff != nil && aff.PodAntiAffinity != nil {
		for _, w := range aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			terms = append(terms, w.PodAffinityTerm)
		}
		terms = append(terms, aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution...)
	}
	switch {
	case c.antiAffinity == "none" && pod.Affinity != nil:
		t.Errorf("podAntiAffinity none, yet affinity = %+v", pod.Affinity)
	case c.antiAffinity == "none":
	case len(terms) != 1 || terms[0].TopologyKey != "kubernetes.io/hostname" || !selects(terms[0].LabelSelector, d.Spec.Template.Labels):
		t.Errorf("anti-affinity terms = %+v, want one by hostname over pvguard's pods", terms)
	case (len(pod.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) == 1) != (c.antiAffinity == "required"):
		t.Errorf("anti-affinity = %+v, want %s", pod.Affinity.PodAntiAffinity, c.antiAffinity)
	}
	if !selects(d.Spec.Selector, d.Spec.Template.Labels) {
		t.Error("the Deployment's selector does not select its pods")
	}
	if sa := pod.ServiceAccountName; sa != fullname {
		t.Errorf("serviceAccountName = %q, want %q", sa, fullname)
	}
}

func selects(sel *metav1.LabelSelector, labels map[string]string) bool {
	if sel == nil || len(sel.MatchLabels) == 0 {
		return false
	}
	for k, v := range sel.MatchLabels {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func checkPDB(t *testing.T, c chartCase, r rendered) {
	t.Helper()
	pdbs := r.objects["PodDisruptionBudget"]
	if (len(pdbs) == 1) != (c.replicas > 1) || len(pdbs) > 1 {
		t.Fatalf("%d PodDisruptionBudgets for %d replicas, want one exactly when replicas > 1", len(pdbs), c.replicas)
	}
	if len(pdbs) == 0 {
		return
	}
	pdb := pdbs[0].(*policyv1.PodDisruptionBudget)
	d := r.one(t, "Deployment").(*appsv1.Deployment)
	if pdb.Spec.MinAvailable == nil || *pdb.Spec.MinAvailable != intstr.FromInt32(1) || !selects(pdb.Spec.Selector, d.Spec.Template.Labels) {
		t.Errorf("PodDisruptionBudget spec = %+v, want minAvailable 1 over pvguard's pods", pdb.Spec)
	}
}

func checkService(t *testing.T, c chartCase, r rendered) {
	t.Helper()
	svc := r.one(t, "Service").(*corev1.Service)
	d := r.one(t, "Deployment").(*appsv1.Deployment)
	if svc.Name != fullname || svc.Spec.Type != corev1.ServiceTypeClusterIP {
		t.Errorf("Service %s of type %s, want ClusterIP %s", svc.Name, svc.Spec.Type, fullname)
	}
	if !selects(&metav1.LabelSelector{MatchLabels: svc.Spec.Selector}, d.Spec.Template.Labels) {
		t.Error("the Service does not select pvguard's pods")
	}
	ports := map[string]corev1.ServicePort{}
	for _, p := range svc.Spec.Ports {
		ports[p.Name] = p
	}
	if p := ports["https"]; p.Port != 443 || p.TargetPort != intstr.FromString("https") {
		t.Errorf("Service port https = %+v, want 443 -> https", p)
	}
	if p, ok := ports["metrics"]; (c.plainPort != 0) != ok || (ok && int(p.Port) != c.plainPort) {
		t.Errorf("Service port metrics = %+v (present %v), want it exactly when metrics.plainPort is set", p, ok)
	}
}

// perm is one permission: a verb on a resource, cluster-wide (scope "") or in a namespace,
// optionally on one named object.
type perm struct{ scope, group, resource, verb, name string }

func (p perm) String() string {
	s := fmt.Sprintf("%s %s/%s", p.verb, p.group, p.resource)
	if p.name != "" {
		s += " named " + p.name
	}
	if p.scope != "" {
		s += " in " + p.scope
	}
	return s
}

// permissions expands the rules of the bound roles into single permissions, checking that
// every binding binds pvguard's ServiceAccount to a rendered role.
func permissions(t *testing.T, r rendered) map[perm]bool {
	t.Helper()
	clusterRoles := map[string]*rbacv1.ClusterRole{}
	for _, o := range r.objects["ClusterRole"] {
		clusterRoles[o.(*rbacv1.ClusterRole).Name] = o.(*rbacv1.ClusterRole)
	}
	roles := map[string]*rbacv1.Role{}
	for _, o := range r.objects["Role"] {
		roles[o.(*rbacv1.Role).Name] = o.(*rbacv1.Role)
	}
	wantSubjects := []rbacv1.Subject{{Kind: "ServiceAccount", Name: fullname, Namespace: namespace}}
	out := map[perm]bool{}
	add := func(scope string, rules []rbacv1.PolicyRule, what string) {
		for _, rule := range rules {
			if len(rule.NonResourceURLs) > 0 {
				t.Errorf("%s grants non-resource URLs %v", what, rule.NonResourceURLs)
			}
			for _, list := range [][]string{rule.APIGroups, rule.Resources, rule.Verbs, rule.ResourceNames} {
				if slices.ContainsFunc(list, func(s string) bool { return strings.Contains(s, "*") }) {
					t.Errorf("%s has a wildcard: %+v", what, rule)
				}
			}
			names := rule.ResourceNames
			if len(names) == 0 {
				names = []string{""}
			}
			for _, g := range rule.APIGroups {
				for _, res := range rule.Resources {
					for _, v := range rule.Verbs {
						for _, n := range names {
							out[perm{scope, g, res, v, n}] = true
						}
					}
				}
			}
		}
	}
	for _, o := range r.objects["ClusterRoleBinding"] {
		b := o.(*rbacv1.ClusterRoleBinding)
		cr, ok := clusterRoles[b.RoleRef.Name]
		if b.RoleRef.Kind != "ClusterRole" || !ok {
			t.Fatalf("ClusterRoleBinding %s binds %s %s, which the chart does not render", b.Name, b.RoleRef.Kind, b.RoleRef.Name)
		}
		if !equality.Semantic.DeepEqual(b.Subjects, wantSubjects) {
			t.Errorf("ClusterRoleBinding %s subjects = %+v, want pvguard's ServiceAccount", b.Name, b.Subjects)
		}
		add("", cr.Rules, "ClusterRole "+cr.Name)
	}
	for _, o := range r.objects["RoleBinding"] {
		b := o.(*rbacv1.RoleBinding)
		role, ok := roles[b.RoleRef.Name]
		if b.RoleRef.Kind != "Role" || !ok {
			t.Fatalf("RoleBinding %s binds %s %s, which the chart does not render", b.Name, b.RoleRef.Kind, b.RoleRef.Name)
		}
		if !equality.Semantic.DeepEqual(b.Subjects, wantSubjects) {
			t.Errorf("RoleBinding %s subjects = %+v, want pvguard's ServiceAccount", b.Name, b.Subjects)
		}
		add(role.Namespace, role.Rules, "Role "+role.Name)
	}
	if len(r.objects["ClusterRole"]) != len(r.objects["ClusterRoleBinding"]) || len(r.objects["Role"]) != len(r.objects["RoleBinding"]) {
		t.Error("a rendered role is not bound")
	}
	return out
}

// wantPermissions is exactly what the code paths each case runs call (see the comments in
// templates/rbac.yaml): nothing more.
func wantPermissions(c chartCase) map[perm]bool {
	out := map[perm]bool{}
	grant := func(scope, group string, resources, verbs []string, name string) {
		for _, r := range resources {
			for _, v := range verbs {
				out[perm{scope, group, r, v, name}] = true
			}
		}
	}
	read := []string{"get", "list", "watch"}
	grant("", "", []string{"persistentvolumes", "persistentvolumeclaims", "nodes"}, read, "")
	grant("", "storage.k8s.io", []string{"storageclasses"}, []string{"list", "watch"}, "")
	grant("", "", []string{"pods"}, []string{"list", "watch"}, "")
	// clusterview.SetupIndexes: an informer for each kind of clusterstate.Readables a shipped
	// rule reads (policy.View's ListKind).
	for _, k := range policy.ReadKinds(policy.Catalogue()) {
		if r, ok := clusterstate.ReadableKind(k); ok {
			gvr, _ := apimeta.UnsafeGuessKindToResource(schema.FromAPIVersionAndKind(r.APIVersion(), string(r.Kind)))
			grant("", gvr.Group, []string{gvr.Resource}, []string{"list", "watch"}, "")
		}
	}
	if c.binder != "off" {
		grant("", "authentication.k8s.io", []string{"selfsubjectreviews"}, []string{"create"}, "")
		grant("", "", []string{"events"}, []string{"create", "patch"}, "")
	}
	if c.binder == "active" {
		grant("", "", []string{"persistentvolumes", "persistentvolumes/status", "persistentvolumeclaims", "persistentvolumeclaims/status"}, []string{"patch"}, "")
	}
	if !c.auditOff {
		grant("", "openreports.io", []string{"reports", "clusterreports"}, []string{"list", "watch", "create", "update", "delete"}, "")
		grant("", "coordination.k8s.io", []string{"leases"}, []string{"list"}, "")
		grant("", "authentication.k8s.io", []string{"tokenreviews"}, []string{"create"}, "")
		grant("", "authorization.k8s.io", []string{"subjectaccessreviews"}, []string{"create"}, "")
	}
	if !c.certManager {
		grant("", "admissionregistration.k8s.io", []string{"validatingwebhookconfigurations", "mutatingwebhookconfigurations"}, []string{"get", "update"}, fullname)
		grant(namespace, "", []string{"secrets"}, []string{"create"}, "")
		grant(namespace, "", []string{"secrets"}, []string{"get", "list", "watch", "update"}, fullname+"-tls")
	}
	if !c.policiesOff {
		grant(namespace, "", []string{"configmaps"}, []string{"create"}, "")
		grant(namespace, "", []string{"configmaps"}, []string{"get", "list", "watch", "update"}, fullname+"-admission-policy-params")
	}
	if c.binder != "off" || !c.auditOff || !c.certManager || !c.policiesOff {
		grant(namespace, "coordination.k8s.io", []string{"leases"}, []string{"create"}, "")
		grant(namespace, "coordination.k8s.io", []string{"leases"}, []string{"get", "update"}, fullname+"-leader")
		grant(namespace, "", []string{"events"}, []string{"create", "patch"}, "")
	}
	return out
}

func checkRBAC(t *testing.T, c chartCase, r rendered) {
	t.Helper()
	got := permissions(t, r)

	// The properties that matter most, stated on their own.
	storageWrites := 0
	for p := range got {
		switch {
		case p.group == "" && strings.HasPrefix(p.resource, "persistentvolume") && !slices.Contains([]string{"get", "list", "watch"}, p.verb):
			storageWrites++
			if c.binder != "active" {
				t.Errorf("binder %s may %s", c.binder, p)
			}
		case p.group == "" && p.resource == "secrets":
			if p.scope != namespace {
				t.Errorf("Secrets are reachable outside the release namespace: %s", p)
			}
			if c.certManager {
				t.Errorf("with cert-manager pvguard needs no Secret access, but may %s", p)
			}
			if p.verb != "create" && p.name != fullname+"-tls" {
				t.Errorf("Secret access not restricted to %s-tls: %s", fullname, p)
			}
		}
	}
	if c.binder == "active" && storageWrites != 4 {
		t.Errorf("binder active has %d write permissions on volumes and claims, want exactly update on the 4 resources it writes", storageWrites)
	}

	// And the exact set.
	want := wantPermissions(c)
	for _, p := range sortedPerms(got) {
		if !want[p] {
			t.Errorf("RBAC grants %s, which no code path of this mode uses", p)
		}
	}
	for _, p := range sortedPerms(want) {
		if !got[p] {
			t.Errorf("RBAC lacks %s, which this mode needs", p)
		}
	}
}

func sortedPerms(m map[perm]bool) []perm {
	return slices.SortedFunc(maps.Keys(m), func(a, b perm) int { return strings.Compare(a.String(), b.String()) })
}

// wantWebhooks is the chart's contract with the apiserver: each of pvguard's declared admission
// endpoints (webhook.Registrations) as two webhooks, for people and for components, with the
// values' failure policies, selectors and conditions.
func wantWebhooks(c chartCase) (*admissionregistrationv1.ValidatingWebhookConfiguration, *admissionregistrationv1.MutatingWebhookConfiguration) {
	client := func(urlPath string) admissionregistrationv1.WebhookClientConfig {
		return admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{
			Namespace: namespace, Name: fullname, Path: new(urlPath), Port: new(int32(443)),
		}}
	}
	claims := &metav1.LabelSelector{MatchExpressions: append([]metav1.LabelSelectorRequirement{{
		Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{namespace},
	}}, c.claimSelector...)}
	var meta metav1.ObjectMeta
	meta.Name = fullname
	if c.certManager {
		meta.Annotations = map[string]string{"cert-manager.io/inject-ca-from": namespace + "/" + fullname + "-serving"}
	}
	// Each webhook is there twice: for people (failurePolicy) and for the cluster's components
	// (componentsFailurePolicy), told apart by the requester.
	component := c.component
	validating := func(name, urlPath string, r []admissionregistrationv1.RuleWithOperations, sel *metav1.LabelSelector, mc []admissionregistrationv1.MatchCondition) admissionregistrationv1.ValidatingWebhook {
		policy, who := c.failurePolicy, admissionregistrationv1.MatchCondition{Name: "not-a-component", Expression: "!(" + component + ")"}
		if strings.HasSuffix(name, "-components.pvguard.io") {
			policy, who = c.componentsFailurePolicy, admissionregistrationv1.MatchCondition{Name: "a-component", Expression: component}
		}
		return admissionregistrationv1.ValidatingWebhook{
			Name: name, ClientConfig: client(urlPath), Rules: r, NamespaceSelector: sel, MatchConditions: append([]admissionregistrationv1.MatchCondition{who}, mc...),
			FailurePolicy: new(policy), MatchPolicy: new(admissionregistrationv1.Equivalent),
			SideEffects: new(admissionregistrationv1.SideEffectClassNone), TimeoutSeconds: new(c.timeoutSeconds),
			AdmissionReviewVersions: []string{"v1"},
		}
	}
	mutating := func(name, urlPath string, r []admissionregistrationv1.RuleWithOperations, sel *metav1.LabelSelector, mc []admissionregistrationv1.MatchCondition) admissionregistrationv1.MutatingWebhook {
		v := validating(name, urlPath, r, sel, mc)
		return admissionregistrationv1.MutatingWebhook{
			Name: v.Name, ClientConfig: v.ClientConfig, Rules: v.Rules, NamespaceSelector: v.NamespaceSelector, MatchConditions: v.MatchConditions,
			FailurePolicy: v.FailurePolicy, MatchPolicy: v.MatchPolicy, SideEffects: v.SideEffects, TimeoutSeconds: v.TimeoutSeconds,
			AdmissionReviewVersions: v.AdmissionReviewVersions, ReinvocationPolicy: new(admissionregistrationv1.NeverReinvocationPolicy),
		}
	}
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingWebhookConfiguration"},
		ObjectMeta: meta,
	}
	m := &admissionregistrationv1.MutatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "MutatingWebhookConfiguration"},
		ObjectMeta: meta,
	}
	// What each webhook is sent is declared once, in Go (webhook.Registrations, for the rules as
	// they are now, not as the chart's generated file has them); the chart adds the requester's
	// condition, the claims' namespace selector and the installer's conditions on volumes.
	for _, r := range webhook.Registrations(policy.Catalogue()) {
		var sel *metav1.LabelSelector
		var mc []admissionregistrationv1.MatchCondition
		if r.Claims {
			sel = claims
		}
		if r.Volumes {
			mc = append(mc, c.matchConditions...)
		}
		mc = append(mc, r.MatchConditions...)
		for _, name := range []string{r.Name + ".pvguard.io", r.Name + "-components.pvguard.io"} {
			if r.Mutating {
				m.Webhooks = append(m.Webhooks, mutating(name, r.Path, r.Rules, sel, mc))
			} else {
				v.Webhooks = append(v.Webhooks, validating(name, r.Path, r.Rules, sel, mc))
			}
		}
	}
	return v, m
}

func checkWebhooks(t *testing.T, c chartCase, r rendered) {
	t.Helper()
	gotV := r.one(t, "ValidatingWebhookConfiguration").(*admissionregistrationv1.ValidatingWebhookConfiguration)
	gotM := r.one(t, "MutatingWebhookConfiguration").(*admissionregistrationv1.MutatingWebhookConfiguration)
	wantV, wantM := wantWebhooks(c)
	// Labels are the chart's business; everything the apiserver acts on is compared.
	gotV, gotM = gotV.DeepCopy(), gotM.DeepCopy()
	gotV.Labels, gotM.Labels = nil, nil
	if !equality.Semantic.DeepEqual(gotV, wantV) {
		t.Errorf("ValidatingWebhookConfiguration:\n got %s\nwant %s", toJSON(gotV), toJSON(wantV))
	}
	if !equality.Semantic.DeepEqual(gotM, wantM) {
		t.Errorf("MutatingWebhookConfiguration:\n got %s\nwant %s", toJSON(gotM), toJSON(wantM))
	}
	for _, wh := range gotV.Webhooks {
		if len(wh.ClientConfig.CABundle) != 0 {
			t.Errorf("webhook %s has a caBundle in the chart; cert-manager or pvguard fills it", wh.Name)
		}
	}

	// WebhookConfigurations returns the same, typed.
	v, m, err := charts.WebhookConfigurations(release, namespace, c.values)
	if err != nil {
		t.Fatal(err)
	}
	v.Labels, m.Labels = nil, nil
	if !equality.Semantic.DeepEqual(v, gotV) || !equality.Semantic.DeepEqual(m, gotM) {
		t.Error("charts.WebhookConfigurations differs from the rendered manifests")
	}
}

func checkCertificates(t *testing.T, c chartCase, r rendered) {
	t.Helper()
	issuers, certs := r.objects["Issuer"], r.objects["Certificate"]
	if !c.certManager {
		if len(issuers)+len(certs) != 0 {
			t.Errorf("self-managed certificates, yet %d Issuers and %d Certificates", len(issuers), len(certs))
		}
		return
	}
	byName := map[string]*certmanagerv1.Certificate{}
	for _, o := range certs {
		byName[o.(*certmanagerv1.Certificate).Name] = o.(*certmanagerv1.Certificate)
	}
	issuerByName := map[string]*certmanagerv1.Issuer{}
	for _, o := range issuers {
		issuerByName[o.(*certmanagerv1.Issuer).Name] = o.(*certmanagerv1.Issuer)
	}
	ca, serving := byName[fullname+"-ca"], byName[fullname+"-serving"]
	if ca == nil || serving == nil || len(certs) != 2 || len(issuers) != 2 {
		t.Fatalf("want Certificates %[1]s-ca and %[1]s-serving and two Issuers, got %d and %d", fullname, len(certs), len(issuers))
	}
	selfSigned := issuerByName[ca.Spec.IssuerRef.Name]
	if !ca.Spec.IsCA || ca.Spec.SecretName != fullname+"-ca" || selfSigned == nil || selfSigned.Spec.SelfSigned == nil {
		t.Errorf("CA Certificate = %+v, want isCA into %s-ca from a self-signed Issuer", ca.Spec, fullname)
	}
	caIssuer := issuerByName[serving.Spec.IssuerRef.Name]
	if caIssuer == nil || caIssuer.Spec.CA == nil || caIssuer.Spec.CA.SecretName != ca.Spec.SecretName {
		t.Errorf("the serving Certificate's Issuer %s is not the CA Issuer over %s", serving.Spec.IssuerRef.Name, ca.Spec.SecretName)
	}
	svc := fullname
	wantDNS := []string{svc, svc + "." + namespace, svc + "." + namespace + ".svc", svc + "." + namespace + ".svc.cluster.local"}
	if serving.Spec.SecretName != fullname+"-tls" || !slices.Equal(serving.Spec.DNSNames, wantDNS) || serving.Spec.IsCA {
		t.Errorf("serving Certificate = %+v, want secret %s-tls for %v", serving.Spec, fullname, wantDNS)
	}
}

func checkPolicyConfig(t *testing.T, c chartCase, r rendered) {
	t.Helper()
	var cm *corev1.ConfigMap
	for _, o := range r.objects["ConfigMap"] {
		if o.(*corev1.ConfigMap).Name == fullname+"-policy" {
			cm = o.(*corev1.ConfigMap)
		}
	}
	if cm == nil {
		t.Fatalf("no ConfigMap %s-policy", fullname)
	}
	cfg, err := policy.ParseConfig([]byte(cm.Data["policy.yaml"]))
	if err != nil {
		t.Fatalf("the rendered policy config does not parse: %v\n%s", err, cm.Data["policy.yaml"])
	}
	self := namespace + "/" + fullname
	if got := slices.Contains(cfg.Controllers.ServiceAccounts, self); got != (c.binder == "active") {
		t.Errorf("controllers.serviceAccounts = %v: pvguard's own (%s) listed: %v, want it exactly with binder active", cfg.Controllers.ServiceAccounts, self, got)
	}
}

func checkServiceMonitor(t *testing.T, c chartCase, r rendered) {
	t.Helper()
	sms := r.raw["ServiceMonitor"]
	if (len(sms) == 1) != c.serviceMonitor || len(sms) > 1 {
		t.Fatalf("%d ServiceMonitors, want one exactly when metrics.serviceMonitor.enabled", len(sms))
	}
	if len(sms) == 0 {
		return
	}
	sm := sms[0]
	if sm.GetAPIVersion() != "monitoring.coreos.com/v1" || sm.GetKind() != "ServiceMonitor" {
		t.Errorf("ServiceMonitor is %s %s", sm.GetAPIVersion(), sm.GetKind())
	}
	svc := r.one(t, "Service").(*corev1.Service)
	sel, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	if !selects(&metav1.LabelSelector{MatchLabels: sel}, svc.Labels) {
		t.Errorf("ServiceMonitor selector %v does not select the Service (labels %v)", sel, svc.Labels)
	}
	nsNames, _, _ := unstructured.NestedStringSlice(sm.Object, "spec", "namespaceSelector", "matchNames")
	if !slices.Equal(nsNames, []string{namespace}) {
		t.Errorf("ServiceMonitor namespaceSelector.matchNames = %v", nsNames)
	}
	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(endpoints) != 1 {
		t.Fatalf("ServiceMonitor has %d endpoints, want 1", len(endpoints))
	}
	ep := endpoints[0].(map[string]any)
	wantPort, wantScheme := "https", "https"
	if c.plainPort != 0 {
		wantPort, wantScheme = "metrics", "http"
	}
	if ep["port"] != wantPort || ep["scheme"] != wantScheme || ep["path"] != "/metrics" {
		t.Errorf("ServiceMonitor endpoint = %v, want %s://:%s/metrics", ep, wantScheme, wantPort)
	}
	if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == wantPort }) {
		t.Errorf("the Service has no port %s", wantPort)
	}
	if wantScheme == "https" {
		caName, _, _ := unstructured.NestedString(ep, "tlsConfig", "ca", "secret", "name")
		serverName, _, _ := unstructured.NestedString(ep, "tlsConfig", "serverName")
		if caName != fullname+"-tls" || serverName != fullname+"."+namespace+".svc" {
			t.Errorf("ServiceMonitor tlsConfig verifies against %q for %q", caName, serverName)
		}
	}
}

func checkNetworkPolicy(t *testing.T, c chartCase, r rendered) {
	t.Helper()
	nps := r.objects["NetworkPolicy"]
	if (len(nps) == 1) != c.networkPolicy || len(nps) > 1 {
		t.Fatalf("%d NetworkPolicies, want one exactly when networkPolicy.enabled", len(nps))
	}
	if len(nps) == 0 {
		return
	}
	np := nps[0].(*networkingv1.NetworkPolicy)
	d := r.one(t, "Deployment").(*appsv1.Deployment)
	if !selects(&np.Spec.PodSelector, d.Spec.Template.Labels) {
		t.Error("the NetworkPolicy does not select pvguard's pods")
	}
	if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
		t.Errorf("policyTypes = %v, want Ingress only (pvguard must reach the apiserver)", np.Spec.PolicyTypes)
	}
	byPort := map[string]networkingv1.NetworkPolicyIngressRule{}
	for _, rule := range np.Spec.Ingress {
		for _, p := range rule.Ports {
			byPort[p.Port.String()] = rule
		}
	}
	var from []networkingv1.NetworkPolicyPeer
	for _, cidr := range c.apiserverCIDRs {
		from = append(from, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: cidr}})
	}
	if rule, ok := byPort["https"]; !ok || !equality.Semantic.DeepEqual(rule.From, from) {
		t.Errorf("the webhook port admits %+v, want exactly networkPolicy.apiserverCIDRs %v (every source when empty)", rule.From, c.apiserverCIDRs)
	}
	if rule, ok := byPort["metrics"]; (c.plainPort != 0) != ok || (ok && (len(rule.From) != 1 || rule.From[0].NamespaceSelector == nil)) {
		t.Errorf("metrics port rule = %+v (present %v), want one from a namespaceSelector exactly when metrics.plainPort is set", rule, ok)
	}
	if len(byPort) != len(np.Spec.Ingress) {
		t.Errorf("ingress rules = %+v, want one rule per port", np.Spec.Ingress)
	}
}

// TestValuesSchema: values.schema.json refuses what the templates cannot render correctly, and
// the error names the field.
func TestValuesSchema(t *testing.T) {
	for name, tc := range map[string]struct {
		values   map[string]any
		wantErrs []string // substrings of the error; nil means the values are accepted
	}{
		"bad binder mode":           {vals("binder.mode", "sometimes"), []string{"binder", "mode"}},
		"bare off for binder mode":  {vals("binder.mode", false), []string{"binder", "mode"}},
		"unknown top-level key":     {vals("replicaCount", 3), []string{"replicaCount"}},
		"unknown nested key":        {vals("webhook.failurePolicyy", "Fail"), []string{"failurePolicyy"}},
		"bad failure policy":        {vals("webhook.failurePolicy", "Retry"), []string{"failurePolicy"}},
		"bad audit interval":        {vals("audit.interval", "1 minute"), []string{"audit", "interval"}},
		"bad NoVolumeFits delay":    {vals("binder.noVolumeFitsAfter", "soon"), []string{"binder", "noVolumeFitsAfter"}},
		"zero replicas":             {vals("replicas", 0), []string{"replicas"}},
		"match condition sans expr": {vals("webhook.matchConditions", []any{map[string]any{"name": "x"}}), []string{"matchConditions"}},
		"unknown policy key":        {vals("policy.rulez", map[string]any{}), []string{"rulez"}},
		"unknown policy action":     {vals("policy.rules", map[string]any{"PVG010": map[string]any{"action": "block"}}), []string{"action"}},
		"bare off policy action":    {vals("policy.rules", map[string]any{"PVG007": map[string]any{"action": false}}), nil},
		"a full policy": {vals("policy", map[string]any{
			"rules":       map[string]any{"volume-grab": map[string]any{"action": "deny", "exemptions": map[string]any{"namespaces": []any{"platform-*"}}}},
			"exemptions":  map[string]any{"namespaces": []any{"kube-system"}, "users": []any{"break-glass-admin"}},
			"controllers": map[string]any{"serviceAccounts": []any{"csi/csi-provisioner"}},
			"mutation":    map[string]any{"alignPreboundClaimClass": true},
		}), nil},
		"bad alert window":                         {vals("metrics.prometheusRule.alerts.failOpen.window", "ten minutes"), []string{"failOpen", "window"}},
		"unknown alert":                            {vals("metrics.prometheusRule.alerts.diskFull", map[string]any{}), []string{"diskFull"}},
		"latency past the timeout":                 {vals("metrics.prometheusRule.alerts.latency.timeoutFraction", 1.5), []string{"timeoutFraction"}},
		"bad dashboard label name":                 {vals("metrics.grafanaDashboard.labelName", "grafana dashboard"), []string{"labelName"}},
		"monitoring values":                        {vals("metrics.prometheusRule.alerts.certificateExpiry.days", 30, "metrics.grafanaDashboard.labelValue", "pvguard"), nil},
		"audit interval integer 0":                 {vals("audit.interval", 0), nil},
		"binder mode shadow":                       {vals("binder.mode", "shadow"), nil},
		"apiserver CIDR without its prefix length": {vals("networkPolicy.apiserverCIDRs", []any{"10.0.0.1"}), []string{"apiserverCIDRs"}},
		"component of two kinds":                   {vals("webhook.components.identities", []any{map[string]any{"user": "a", "group": "b"}}), []string{"identities"}},
		"component ServiceAccount without its namespace": {
			vals("webhook.components.identities", []any{map[string]any{"serviceAccount": "velero"}}), []string{"serviceAccount"},
		},
		"component namespace pattern inside": {vals("webhook.components.identities", []any{map[string]any{"namespace": "team-*-csi"}}), []string{"namespace"}},
		"unknown component kind":             {vals("webhook.components.identities", []any{map[string]any{"namespaces": "csi"}}), []string{"namespaces"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := charts.Render(release, namespace, tc.values)
			switch {
			case tc.wantErrs == nil && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.wantErrs != nil && err == nil:
				t.Fatal("accepted")
			}
			for _, s := range tc.wantErrs {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error does not name %q: %v", s, err)
				}
			}
		})
	}
}

// TestChartRefusesComponentsMatchingEveryServiceAccount: a components list that makes every
// ServiceAccount a component (so any tenant's writes fail open) is refused, naming the value
// that accepts it; with that value it renders.
func TestChartRefusesComponentsMatchingEveryServiceAccount(t *testing.T) {
	for name, identity := range map[string]map[string]any{
		"every namespace":              {"namespace": "*"},
		"group system:serviceaccounts": {"group": "system:serviceaccounts"},
		"group system:authenticated":   {"group": "system:authenticated"},
	} {
		t.Run(name, func(t *testing.T) {
			identities := []any{map[string]any{"user": "system:kube-scheduler"}, identity}
			_, err := charts.Render(release, namespace, vals("webhook.components.identities", identities))
			if err == nil || !strings.Contains(err.Error(), "matches every ServiceAccount") || !strings.Contains(err.Error(), "webhook.components.allowAllServiceAccounts") {
				t.Fatalf("err = %v, want a refusal naming webhook.components.allowAllServiceAccounts", err)
			}
			v, _, err := charts.WebhookConfigurations(release, namespace, vals("webhook.components.identities", identities, "webhook.components.allowAllServiceAccounts", true))
			if err != nil {
				t.Fatalf("with allowAllServiceAccounts: %v", err)
			}
			if got := v.Webhooks[1].MatchConditions[0]; got.Name != "a-component" || !strings.Contains(got.Expression, "system:kube-scheduler") {
				t.Errorf("with allowAllServiceAccounts, the components' condition is %+v", got)
			}
		})
	}
	// A listed namespace, however broad its prefix, is not every namespace.
	if _, err := charts.Render(release, namespace, vals("webhook.components.identities", []any{map[string]any{"namespace": "k*"}})); err != nil {
		t.Errorf("a namespace prefix: %v", err)
	}
}

// renderTemplates renders the on-disk chart with Helm's engine directly, optionally in strict
// mode (a reference to a value that does not exist is an error), NOTES.txt included.
func renderTemplates(t *testing.T, values map[string]any, strict bool) map[string]string {
	t.Helper()
	ch, err := loader.Load("pvguard")
	if err != nil {
		t.Fatal(err)
	}
	top, err := chartutil.ToRenderValues(ch, values, common.ReleaseOptions{Name: release, Namespace: namespace, IsInstall: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := engine.Engine{Strict: strict}.RenderWithContext(t.Context(), ch, top)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestTemplatesReferenceOnlyDefinedValues renders every case in strict mode, so a misspelt
// value reference fails instead of rendering as empty.
func TestTemplatesReferenceOnlyDefinedValues(t *testing.T) {
	for name, c := range chartCases() {
		t.Run(name, func(t *testing.T) {
			renderTemplates(t, c.values, true)
		})
	}
}

// TestNotes: NOTES.txt shows how to check the install, and warns loudly about the upstream
// binder in active mode only.
func TestNotes(t *testing.T) {
	for _, mode := range []string{"off", "shadow", "active"} {
		t.Run(mode, func(t *testing.T) {
			notes := renderTemplates(t, vals("binder.mode", mode), false)[path.Join("pvguard", "templates", "NOTES.txt")]
			for _, s := range []string{
				"kubectl -n " + namespace + " get pods",
				"--dry-run=server",
				"volumeMode: Block",
				"volumeName: pvguard-check-fs",
				"[PVG001 volume-mode-match]",
				"port-forward svc/" + fullname + " 9443:443",
				"/api/v1/report",
			} {
				if !strings.Contains(notes, s) {
					t.Errorf("NOTES.txt lacks %q", s)
				}
			}
			warned := strings.Contains(notes, "WARNING") && strings.Contains(notes, "--controllers=*,-persistentvolume-binder-controller")
			if warned != (mode == "active") {
				t.Errorf("binder %s: upstream binder warning shown = %v", mode, warned)
			}
		})
	}
}

func toJSON(v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(data)
}

func ptrVal[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
