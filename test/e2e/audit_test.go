package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	openreports "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/audit"
	"github.com/pvguard/pvguard/internal/cli"
	"github.com/pvguard/pvguard/test/harness"
	"github.com/pvguard/pvguard/test/testobj"
)

// tlsClient trusts the suite's CA.
// tlsClient is a client of the suite's pvguard that presents the cluster reader's token (the
// report, the dashboard and the explanations require one; the webhooks ignore it).
func tlsClient() *http.Client { return tokenClient(suite.readerToken) }

// tokenClient is a client of the suite's pvguard that presents token as a bearer token ("" for
// none).
func tokenClient(token string) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(suite.caPEM)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	if token == "" {
		return hc
	}
	return harness.WithBearer(hc, token)
}

// report fetches /api/v1/report from the running pvguard over TLS.
func report(t *testing.T) audit.Report {
	t.Helper()
	resp, err := tlsClient().Get(suite.baseURL + "/api/v1/report")
	if err != nil {
		t.Fatalf("GET /api/v1/report: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/v1/report: HTTP %d", resp.StatusCode)
	}
	var r audit.Report
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatalf("decoding report: %v", err)
	}
	return r
}

func hasFinding(r audit.Report, rule, object string) bool {
	for _, f := range r.Findings {
		if f.Rule == rule && f.Object == object {
			return true
		}
	}
	return false
}

// TestLiveAuditReportsAndClears seeds a Failed volume, sees the live audit report it at
// /api/v1/report, fixes it, and sees the finding go.
func TestLiveAuditReportsAndClears(t *testing.T) {
	ctx := context.Background()
	a := admin(t)
	name := uniq(t, "pv-failed")
	harness.Must(t, a.Create(ctx, harness.FreshPV(testobj.PV(name))), "creating volume")
	setPhase := func(p corev1.PersistentVolumePhase) {
		t.Helper()
		pv := &corev1.PersistentVolume{}
		harness.Must(t, a.Get(ctx, client.ObjectKey{Name: name}, pv), "reading volume")
		pv.Status.Phase = p
		harness.Must(t, a.Status().Update(ctx, pv), "setting phase "+string(p))
	}
	setPhase(corev1.VolumeFailed)
	harness.Eventually(t, time.Minute, "PVG024 in the report", func(context.Context) error {
		if r := report(t); !hasFinding(r, "PVG024", name) {
			return fmt.Errorf("not yet reported (%d findings, audited %s)", len(r.Findings), r.Time)
		}
		return nil
	})
	// The dashboard shows it too.
	harness.Eventually(t, time.Minute, "the failed volume on the dashboard", func(context.Context) error {
		resp, err := tlsClient().Get(suite.baseURL + "/")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		page, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		if !strings.Contains(string(page), "PersistentVolume "+name+" is Failed") || !strings.Contains(string(page), "<td>"+name+"</td><td>Failed</td>") {
			return fmt.Errorf("not on the dashboard yet")
		}
		return nil
	})
	// The elected replica writes it into the ClusterReport.
	rc := reportsClient(t)
	inClusterReport := func() (bool, error) {
		var cr openreports.ClusterReport
		if err := rc.Get(ctx, client.ObjectKey{Name: "pvguard"}, &cr); err != nil {
			return false, err
		}
		for _, r := range cr.Results {
			if r.Rule == "PVG024" && len(r.Subjects) == 1 && r.Subjects[0].Name == name {
				return r.Result == "warn" && r.Source == "pvguard", nil
			}
		}
		return false, nil
	}
	harness.Eventually(t, time.Minute, "PVG024 in ClusterReport pvguard", func(context.Context) error {
		if ok, err := inClusterReport(); !ok {
			return fmt.Errorf("not in the ClusterReport yet (%v)", err)
		}
		return nil
	})
	setPhase(corev1.VolumeAvailable)
	harness.Eventually(t, time.Minute, "PVG024 gone from the report", func(context.Context) error {
		if hasFinding(report(t), "PVG024", name) {
			return fmt.Errorf("still reported")
		}
		return nil
	})
	harness.Eventually(t, time.Minute, "PVG024 gone from the ClusterReport", func(context.Context) error {
		if ok, _ := inClusterReport(); ok {
			return fmt.Errorf("still in the ClusterReport")
		}
		return nil
	})
}

// TestNamespaceReportWrittenAndRemoved: a Lost claim gets its namespace a Report; once the claim
// is gone, the stale Report is deleted.
func TestNamespaceReportWrittenAndRemoved(t *testing.T) {
	ctx := context.Background()
	a := admin(t)
	ns := harness.PrefixedNamespace(t, admin(t), "report")
	pvc := harness.FreshPVC(testobj.PVC(ns, "lost"))
	harness.Must(t, a.Create(ctx, pvc), "creating claim")
	pvc.Status.Phase = corev1.ClaimLost
	harness.Must(t, a.Status().Update(ctx, pvc), "marking the claim Lost")
	rc := reportsClient(t)
	harness.Eventually(t, time.Minute, "Report with PVG021 in the namespace", func(context.Context) error {
		var r openreports.Report
		if err := rc.Get(ctx, client.ObjectKey{Namespace: ns, Name: "pvguard"}, &r); err != nil {
			return err
		}
		if len(r.Results) != 1 || r.Results[0].Rule != "PVG021" || r.Summary.Warn != 1 {
			return fmt.Errorf("unexpected report: %+v", r.Results)
		}
		return nil
	})
	harness.Must(t, a.Delete(ctx, pvc), "deleting the claim")
	harness.Must(t, patchPVC(ctx, a, ns, "lost", func(c *corev1.PersistentVolumeClaim) { c.Finalizers = nil }), "releasing the finalizer")
	harness.Eventually(t, time.Minute, "stale Report deleted", func(context.Context) error {
		var r openreports.Report
		err := rc.Get(ctx, client.ObjectKey{Namespace: ns, Name: "pvguard"}, &r)
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("report still there (%v)", err)
	})
}

// reportsClient reads openreports.io objects as the admin.
func reportsClient(t *testing.T) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := openreports.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(suite.cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestAuditCLIAgainstTheCluster runs `pvguard audit --kubeconfig` against the test apiserver.
func TestAuditCLIAgainstTheCluster(t *testing.T) {
	ctx := context.Background()
	a := admin(t)
	ns := harness.PrefixedNamespace(t, admin(t), "cli")
	pvc := harness.FreshPVC(testobj.PVC(ns, "lost"))
	harness.Must(t, a.Create(ctx, pvc), "creating claim")
	pvc.Status.Phase = corev1.ClaimLost
	harness.Must(t, a.Status().Update(ctx, pvc), "marking it Lost")

	var out, errOut bytes.Buffer
	err := cli.RunAudit(cli.AuditFlags{Kubeconfig: suite.kubeconfig, Output: "json", FailOn: "deny"}, &out, &errOut)
	var exit *cli.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("audit: %v", err)
	}
	var r audit.Report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("output: %v\n%s", err, out.String())
	}
	if !hasFinding(r, "PVG021", "lost") || r.Summary.Objects == 0 {
		t.Fatalf("PVG021 on %s/lost not reported; %d findings over %d objects", ns, len(r.Findings), r.Summary.Objects)
	}
	if !strings.Contains(errOut.String(), "objects audited") {
		t.Errorf("no progress on stderr: %q", errOut.String())
	}
}
