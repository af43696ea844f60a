// Package e2erbac runs pvguard as the Helm chart installs it, as the chart's ServiceAccount with
// exactly the chart's RBAC, on a real kube-apiserver, in each binder mode: everything it does
// must work (no "forbidden" in its logs), and what the mode does not need must really be
// forbidden.
package e2erbac

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	openreports "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/pvguard/pvguard/charts"
	"github.com/pvguard/pvguard/internal/cli"
	"github.com/pvguard/pvguard/test/harness"
	"github.com/pvguard/pvguard/test/testobj"
)

var h *harness.Harness

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	var err error
	if h, err = harness.Start("{}\n"); err != nil {
		fmt.Fprintln(os.Stderr, "e2erbac:", err)
		return 1
	}
	defer func() { _ = h.Stop() }()
	if err := h.InstallOpenReportsCRDs(); err != nil {
		fmt.Fprintln(os.Stderr, "e2erbac:", err)
		return 1
	}
	return m.Run()
}

func adminClient(t *testing.T) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := openreports.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(h.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// logSink keeps every log line pvguard writes, to look for authorization failures.
type logSink struct {
	mu    sync.Mutex
	lines []string
}

func (s *logSink) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.lines = append(s.lines, prefix+" "+args)
	}, funcr.Options{Verbosity: 1})
}

func (s *logSink) forbidden() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, l := range s.lines {
		if strings.Contains(l, "forbidden") || strings.Contains(l, "Forbidden") {
			out = append(out, l)
		}
	}
	return out
}

// install renders the chart for a release and applies what a cluster would run (RBAC, the
// ServiceAccount, the webhook configurations): the Deployment's container args and the policy
// ConfigMap are returned to run pvguard in-process instead of in a pod.
func install(t *testing.T, c client.Client, release, ns string, values map[string]any) (args []string, policyYAML string) {
	t.Helper()
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	manifests, err := charts.Render(release, ns, values)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range manifests {
		switch m.Object.GetKind() {
		case "Deployment":
			d := &appsv1.Deployment{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m.Object.Object, d); err != nil {
				t.Fatal(err)
			}
			if args, err = charts.ContainerArgs(d.Spec.Template.Spec.Containers[0], ns); err != nil {
				t.Fatal(err)
			}
			continue
		case "ConfigMap":
			cm := &corev1.ConfigMap{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m.Object.Object, cm); err != nil {
				t.Fatal(err)
			}
			if p, ok := cm.Data["policy.yaml"]; ok {
				policyYAML = p
				continue
			}
		case "PodDisruptionBudget", "Service":
			continue
		}
		obj := m.Object
		if err := c.Create(ctx, obj); err != nil {
			t.Fatalf("creating %s %s from %s: %v", obj.GetKind(), obj.GetName(), m.Template, err)
		}
		if obj.GetNamespace() == "" {
			t.Cleanup(func() { _ = c.Delete(context.Background(), obj) })
		}
	}
	return args, policyYAML
}

// serviceAccountConfig is the admin's connection impersonating the chart's ServiceAccount: what
// the pod's token would be.
func serviceAccountConfig(ns, sa string) *rest.Config {
	cfg := rest.CopyConfig(h.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + sa,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}
	return cfg
}

// serveAsChart runs `pvguard serve` with the chart's arguments, as the chart's ServiceAccount.
func serveAsChart(t *testing.T, ns, sa string, args []string, policyYAML string, log logr.Logger) {
	t.Helper()
	dir := t.TempDir()
	policyFile := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policyFile, []byte(policyYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := serviceAccountConfig(ns, sa)
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken,
		Impersonate: cfg.Impersonate.UserName, ImpersonateGroups: cfg.Impersonate.Groups}
	kc.Contexts["x"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	kc.CurrentContext = "x"
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		t.Fatal(err)
	}
	if len(args) > 0 && args[0] == "serve" {
		args = args[1:]
	}
	o, err := cli.ParseServeArgs(args)
	if err != nil {
		t.Fatalf("the chart's container arguments: %v", err)
	}
	o.API.Kubeconfig, o.Listen, o.ConfigFile = kubeconfig, "127.0.0.1:0", policyFile
	o.ShutdownDelay, o.Binder.Resync, o.Certs.CheckInterval = 0, time.Second, time.Second
	ctrllog.SetLogger(log)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cli.Serve(ctx, o, log) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Error("pvguard serve did not stop")
		}
	})
}

// TestChartRBACPerBinderMode installs the chart in each binder mode and runs pvguard as its
// ServiceAccount: leader election, the self-managed certificate and caBundle, the audit reports
// and (active) a binding all work; writes the mode does not need are refused by the apiserver.
func TestChartRBACPerBinderMode(t *testing.T) {
	for _, mode := range []string{"off", "shadow", "active"} {
		t.Run(mode, func(t *testing.T) {
			c := adminClient(t)
			ctx := context.Background()
			release, ns := "pvguard-"+mode, "pvguard-"+mode
			args, policyYAML := install(t, c, release, ns, map[string]any{
				"binder":  map[string]any{"mode": mode},
				"audit":   map[string]any{"interval": "2s"},
				"webhook": map[string]any{"failurePolicy": "Ignore", "timeoutSeconds": 1},
			})
			sink := &logSink{}
			sa := release
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: sa}, &corev1.ServiceAccount{}); err != nil {
				t.Fatalf("the chart's ServiceAccount %s/%s: %v", ns, sa, err)
			}

			// A claim and a volume for the binder and the audit, in a class of this mode only.
			class := "rbac-" + mode
			tenant := "tenant-" + mode
			if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant}}); err != nil {
				t.Fatal(err)
			}
			pv := testobj.PV("pv-"+mode, testobj.Class(class))
			pv.Status = corev1.PersistentVolumeStatus{}
			if err := c.Create(ctx, pv); err != nil {
				t.Fatal(err)
			}
			// A volume with a credential-like CSI attribute (PVG016): a finding for the ClusterReport.
			secretive := testobj.PV("pv-secretive-"+mode, testobj.Class("none-"+mode), testobj.CSI("csi.example.com", "h-"+mode, map[string]string{"password": "canary"}))
			secretive.Status = corev1.PersistentVolumeStatus{}
			if err := c.Create(ctx, secretive); err != nil {
				t.Fatal(err)
			}
			pvc := testobj.PVC(tenant, "data", testobj.ClaimClass(class))
			pvc.UID = ""
			if err := c.Create(ctx, pvc); err != nil {
				t.Fatal(err)
			}

			serveAsChart(t, ns, sa, args, policyYAML, sink.logger())

			harness.WaitFor(t, time.Minute, "the Lease held", func(ctx context.Context) (bool, error) {
				l := &coordinationv1.Lease{}
				err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: release + "-leader"}, l)
				return err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "", err
			})
			harness.WaitFor(t, time.Minute, "the self-managed Secret and the caBundle", func(ctx context.Context) (bool, error) {
				s := &corev1.Secret{}
				if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: release + "-tls"}, s); err != nil {
					return false, err
				}
				v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
				if err := c.Get(ctx, client.ObjectKey{Name: release}, v); err != nil {
					return false, err
				}
				for _, w := range v.Webhooks {
					if !bytes.Equal(w.ClientConfig.CABundle, s.Data["ca.crt"]) {
						return false, fmt.Errorf("caBundle of %s not set", w.Name)
					}
				}
				return true, nil
			})
			harness.WaitFor(t, time.Minute, "a ClusterReport written", func(ctx context.Context) (bool, error) {
				var l openreports.ClusterReportList
				err := c.List(ctx, &l)
				return err == nil && len(l.Items) > 0, err
			})
			if mode == "active" {
				harness.WaitFor(t, time.Minute, "the claim bound by pvguard", func(ctx context.Context) (bool, error) {
					got := &corev1.PersistentVolumeClaim{}
					err := c.Get(ctx, client.ObjectKey{Namespace: tenant, Name: "data"}, got)
					return err == nil && got.Status.Phase == corev1.ClaimBound, err
				})
			} else {
				time.Sleep(3 * time.Second) // several binder resyncs
				got := &corev1.PersistentVolumeClaim{}
				if err := c.Get(ctx, client.ObjectKey{Namespace: tenant, Name: "data"}, got); err != nil || got.Spec.VolumeName != "" {
					t.Fatalf("binder %s bound a claim (%v)", mode, err)
				}
			}
			sink.mu.Lock()
			for _, l := range sink.lines {
				if strings.Contains(l, "canary") {
					t.Errorf("a CSI attribute value reached the logs: %s", l)
				}
			}
			sink.mu.Unlock()
			if f := sink.forbidden(); len(f) > 0 {
				t.Errorf("pvguard was refused something it needs:\n%s", strings.Join(f, "\n"))
			}

			// What the ServiceAccount must not be able to do.
			asSA, err := client.New(serviceAccountConfig(ns, sa), client.Options{})
			if err != nil {
				t.Fatal(err)
			}
			mustBeForbidden := func(what string, err error) {
				t.Helper()
				if !apierrors.IsForbidden(err) {
					t.Errorf("%s: got %v, want Forbidden", what, err)
				}
			}
			// What the explain pages read live (audit on, in every mode here): the Lease a waiting
			// claim's provisioner holds, listed by name across namespaces; writing one is not theirs.
			provisionerLease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "csi-example-com"}}
			if err := c.Create(ctx, provisionerLease); err != nil {
				t.Fatal(err)
			}
			var leases coordinationv1.LeaseList
			err = asSA.List(ctx, &leases, client.MatchingFields{"metadata.name": "csi-example-com"})
			if !slices.ContainsFunc(leases.Items, func(l coordinationv1.Lease) bool { return l.Namespace == tenant }) || err != nil {
				t.Errorf("listing a provisioner's Leases as the explain pages do: %d, %v", len(leases.Items), err)
			}
			mustBeForbidden("updating a provisioner's Lease", asSA.Update(ctx, provisionerLease))
			other := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "someone-elses"}, StringData: map[string]string{"k": "v"}}
			if err := c.Create(ctx, other); err != nil {
				t.Fatal(err)
			}
			mustBeForbidden("reading another Secret in its namespace", asSA.Get(ctx, client.ObjectKeyFromObject(other), &corev1.Secret{}))
			// The admission policies' parameter object is the one ConfigMap it may read and write.
			params := &corev1.ConfigMap{}
			if err := asSA.Get(ctx, client.ObjectKey{Namespace: ns, Name: release + "-admission-policy-params"}, params); err != nil {
				t.Errorf("reading the admission policies' parameter object: %v", err)
			}
			otherCM := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "someone-elses"}, Data: map[string]string{"k": "v"}}
			if err := c.Create(ctx, otherCM); err != nil {
				t.Fatal(err)
			}
			otherCM.Data["k"] = "changed"
			mustBeForbidden("updating another ConfigMap in its namespace", asSA.Update(ctx, otherCM))
			mustBeForbidden("reading the policy config's ConfigMap", asSA.Get(ctx, client.ObjectKey{Namespace: ns, Name: release + "-policy"}, &corev1.ConfigMap{}))
			mustBeForbidden("listing Secrets in kube-system", asSA.List(ctx, &corev1.SecretList{}, client.InNamespace("kube-system")))
			mustBeForbidden("deleting a volume", asSA.Delete(ctx, &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: pv.Name}}))
			mustBeForbidden("creating a pod", asSA.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "p"},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}))
			mustBeForbidden("updating another webhook configuration", asSA.Update(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
				ObjectMeta: metav1.ObjectMeta{Name: "not-pvguard", ResourceVersion: "1"}}))
			if mode != "active" {
				live := &corev1.PersistentVolume{}
				if err := c.Get(ctx, client.ObjectKey{Name: pv.Name}, live); err != nil {
					t.Fatal(err)
				}
				live.Labels = map[string]string{"touched": "yes"}
				mustBeForbidden("updating a volume with binder "+mode, asSA.Update(ctx, live))
				claim := &corev1.PersistentVolumeClaim{}
				if err := c.Get(ctx, client.ObjectKey{Namespace: tenant, Name: "data"}, claim); err != nil {
					t.Fatal(err)
				}
				claim.Status.Phase = corev1.ClaimBound
				mustBeForbidden("updating a claim's status with binder "+mode, asSA.Status().Update(ctx, claim))
			}
		})
	}
}
