package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	openreports "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/pvguard/pvguard/internal/cli"
	"github.com/pvguard/pvguard/test/harness"
	"github.com/pvguard/pvguard/test/testobj"
)

// TestSecretValuesStayOutOfEveryOutput binds a claim to a CSI volume whose volumeAttributes
// hold credential-like values (PVG016) and which references a Secret holding another value,
// then reads every place pvguard publishes what it saw: the JSON report and the dashboard as
// served (raw bytes, not just messages), the explanations of both (JSON and pages), /metrics, the openreports.io Report and ClusterReport
// objects, `pvguard audit` live and offline in every output format, and the events of every
// namespace. Each must show the volume (or its finding) and neither value.
func TestSecretValuesStayOutOfEveryOutput(t *testing.T) {
	ctx := context.Background()
	a := admin(t)
	ns := harness.PrefixedNamespace(t, admin(t), "secrets")
	attrCanary, secretCanary := "canary-attr-"+ns, "canary-secret-"+ns
	canaries := []string{attrCanary, secretCanary}

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "csi-creds"}, StringData: map[string]string{"password": secretCanary}}
	harness.Must(t, a.Create(ctx, secret), "creating the CSI Secret")
	pvName := uniq(t, "pv-secretive")
	secretive := func(pv *corev1.PersistentVolume) {
		testobj.CSI("rbd.csi.ceph.com", "vol-"+ns, map[string]string{"userKeyring": attrCanary, "adminPassword": attrCanary, "pool": "rbd"})(pv)
		ref := &corev1.SecretReference{Namespace: ns, Name: secret.Name}
		pv.Spec.CSI.NodeStageSecretRef, pv.Spec.CSI.ControllerPublishSecretRef = ref, ref
	}
	// The claim's class differs from the volume's (PVG007, warn): a finding in the namespace's
	// Report as well as the volume's in the ClusterReport.
	createPair(t, a, pvName, ns, "data", []testobj.PVMod{secretive, testobj.Class("silver")}, []testobj.PVCMod{testobj.ClaimClass("gold")})
	harness.Must(t, bindAsUpstream(ctx, binder(t), pvName, ns, "data"), "binding the pair")

	check := func(where, content, mustShow string) {
		t.Helper()
		for _, c := range canaries {
			if strings.Contains(content, c) {
				i := strings.Index(content, c)
				t.Errorf("%s carries a secret value: ...%s...", where, content[max(0, i-120):min(len(content), i+len(c)+40)])
			}
		}
		if mustShow != "" && !strings.Contains(content, mustShow) {
			t.Errorf("%s does not show %q: nothing was checked there", where, mustShow)
		}
	}

	harness.Eventually(t, time.Minute, "PVG016 and PVG007 in /api/v1/report", func(context.Context) error {
		r := report(t)
		if !hasFinding(r, "PVG016", pvName) || !hasFinding(r, "PVG007", "data") {
			return fmt.Errorf("not yet: %d findings", len(r.Findings))
		}
		return nil
	})
	check("GET /api/v1/report", get(t, "/api/v1/report"), pvName)
	check("GET / (the dashboard)", get(t, "/"), pvName)
	for _, path := range []string{"/api/v1/explain/pv/" + pvName, "/explain/pv/" + pvName, "/api/v1/explain/pvc/" + ns + "/data", "/explain/pvc/" + ns + "/data"} {
		check("GET "+path, get(t, path), pvName)
	}
	check("GET /metrics", get(t, "/metrics"), "pvguard_")

	rc := reportsClient(t)
	harness.Eventually(t, time.Minute, "the openreports.io objects", func(context.Context) error {
		var crs openreports.ClusterReportList
		var rs openreports.ReportList
		if err := rc.List(ctx, &crs); err != nil {
			return err
		}
		if err := rc.List(ctx, &rs, client.InNamespace(ns)); err != nil {
			return err
		}
		all, _ := json.Marshal([]any{crs, rs})
		if !strings.Contains(string(all), pvName) || len(rs.Items) == 0 {
			return errors.New("the volume's ClusterReport result or the namespace's Report is not written yet")
		}
		return nil
	})
	var crs openreports.ClusterReportList
	var rs openreports.ReportList
	harness.Must(t, rc.List(ctx, &crs), "listing ClusterReports")
	harness.Must(t, rc.List(ctx, &rs), "listing Reports")
	crJSON, _ := json.Marshal(crs)
	rJSON, _ := json.Marshal(rs)
	check("the ClusterReports", string(crJSON), pvName)
	check("the Reports", string(rJSON), "PVG007")

	// The CLI, live and on the manifests (the volume and the Secret as `kubectl get -o yaml`
	// would give them).
	pv := &corev1.PersistentVolume{}
	harness.Must(t, a.Get(ctx, client.ObjectKey{Name: pvName}, pv), "reading the volume")
	pv.APIVersion, pv.Kind = "v1", "PersistentVolume"
	manifest, err := yaml.Marshal(pv)
	harness.Must(t, err, "encoding the volume")
	file := filepath.Join(t.TempDir(), "pv.yaml")
	harness.Must(t, os.WriteFile(file, manifest, 0o600), "writing the manifest")
	for _, output := range []string{"table", "json", "yaml", "report", "html"} {
		for _, o := range []cli.AuditFlags{{Kubeconfig: suite.kubeconfig}, {Files: []string{file}}} {
			o.Output = output
			where := fmt.Sprintf("pvguard audit -o %s --kubeconfig", output)
			if len(o.Files) > 0 {
				where = fmt.Sprintf("pvguard audit -o %s -f", output)
			}
			var out, errOut bytes.Buffer
			err := cli.RunAudit(o, &out, &errOut)
			var exit *cli.ExitError
			if err != nil && !errors.As(err, &exit) {
				t.Fatalf("%s: %v\n%s", where, err, errOut.String())
			}
			check(where, out.String()+errOut.String(), "PVG016")
		}
	}

	var events corev1.EventList
	harness.Must(t, a.List(ctx, &events), "listing events")
	evJSON, _ := json.Marshal(events)
	check("the events", string(evJSON), "")
}

// get reads one endpoint of the suite's pvguard as raw text.
func get(t *testing.T, path string) string {
	t.Helper()
	resp, err := tlsClient().Get(suite.baseURL + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: HTTP %d, %v", path, resp.StatusCode, err)
	}
	return string(body)
}
