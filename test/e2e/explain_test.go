package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	corev1 "k8s.io/api/core/v1"

	"github.com/pvguard/pvguard/explain"
	"github.com/pvguard/pvguard/internal/cli"
	"github.com/pvguard/pvguard/test/harness"
	"github.com/pvguard/pvguard/test/testobj"
)

// TestExplainPageFromTheDashboard keeps a claim Pending for one known reason on the real
// apiserver (the only volume of its class is Filesystem, the claim asks for Block), finds it
// among the dashboard's pending claims in headless Chromium, follows its link as a person would,
// and reads the volumeMode column's failing value and the verdict on the page. The JSON API
// must answer what `pvguard explain pvc -o json` prints for the same claim.
func TestExplainPageFromTheDashboard(t *testing.T) {
	ctx := context.Background()
	a := admin(t)
	ns := harness.PrefixedNamespace(t, admin(t), "explain")
	class := uniq(t, "local")
	pvName := uniq(t, "pv-fs")
	harness.Must(t, a.Create(ctx, testobj.StorageClass(class, "kubernetes.io/no-provisioner")), "creating class "+class)
	t.Cleanup(func() { _ = a.Delete(ctx, testobj.StorageClass(class, "")) })
	pv := harness.FreshPV(testobj.PV(pvName, testobj.Class(class), testobj.Capacity("10Gi"), testobj.VolumeMode(corev1.PersistentVolumeFilesystem)))
	harness.Must(t, a.Create(ctx, pv), "creating volume "+pvName)
	t.Cleanup(func() { _ = a.Delete(ctx, pv) })
	pv.Status.Phase = corev1.VolumeAvailable // as a binder leaves a free volume: only the mode is wrong
	harness.Must(t, a.Status().Update(ctx, pv), "making the volume Available")
	claim := harness.FreshPVC(testobj.PVC(ns, "data", testobj.ClaimClass(class), testobj.Request("5Gi"), testobj.ClaimVolumeMode(corev1.PersistentVolumeBlock)))
	harness.Must(t, a.Create(ctx, claim), "creating claim "+ns+"/data")

	wantCell := "Filesystem != Block"
	wantVerdict := fmt.Sprintf("no volume fits; %s fits if the claim asks for volumeMode Filesystem", pvName)

	// The API, against the CLI on the same cluster (the cache may lag the writes a moment).
	apiPath := "/api/v1/explain/pvc/" + ns + "/data"
	var served explain.Explanation
	harness.Eventually(t, time.Minute, "the claim explained by "+apiPath, func(context.Context) error {
		code, body := fetch(t, apiPath)
		if code != http.StatusOK {
			return fmt.Errorf("HTTP %d: %s", code, body)
		}
		served = explain.Explanation{}
		if err := json.Unmarshal(body, &served); err != nil {
			return err
		}
		if served.Verdict.Text.String() != wantVerdict {
			return fmt.Errorf("verdict %q, want %q", served.Verdict.Text.String(), wantVerdict)
		}
		return nil
	})
	var printedOut bytes.Buffer
	harness.Must(t, cli.RunExplainClaim(cli.ExplainFlags{Kubeconfig: suite.kubeconfig, Output: "json"}, ns+"/data", &printedOut, io.Discard), "pvguard explain pvc -o json")
	var printed explain.Explanation
	harness.Must(t, json.Unmarshal(printedOut.Bytes(), &printed), "decoding pvguard explain -o json")
	if served.State.String() != printed.State.String() || served.WaitingFor != printed.WaitingFor || served.Phase != printed.Phase ||
		served.Class != printed.Class || fmt.Sprint(served.Verdict) != fmt.Sprint(printed.Verdict) {
		t.Errorf("the API and the CLI disagree:\n api %s / %s / %+v\n cli %s / %s / %+v",
			served.WaitingFor, served.State.String(), served.Verdict, printed.WaitingFor, printed.State.String(), printed.Verdict)
	}
	if got, want := candidateRow(served, pvName), candidateRow(printed, pvName); got == "" || got != want {
		t.Errorf("%s's row: api %s, cli %s", pvName, got, want)
	}
	if served.WaitingFor != explain.WaitingForNothing || !strings.Contains(served.State.String(), "no persistent volumes available") {
		t.Errorf("state %s: %q, want nothing to wait for (a no-provisioner class without a fitting volume)", served.WaitingFor, served.State.String())
	}
	for path, want := range map[string]int{
		"/api/v1/explain/pvc/" + ns + "/nope": http.StatusNotFound,
		"/api/v1/explain/pvc/" + ns + "/No_":  http.StatusBadRequest,
		"/api/v1/explain/pv/" + pvName:        http.StatusOK,
	} {
		if code, body := fetch(t, path); code != want {
			t.Errorf("GET %s: HTTP %d, want %d: %s", path, code, want, body)
		}
	}

	// The dashboard lists the claim as pending; its link opens the explanation.
	page := openDashboard(t)
	link := fmt.Sprintf(`#pending a[href="explain/pvc/%s/data"]`, ns)
	harness.Eventually(t, time.Minute, "the claim among the dashboard's pending claims", func(context.Context) error {
		ctx, cancel := context.WithTimeout(page.ctx, 30*time.Second)
		defer cancel()
		if err := chromedp.Do(ctx, chromedp.Navigate(page.url), chromedp.WaitVisible(chromedp.CSS("#findings"))); err != nil {
			return err
		}
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll(%q).length`, link)))
		if err != nil {
			return err
		}
		if n != 1 {
			return fmt.Errorf("%d links to the claim's page", n)
		}
		return nil
	})
	page.screenshot(t, "pending")
	cctx, cancel := context.WithTimeout(page.ctx, 30*time.Second)
	defer cancel()
	cell := fmt.Sprintf(`#candidates tr[data-volume=%q] td[data-check="volumeMode"]`, pvName)
	harness.Must(t, chromedp.Do(cctx, chromedp.Click(chromedp.CSS(link)), chromedp.WaitVisible(chromedp.CSS("#verdict"))),
		"following the claim's link")
	read := func(what string, a chromedp.Action[string]) string {
		t.Helper()
		v, err := chromedp.Run(cctx, a)
		harness.Must(t, err, "reading "+what)
		return v
	}
	url := read("the location", chromedp.Location())
	modeCell := read("the volumeMode cell", chromedp.Text(chromedp.CSS(cell)))
	classOfCell := read("the cell's class", chromedp.Evaluate[string](fmt.Sprintf(`document.querySelector(%q).className`, cell)))
	verdict := read("the verdict", chromedp.Text(chromedp.CSS("#verdict")))
	state := read("the state", chromedp.Text(chromedp.CSS("#state")))
	if want := suite.baseURL + "/explain/pvc/" + ns + "/data"; url != want {
		t.Errorf("the link led to %s, want %s", url, want)
	}
	if modeCell != wantCell || classOfCell != "fail" {
		t.Errorf("the volumeMode cell of %s reads %q (class %q), want %q failing", pvName, modeCell, classOfCell, wantCell)
	}
	if verdict != "Verdict: "+wantVerdict {
		t.Errorf("the page's verdict %q, want %q", verdict, wantVerdict)
	}
	if state != "State: "+served.State.String() {
		t.Errorf("the page's state %q, want the API's %q", state, served.State.String())
	}
	page.screenshot(t, "explain")
}

// fetch reads one endpoint of the suite's pvguard, whatever its status.
func fetch(t *testing.T, path string) (int, []byte) {
	t.Helper()
	resp, err := tlsClient().Get(suite.baseURL + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, body
}

// candidateRow is a volume's row of an explanation, as text.
func candidateRow(e explain.Explanation, volume string) string {
	for _, c := range e.Candidates {
		if c.Volume == volume {
			return fmt.Sprintf("%+v", c)
		}
	}
	return ""
}
