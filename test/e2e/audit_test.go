package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/audit"
	"github.com/pvguard/pvguard/test/testobj"
)

// report fetches /api/v1/report from the running pvguard over TLS.
func report(t *testing.T) audit.Report {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(suite.caPEM)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	resp, err := hc.Get(suite.baseURL + "/api/v1/report")
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
	mustSucceed(t, a.Create(ctx, freshPV(testobj.PV(name))), "creating volume")
	setPhase := func(p corev1.PersistentVolumePhase) {
		t.Helper()
		pv := &corev1.PersistentVolume{}
		mustSucceed(t, a.Get(ctx, client.ObjectKey{Name: name}, pv), "reading volume")
		pv.Status.Phase = p
		mustSucceed(t, a.Status().Update(ctx, pv), "setting phase "+string(p))
	}
	setPhase(corev1.VolumeFailed)
	eventually(t, "PVG024 in the report", func() error {
		if r := report(t); !hasFinding(r, "PVG024", name) {
			return fmt.Errorf("not yet reported (%d findings, audited %s)", len(r.Findings), r.Time)
		}
		return nil
	})
	setPhase(corev1.VolumeAvailable)
	eventually(t, "PVG024 gone from the report", func() error {
		if hasFinding(report(t), "PVG024", name) {
			return fmt.Errorf("still reported")
		}
		return nil
	})
}
