package e2e

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/test/harness"
	"github.com/pvguard/pvguard/test/testobj"
	"github.com/pvguard/pvguard/webhook"
)

func TestConfigReloadChangesEnforcement(t *testing.T) {
	ctx := context.Background()
	a := admin(t)
	ns := harness.PrefixedNamespace(t, admin(t), "reload")
	free := uniq(t, "pv")
	harness.Must(t, a.Create(ctx, harness.FreshPV(testobj.PV(free))), "creating volume")

	setConfig(t, strings.Replace(baseConfig, "volume-grab: {action: warn}", "volume-grab: {action: deny}", 1))
	harness.Eventually(t, time.Minute, "grab refused after reload", func(context.Context) error {
		err := a.Create(ctx, harness.FreshPVC(testobj.PVC(ns, "grab", testobj.VolumeName(free))), client.DryRunAll)
		if err == nil || !strings.Contains(err.Error(), "[PVG010 ") {
			return errors.New("still admitted: " + errString(err))
		}
		return nil
	})
	setConfig(t, baseConfig)
	harness.Eventually(t, time.Minute, "grab admitted again after reload", func(context.Context) error {
		return a.Create(ctx, harness.FreshPVC(testobj.PVC(ns, "grab", testobj.VolumeName(free))), client.DryRunAll)
	})
}

// setConfig rewrites the suite's policy config (the server reloads it); the test's cleanup
// restores baseConfig.
func setConfig(t *testing.T, s string) {
	t.Helper()
	write := func(s string) error { return os.WriteFile(suite.configFile, []byte(s), 0o600) }
	t.Cleanup(func() {
		if err := write(baseConfig); err != nil {
			t.Errorf("restoring the policy config: %v", err)
		}
	})
	if err := write(s); err != nil {
		t.Fatal(err)
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

func TestLiveServerSurvivesGarbage(t *testing.T) {
	hc := tlsClient()
	for _, body := range []string{"", "{{{", "\xff\xfe", `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"1","kind":{"kind":"PersistentVolume","version":"v1"},"operation":"CREATE","object":{"spec":7}}}`} {
		resp, err := hc.Post(suite.baseURL+webhook.PathValidatePV, "application/json", bytes.NewBufferString(body))
		if err != nil {
			t.Fatalf("POST %q: %v", body, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("POST %q: HTTP %d, want an in-band error", body, resp.StatusCode)
		}
	}
	resp, err := hc.Post(suite.baseURL+webhook.PathValidatePV, "text/plain", bytes.NewBufferString("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("text/plain: HTTP %d, want 415", resp.StatusCode)
	}
	// The apiserver still gets answers.
	ctx := context.Background()
	harness.Must(t, admin(t).Create(ctx, harness.FreshPV(testobj.PV(uniq(t, "pv")))), "creating a volume after garbage")
}

func TestMoreWarnings(t *testing.T) {
	ctx := context.Background()
	a := admin(t)
	ns := harness.PrefixedNamespace(t, admin(t), "warn2")

	// PVG013: a user setting a binder annotation.
	a.warnings.Take()
	harness.Must(t, a.Create(ctx, harness.FreshPVC(testobj.PVC(ns, "fake", testobj.ClaimMeta(testobj.Annotation("pv.kubernetes.io/bind-completed", "yes"))))), "creating claim")
	if ws := a.warnings.Take(); !hasWarning(ws, "PVG013") {
		t.Errorf("no PVG013 warning; got %q", ws)
	}

	// PVG017: a second default StorageClass.
	first, second := uniq(t, "sc-a"), uniq(t, "sc-b")
	harness.Must(t, a.Create(ctx, testobj.StorageClass(first, "example.com/csi", testobj.DefaultClass)), "creating first default class")
	harness.Eventually(t, time.Minute, "second default class warned", func(context.Context) error {
		sc := testobj.StorageClass(second, "example.com/csi", testobj.DefaultClass)
		if err := a.Create(ctx, sc, client.DryRunAll); err != nil {
			return err
		}
		if ws := a.warnings.Take(); !hasWarning(ws, "PVG017") {
			return errors.New("no PVG017 warning yet (cache catching up)")
		}
		return nil
	})
	for _, n := range []string{first} {
		harness.Must(t, a.Delete(ctx, testobj.StorageClass(n, "")), "deleting class")
	}
}
