package charts_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/pvguard/pvguard/charts"
)

// The dashboard and the report are served on the webhook port and list every namespace's
// volumes and claims (docs/install.md): the chart must keep them inside the cluster, and the pod
// must be locked down, whatever the values.

// renderedKinds is every kind the chart may render. A new kind fails TestChartStaysInside until
// it is added here, after checking it exposes nothing (an Ingress, a Route, a Gateway route or a
// LoadBalancer would).
var renderedKinds = []string{
	"Certificate", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "Deployment", "Issuer",
	"MutatingWebhookConfiguration", "NetworkPolicy", "PodDisruptionBudget", "PrometheusRule", "Role", "RoleBinding",
	"Service", "ServiceAccount", "ServiceMonitor", "ValidatingWebhookConfiguration",
	// Admission policies run inside the apiserver: no network, no endpoint.
	"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
}

// toggle is one value with the settings it takes in the combinations.
type toggle struct {
	key     string
	options []any
}

// toggles are the values that change which objects render or the pod template, the exposure
// surface. Their every combination is rendered; metrics.serviceMonitor.enabled (one more
// object, no pod or port) and podAntiAffinity (the pod's affinity only) are covered by the
// named cases of chartCases instead, which keeps the product at 192 renders.
var toggles = []toggle{
	{"certManager.enabled", []any{false, true}},
	{"binder.mode", []any{"off", "shadow", "active"}},
	{"audit.interval", []any{"1m", "0"}},
	{"metrics.plainPort", []any{0, 8080}},
	{"networkPolicy.enabled", []any{false, true}},
	{"replicas", []any{1, 2}},
	{"tls.clientCA.configMap", []any{"", "apiserver-client-ca"}},
}

// combinations returns the values of every combination of the toggles, by a readable name.
func combinations() map[string]map[string]any {
	out := map[string]map[string]any{"": {}}
	for _, tg := range toggles {
		next := map[string]map[string]any{}
		for name, v := range out {
			for _, opt := range tg.options {
				kv := maps.Clone(v)
				kv[tg.key] = opt
				next[strings.TrimPrefix(fmt.Sprintf("%s,%s=%v", name, tg.key, opt), ",")] = kv
			}
		}
		out = next
	}
	return out
}

// valuesOf turns dotted keys into a values map.
func valuesOf(kv map[string]any) map[string]any {
	var flat []any
	for _, k := range slices.Sorted(maps.Keys(kv)) {
		flat = append(flat, k, kv[k])
	}
	return vals(flat...)
}

// TestChartStaysInside renders every combination of the toggles (and the named cases of
// TestRender) and checks that nothing is reachable from outside the cluster and that every
// container is locked down: only the kinds in renderedKinds; only ClusterIP Services without
// node ports, external IPs or load balancer settings; no host network, PID, IPC, ports or
// paths; every container (init containers too) non-root, read-only root filesystem, no
// privilege escalation, no capabilities, RuntimeDefault seccomp; and a NetworkPolicy only when
// asked for, never opening a port beyond pvguard's two.
func TestChartStaysInside(t *testing.T) {
	cases := map[string]map[string]any{}
	for name, kv := range combinations() {
		cases[name] = valuesOf(kv)
	}
	for name, c := range chartCases() {
		cases["case "+name] = c.values
	}
	defaults := 0
	for name, values := range cases {
		if len(values) == 0 {
			defaults++
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			manifests, err := charts.Render(release, namespace, values)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range exposureProblems(decodeAll(t, manifests), values) {
				t.Error(p)
			}
		})
	}
	if len(cases) < 192 || defaults != 1 {
		t.Fatalf("%d renders (%d with the defaults): the combinations are missing", len(cases), defaults)
	}
}

// exposureProblems lists what in one render exposes pvguard or loosens its pod.
func exposureProblems(r rendered, values map[string]any) []string {
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }

	for kind := range r.raw {
		if !slices.Contains(renderedKinds, kind) {
			add("renders a %s, which is not known to expose nothing", kind)
		}
	}
	for _, o := range r.objects["Service"] {
		svc := o.(*corev1.Service)
		if svc.Spec.Type != "" && svc.Spec.Type != corev1.ServiceTypeClusterIP {
			add("Service %s has type %s", svc.Name, svc.Spec.Type)
		}
		if len(svc.Spec.ExternalIPs) > 0 || svc.Spec.LoadBalancerIP != "" || len(svc.Spec.LoadBalancerSourceRanges) > 0 || svc.Spec.ExternalName != "" || svc.Spec.ExternalTrafficPolicy != "" {
			add("Service %s reaches outside the cluster: %+v", svc.Name, svc.Spec)
		}
		for _, p := range svc.Spec.Ports {
			if p.NodePort != 0 {
				add("Service %s port %s has nodePort %d", svc.Name, p.Name, p.NodePort)
			}
		}
	}

	pods := podSpecs(r)
	if len(pods) == 0 {
		add("renders no pod at all: nothing was checked")
	}
	for name, pod := range pods {
		if pod.HostNetwork || pod.HostPID || pod.HostIPC {
			add("%s uses the host's network, PID or IPC namespace", name)
		}
		for _, v := range pod.Volumes {
			if v.HostPath != nil {
				add("%s mounts host path %s", name, v.HostPath.Path)
			}
		}
		containers := slices.Concat(pod.InitContainers, pod.Containers)
		for _, e := range pod.EphemeralContainers {
			containers = append(containers, corev1.Container(e.EphemeralContainerCommon))
		}
		for _, c := range containers {
			for _, p := range c.Ports {
				if p.HostPort != 0 || p.HostIP != "" {
					add("%s container %s binds host port %d", name, c.Name, p.HostPort)
				}
			}
			out = append(out, lockedDown(name, pod.SecurityContext, c)...)
		}
	}

	nps := r.objects["NetworkPolicy"]
	if enabled, _ := dig(values, "networkPolicy", "enabled").(bool); !enabled && len(nps) > 0 {
		add("a NetworkPolicy renders without networkPolicy.enabled")
	}
	for _, o := range nps {
		np := o.(*networkingv1.NetworkPolicy)
		if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
			add("NetworkPolicy %s does not restrict ingress: policyTypes %v", np.Name, np.Spec.PolicyTypes)
		}
		for _, rule := range np.Spec.Ingress {
			if len(rule.Ports) == 0 {
				add("NetworkPolicy %s has an ingress rule open on every port: %+v", np.Name, rule)
			}
			for _, p := range rule.Ports {
				if p.Port == nil || (p.Port.String() != "https" && p.Port.String() != "metrics") || p.EndPort != nil {
					add("NetworkPolicy %s opens port %v beyond https and metrics", np.Name, p.Port)
				}
			}
		}
	}
	return out
}

// lockedDown lists how one container (with its pod's securityContext) falls short of running
// non-root on a read-only root filesystem, without privileges, capabilities or an unconfined
// seccomp profile.
func lockedDown(pod string, psc *corev1.PodSecurityContext, c corev1.Container) []string {
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	sc := c.SecurityContext
	if sc == nil {
		return []string{fmt.Sprintf("%s container %s has no securityContext", pod, c.Name)}
	}
	var out []string
	add := func(what string) { out = append(out, fmt.Sprintf("%s container %s %s", pod, c.Name, what)) }
	nonRoot := sc.RunAsNonRoot
	if nonRoot == nil {
		nonRoot = psc.RunAsNonRoot
	}
	user := sc.RunAsUser
	if user == nil {
		user = psc.RunAsUser
	}
	seccomp := sc.SeccompProfile
	if seccomp == nil {
		seccomp = psc.SeccompProfile
	}
	if !ptrVal(nonRoot) || user == nil || *user == 0 {
		add(fmt.Sprintf("may run as root (runAsNonRoot %v, runAsUser %v)", ptrVal(nonRoot), ptrVal(user)))
	}
	if !ptrVal(sc.ReadOnlyRootFilesystem) {
		add("has a writable root filesystem")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		add("allows privilege escalation")
	}
	if ptrVal(sc.Privileged) {
		add("is privileged")
	}
	if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0 {
		add(fmt.Sprintf("keeps capabilities: %+v", sc.Capabilities))
	}
	if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
		add(fmt.Sprintf("has seccomp profile %+v, want RuntimeDefault", seccomp))
	}
	return out
}

// podSpecs returns the pod spec of every object that makes pods, by kind and name.
func podSpecs(r rendered) map[string]corev1.PodSpec {
	out := map[string]corev1.PodSpec{}
	for _, objs := range r.objects {
		for _, o := range objs {
			var name string
			var spec corev1.PodSpec
			switch o := o.(type) {
			case *appsv1.Deployment:
				name, spec = "Deployment "+o.Name, o.Spec.Template.Spec
			case *appsv1.StatefulSet:
				name, spec = "StatefulSet "+o.Name, o.Spec.Template.Spec
			case *appsv1.DaemonSet:
				name, spec = "DaemonSet "+o.Name, o.Spec.Template.Spec
			case *appsv1.ReplicaSet:
				name, spec = "ReplicaSet "+o.Name, o.Spec.Template.Spec
			case *batchv1.Job:
				name, spec = "Job "+o.Name, o.Spec.Template.Spec
			case *batchv1.CronJob:
				name, spec = "CronJob "+o.Name, o.Spec.JobTemplate.Spec.Template.Spec
			case *corev1.Pod:
				name, spec = "Pod "+o.Name, o.Spec
			default:
				continue
			}
			out[name] = spec
		}
	}
	return out
}

// dig reads a nested value of a values map.
func dig(m map[string]any, keys ...string) any {
	var v any = m
	for _, k := range keys {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[k]
	}
	return v
}

// TestChartOffersNoExposure: the values that would put the dashboard and report outside the
// cluster do not exist; values.schema.json refuses them, naming the key, so exposing pvguard
// takes an operator's own object (or a port-forward), never a chart value.
func TestChartOffersNoExposure(t *testing.T) {
	for name, tc := range map[string]struct {
		values map[string]any
		key    string
	}{
		"service type LoadBalancer": {vals("service.type", "LoadBalancer"), "service"},
		"service type NodePort":     {vals("service.type", "NodePort"), "service"},
		"an ingress":                {vals("ingress.enabled", true), "ingress"},
		"an OpenShift route":        {vals("route.enabled", true), "route"},
		"a Gateway API route":       {vals("httpRoute.enabled", true), "httpRoute"},
		"host network":              {vals("hostNetwork", true), "hostNetwork"},
		"a host port":               {vals("hostPort", 9443), "hostPort"},
		"a pod securityContext":     {vals("podSecurityContext.runAsUser", 0), "podSecurityContext"},
		"a container securityContext": {
			vals("securityContext.readOnlyRootFilesystem", false), "securityContext",
		},
		"dashboard exposure": {vals("dashboard.enabled", true), "dashboard"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := charts.Render(release, namespace, tc.values)
			if err == nil {
				t.Fatalf("the chart accepted %v", tc.values)
			}
			if !strings.Contains(err.Error(), tc.key) {
				t.Errorf("the error does not name %q: %v", tc.key, err)
			}
		})
	}
}

// TestExposureChecksCatch breaks a default render in each way exposureProblems looks for and
// expects it to be reported: the checks above can fail.
func TestExposureChecksCatch(t *testing.T) {
	for name, breakIt := range map[string]func(r *rendered){
		"NodePort Service": func(r *rendered) {
			r.objects["Service"][0].(*corev1.Service).Spec.Type = corev1.ServiceTypeNodePort
		},
		"LoadBalancer Service": func(r *rendered) {
			r.objects["Service"][0].(*corev1.Service).Spec.Type = corev1.ServiceTypeLoadBalancer
		},
		"external IP": func(r *rendered) {
			r.objects["Service"][0].(*corev1.Service).Spec.ExternalIPs = []string{"203.0.113.7"}
		},
		"an Ingress": func(r *rendered) { r.raw["Ingress"] = nil },
		"host network": func(r *rendered) {
			deployment(r).Spec.Template.Spec.HostNetwork = true
		},
		"host port": func(r *rendered) {
			deployment(r).Spec.Template.Spec.Containers[0].Ports[0].HostPort = 9443
		},
		"root user": func(r *rendered) {
			z := int64(0)
			deployment(r).Spec.Template.Spec.Containers[0].SecurityContext.RunAsUser = &z
		},
		"writable root filesystem": func(r *rendered) {
			deployment(r).Spec.Template.Spec.Containers[0].SecurityContext.ReadOnlyRootFilesystem = nil
		},
		"privilege escalation": func(r *rendered) {
			deployment(r).Spec.Template.Spec.Containers[0].SecurityContext.AllowPrivilegeEscalation = nil
		},
		"a capability added": func(r *rendered) {
			deployment(r).Spec.Template.Spec.Containers[0].SecurityContext.Capabilities.Add = []corev1.Capability{"NET_ADMIN"}
		},
		"seccomp unconfined": func(r *rendered) {
			sc := deployment(r).Spec.Template.Spec.Containers[0].SecurityContext
			sc.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}
		},
		"an init container without securityContext": func(r *rendered) {
			d := deployment(r)
			d.Spec.Template.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox"}}
		},
		"a NetworkPolicy opening every port": func(r *rendered) {
			r.objects["NetworkPolicy"] = []runtime.Object{&networkingv1.NetworkPolicy{Spec: networkingv1.NetworkPolicySpec{
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
				Ingress:     []networkingv1.NetworkPolicyIngressRule{{}},
			}}}
		},
	} {
		t.Run(name, func(t *testing.T) {
			manifests, err := charts.Render(release, namespace, nil)
			if err != nil {
				t.Fatal(err)
			}
			r := decodeAll(t, manifests)
			if p := exposureProblems(r, nil); len(p) > 0 {
				t.Fatalf("the default render already has problems: %v", p)
			}
			breakIt(&r)
			if p := exposureProblems(r, nil); len(p) == 0 {
				t.Error("not reported")
			} else {
				t.Logf("reported: %v", p)
			}
		})
	}
}

func deployment(r *rendered) *appsv1.Deployment {
	return r.objects["Deployment"][0].(*appsv1.Deployment)
}
