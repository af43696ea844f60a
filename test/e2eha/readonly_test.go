package e2eha

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/pvguard/pvguard/audit"
	"github.com/pvguard/pvguard/internal/cli"
	"github.com/pvguard/pvguard/test/harness"
	"github.com/pvguard/pvguard/test/testobj"
	"github.com/pvguard/pvguard/webhook"
)

// TestReadEndpointsRefuseWrites sends POST, PUT, PATCH and DELETE to every read endpoint of a
// running pvguard (the dashboard, the report, the explanations, /metrics, /healthz, /readyz, on
// the HTTPS port and the plain metrics port) and every method but POST to the webhook paths: each
// must be refused with 405 (or 404), and none may change the report, the cluster's storage
// objects, the reviews counted or the replica's health.
func TestReadEndpointsRefuseWrites(t *testing.T) {
	ctx := context.Background()
	plainAddr := freePort(t)
	inst, err := h.Serve(func(o *cli.ServeFlags) {
		o.Audit.Interval = time.Second
		o.LeaderElection.Elect = false
		o.MetricsListen = plainAddr
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = inst.Stop() })
	harness.Must(t, h.InstallWebhooks(inst), "installing the webhooks")

	// Something for the report to show: a volume with a credential-like attribute (PVG016
	// warns, so it is admitted and then audited).
	pv := testobj.PV("readonly-csi", testobj.CSI("csi.example.com", "h-1", map[string]string{"password": "x"}))
	harness.Must(t, h.Client(t, "").Create(ctx, pv), "creating a volume")
	hc := readerClient(t, caClient(h.CAPEM))
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		r, err := harness.FetchReport(ctx, hc, inst.BaseURL)
		if err != nil {
			return false, nil
		}
		return slices.ContainsFunc(r.Findings, func(f audit.Finding) bool { return f.Rule == "PVG016" && f.Object == pv.Name }), nil
	})
	harness.Must(t, err, "waiting for the report to show the volume")

	before := snapshot(t, hc, inst)
	plain := &http.Client{Timeout: 5 * time.Second}
	type target struct {
		c    *http.Client
		base string
	}
	tlsBase, plainBase := target{hc, inst.BaseURL}, target{plain, "http://" + plainAddr}
	reads := []struct {
		target
		path string
	}{
		{tlsBase, "/"}, {tlsBase, "/api/v1/report"}, {tlsBase, "/metrics"}, {tlsBase, "/healthz"}, {tlsBase, "/readyz"},
		{tlsBase, "/api/v1/explain/pv/" + pv.Name}, {tlsBase, "/explain/pv/" + pv.Name},
		{plainBase, "/metrics"}, {plainBase, "/healthz"}, {plainBase, "/readyz"},
	}
	refused := 0
	for _, r := range reads {
		url := r.base + r.path
		if code, _ := send(t, r.c, http.MethodGet, url); code != http.StatusOK {
			t.Errorf("GET %s: HTTP %d, want 200 (the endpoint under test must exist)", url, code)
		}
		for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
			code, _ := send(t, r.c, m, url)
			switch {
			case code == http.StatusMethodNotAllowed || code == http.StatusNotFound:
				refused++
			default:
				t.Errorf("%s %s: HTTP %d, want 405 or 404", m, url, code)
			}
		}
	}
	for _, p := range []string{webhook.PathValidatePV, webhook.PathValidatePVC, webhook.PathValidateSC, webhook.PathMutatePV, webhook.PathMutatePVC} {
		for _, m := range []string{http.MethodGet, http.MethodPut, http.MethodPatch, http.MethodDelete} {
			if code, _ := send(t, hc, m, inst.BaseURL+p); code != http.StatusMethodNotAllowed {
				t.Errorf("%s %s: HTTP %d, want 405", m, p, code)
			} else {
				refused++
			}
		}
	}
	t.Logf("%d write requests refused with 405/404", refused)

	time.Sleep(2 * time.Second) // an audit pass or two after the requests
	after := snapshot(t, hc, inst)
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s changed: before %s, after %s", k, v, after[k])
		}
	}
}

// snapshot is what a write through a read endpoint could change, as comparable strings.
func snapshot(t *testing.T, hc *http.Client, inst *harness.Instance) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	r, err := harness.FetchReport(ctx, hc, inst.BaseURL)
	harness.Must(t, err, "reading the report")
	findings, _ := json.Marshal(r.Findings)
	out["the report's findings"] = string(findings)

	c := h.Client(t, "")
	versions := map[string]string{}
	var pvs corev1.PersistentVolumeList
	var pvcs corev1.PersistentVolumeClaimList
	var scs storagev1.StorageClassList
	harness.Must(t, c.List(ctx, &pvs), "listing volumes")
	harness.Must(t, c.List(ctx, &pvcs), "listing claims")
	harness.Must(t, c.List(ctx, &scs), "listing classes")
	for _, o := range pvs.Items {
		versions["pv/"+o.Name] = o.ResourceVersion
	}
	for _, o := range pvcs.Items {
		versions["pvc/"+o.Namespace+"/"+o.Name] = o.ResourceVersion
	}
	for _, o := range scs.Items {
		versions["sc/"+o.Name] = o.ResourceVersion
	}
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(versions)) {
		fmt.Fprintf(&b, "%s@%s ", k, versions[k])
	}
	out["the storage objects"] = b.String()

	out["the reviews counted"] = fmt.Sprint(reviewsServed(t, hc, inst))
	for _, p := range []string{"/healthz", "/readyz"} {
		code, body := send(t, hc, http.MethodGet, inst.BaseURL+p)
		out[p] = fmt.Sprintf("HTTP %d %s", code, body)
	}
	return out
}

// send makes one request with a JSON body (ignored by a read endpoint, harmful to a careless
// one) and returns the status and body.
func send(t *testing.T, c *http.Client, method, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(`{"findings":[],"kind":"AdmissionReview"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func caClient(caPEM []byte) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
}

// freePort returns a loopback address nothing listens on at the moment.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}
