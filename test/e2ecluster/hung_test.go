package e2ecluster

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/certs"
	"github.com/pvguard/pvguard/internal/devcluster"
	"github.com/pvguard/pvguard/test/cluster"
	"github.com/pvguard/pvguard/test/harness"
)

// timeoutSeconds is the chart's webhook.timeoutSeconds: how long the apiserver waits for a
// webhook that does not answer.
const timeoutSeconds = 2 * time.Second

// TestHungPVGuard points pvguard's webhook configurations (as the chart renders them) at a
// listener that completes the TLS handshake, reads the review and never answers, as a pvguard
// stuck in a deadlock or starved of CPU would, and measures what each kind of write costs:
//
//   - a component's write (the deployer's, a ServiceAccount the install lists) waits out the
//     timeout once and is admitted (componentsFailurePolicy Ignore): at most timeoutSeconds plus
//     a small margin, for a claim and for a volume alike (one webhook call each: the volume
//     mutating webhook sees only volumes whose claimRef it completes);
//   - a person's write waits out the timeout and is refused (failurePolicy Fail);
//   - a destructive write the admission policies judge, a person's or a component's, is refused
//     by the policy at once: no webhook is called before the policies for it.
func TestHungPVGuard(t *testing.T) {
	if err := cl.Use(cluster.ModeUpstream); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	f := newCSIFlow(t, "hung", cluster.ModeUpstream)
	ns := f.ns
	deployer := deployerClient(t, ns)
	pat := personClient(t)

	// A bound pair, made with pvguard up.
	pv := csiPV(ns+"-data", ns+"-static", cl.Nodes[0], "10Mi")
	f.createPVs(pv)
	create(t, claim(ns, "data", ns+"-static", "10Mi"))
	harness.WaitFor(t, time.Minute, "claim data Bound", func(ctx context.Context) (bool, error) {
		pvc := &corev1.PersistentVolumeClaim{}
		err := cl.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "data"}, pvc)
		return err == nil && pvc.Status.Phase == corev1.ClaimBound, err
	})

	// The hung pvguard.
	b, err := certs.Issue(certs.Request{IPs: []net.IP{net.ParseIP("127.0.0.1")}})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(b.Serving.CertPEM, b.Serving.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var calls atomic.Int64
	hung := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	hung.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	hung.StartTLS()
	t.Cleanup(func() {
		if cl.PVGuard() == nil {
			if err := cl.StartPVGuard(); err != nil {
				t.Errorf("starting pvguard again: %v", err)
			}
		}
		close(release)
		hung.Close()
	})

	if err := cl.StopPVGuard(); err != nil {
		t.Fatal(err)
	}
	if err := cl.PointWebhooks(ctx, hung.URL, b.CA.CertPEM); err != nil {
		t.Fatal(err)
	}
	// Until the apiserver calls the hung listener, a person's write fails at once (nothing
	// listens where pvguard was).
	harness.WaitFor(t, time.Minute, "the apiserver to call the hung listener", func(ctx context.Context) (bool, error) {
		err := devcluster.PatchPVC(ctx, client.NewDryRunClient(pat), ns, "data", func(pvc *corev1.PersistentVolumeClaim) {
			pvc.Labels = map[string]string{"hung.pvguard.io/probe": "yes"}
		})
		return calls.Load() > 0 && harness.WebhookUnreachable(err), nil
	})

	timed := func(write func(context.Context) error) (time.Duration, error) {
		before := calls.Load()
		start := time.Now()
		err := write(ctx)
		d := time.Since(start)
		t.Logf("  (%d calls to the hung listener)", calls.Load()-before)
		return d, err
	}
	label := func(key string) func(context.Context, client.Client, string) error {
		return func(ctx context.Context, c client.Client, what string) error {
			if what == "volume" {
				return devcluster.PatchPV(ctx, c, pv.Name, func(pv *corev1.PersistentVolume) { pv.Labels = map[string]string{key: "yes"} })
			}
			return devcluster.PatchPVC(ctx, c, ns, "data", func(pvc *corev1.PersistentVolumeClaim) { pvc.Labels = map[string]string{key: "yes"} })
		}
	}
	margin := time.Second

	// A component's writes: admitted once the timeout passes.
	for _, what := range []string{"claim", "volume"} {
		d, err := timed(func(ctx context.Context) error { return label("hung.pvguard.io/component")(ctx, deployer, what) })
		switch {
		case err != nil:
			t.Errorf("hung: a component's %s update: %v, want it admitted (componentsFailurePolicy Ignore)", what, err)
		case d > timeoutSeconds+margin:
			t.Errorf("hung: a component's %s update took %v, want at most %v + %v", what, d, timeoutSeconds, margin)
		default:
			t.Logf("hung: a component's %s update admitted after %v", what, d.Round(time.Millisecond))
		}
	}
	// A person's: refused once the timeout passes.
	for _, what := range []string{"claim", "volume"} {
		d, err := timed(func(ctx context.Context) error { return label("hung.pvguard.io/person")(ctx, pat, what) })
		switch {
		case err == nil:
			t.Errorf("hung: a person's %s update was admitted, want it refused (failurePolicy Fail)", what)
		case !harness.WebhookUnreachable(err):
			t.Errorf("hung: a person's %s update: %v, want it refused for want of pvguard's answer", what, err)
		case d < timeoutSeconds-200*time.Millisecond || d > timeoutSeconds+margin:
			t.Errorf("hung: a person's %s update refused after %v, want about %v", what, d, timeoutSeconds)
		default:
			t.Logf("hung: a person's %s update refused after %v: %v", what, d.Round(time.Millisecond), err)
		}
	}
	// Destructive writes: refused by the admission policies before any webhook is called.
	for _, w := range []struct {
		who, what, rule string
		c               client.Client
		write           func(context.Context, client.Client) error
	}{
		{"person", "clearing the Bound volume's claimRef", "PVG002", pat, func(ctx context.Context, c client.Client) error {
			return devcluster.PatchPV(ctx, c, pv.Name, func(pv *corev1.PersistentVolume) { pv.Spec.ClaimRef = nil })
		}},
		{"component", "clearing the Bound volume's claimRef", "PVG002", deployer, func(ctx context.Context, c client.Client) error {
			return devcluster.PatchPV(ctx, c, pv.Name, func(pv *corev1.PersistentVolume) { pv.Spec.ClaimRef = nil })
		}},
		{"person", "Retain->Delete without confirmation", "PVG011", pat, func(ctx context.Context, c client.Client) error {
			return devcluster.PatchPV(ctx, c, pv.Name, func(pv *corev1.PersistentVolume) {
				pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimDelete
			})
		}},
		{"person", "removing the claim's bind-completed annotation", "PVG003", pat, func(ctx context.Context, c client.Client) error {
			return devcluster.PatchPVC(ctx, c, ns, "data", func(pvc *corev1.PersistentVolumeClaim) {
				delete(pvc.Annotations, "pv.kubernetes.io/bind-completed")
			})
		}},
	} {
		d, err := timed(func(ctx context.Context) error { return w.write(ctx, w.c) })
		switch {
		case err == nil:
			t.Errorf("hung: a %s's %s was admitted, want it refused by %s's admission policy", w.who, w.what, w.rule)
		case !strings.Contains(err.Error(), "denied request: ["+w.rule+" "):
			t.Errorf("hung: a %s's %s: %v, want a denial by %s's admission policy", w.who, w.what, err, w.rule)
		case d > 500*time.Millisecond:
			t.Errorf("hung: a %s's %s refused by the admission policy after %v, want at once", w.who, w.what, d)
		default:
			t.Logf("hung: a %s's %s refused by the admission policy after %v", w.who, w.what, d.Round(time.Millisecond))
		}
	}
	if got := harness.GetPV(t, cl.Client, pv.Name); got.Spec.ClaimRef == nil || got.Spec.ClaimRef.Name != "data" || got.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimRetain {
		t.Errorf("volume %s changed: claimRef %+v, reclaim %s", pv.Name, got.Spec.ClaimRef, got.Spec.PersistentVolumeReclaimPolicy)
	}

	if err := cl.StartPVGuard(); err != nil {
		t.Fatal(err)
	}
}
