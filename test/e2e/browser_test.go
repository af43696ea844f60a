package e2e

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/pvguard/pvguard/test/harness"
)

// chromium is Debian's browser, which `make test` installs (hack/install-chromium.sh); test
// tools cannot download their own browser on these machines.
const chromium = "/usr/bin/chromium"

// artifactsDir keeps the screenshots the browser test takes, for a person to look at.
const artifactsDir = "artifacts"

func decodeJSON(data []byte, v any) error { return json.Unmarshal(data, v) }

// dashboardPage is pvguard's dashboard open in headless Chromium.
type dashboardPage struct {
	ctx context.Context
	url string
}

// openDashboard starts Chromium on the suite's pvguard, as the cluster reader. The browser trusts
// exactly pvguard's serving key (by its SPKI hash), not any certificate, and reaches nothing but
// loopback.
func openDashboard(t *testing.T) *dashboardPage {
	t.Helper()
	return openDashboardAs(t, suite.readerToken)
}

// openDashboardAs is openDashboard with the bearer token of another caller.
func openDashboardAs(t *testing.T, token string) *dashboardPage {
	t.Helper()
	if _, err := os.Stat(chromium); err != nil {
		t.Fatalf("%s is missing: `make test` installs it (hack/install-chromium.sh): %v", chromium, err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("ignore-certificate-errors-spki-list", servingSPKI(t)),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 1400),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("starting %s: %v", chromium, err)
	}
	// The dashboard asks for a bearer token, as a port-forward through kubectl does not give one.
	auth := network.Headers{"Authorization": "Bearer " + token}
	if err := chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		if err := tg.Call(ctx, network.CommandEnable, &network.EnableParams{}, nil); err != nil {
			return err
		}
		return tg.Call(ctx, network.CommandSetExtraHTTPHeaders, &network.SetExtraHTTPHeadersParams{Headers: auth}, nil)
	})); err != nil {
		t.Fatalf("setting the bearer token: %v", err)
	}
	if err := os.MkdirAll(artifactsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	return &dashboardPage{ctx: ctx, url: suite.baseURL + "/"}
}

// servingSPKI is the base64 SHA-256 of the public key pvguard serves with, as Chromium's
// --ignore-certificate-errors-spki-list wants it.
func servingSPKI(t *testing.T) string {
	t.Helper()
	u, err := url.Parse(suite.baseURL)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(suite.caPEM)
	conn, err := tls.Dial("tcp", u.Host, &tls.Config{RootCAs: pool, ServerName: u.Hostname(), MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatalf("reading pvguard's serving certificate: %v", err)
	}
	defer conn.Close()
	sum := sha256.Sum256(conn.ConnectionState().PeerCertificates[0].RawSubjectPublicKeyInfo)
	return base64.StdEncoding.EncodeToString(sum[:])
}

// row is one row of the findings table as the browser shows it.
type row struct {
	Text    string `json:"text"`
	Visible bool   `json:"visible"`
	Action  string `json:"action"`
}

const readRows = `Array.from(document.querySelectorAll('#findings tbody tr')).map(r => ({
  text: r.innerText, visible: r.offsetParent !== null, action: r.dataset.action}))`

// load (re)loads the page and returns its findings rows.
func (p *dashboardPage) load() ([]row, error) {
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(p.url), chromedp.WaitVisible(chromedp.CSS("#findings"))); err != nil {
		return nil, err
	}
	return chromedp.Run(ctx, chromedp.Evaluate[[]row](readRows))
}

// text is what the browser shows of a page of pvguard once it holds want, or the error of the
// wait. The page is loaded again until it does: its own script may still be filling it in, and an
// explanation page answers 429 while the caller is over its rate.
func (p *dashboardPage) text(path, want string) (string, error) {
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	var text string
	for {
		err := chromedp.Do(ctx, chromedp.Navigate(suite.baseURL+path))
		if err == nil {
			for range 5 {
				if text, err = chromedp.Run(ctx, chromedp.Evaluate[string]("document.body.innerText")); err != nil || strings.Contains(text, want) {
					return text, err
				}
				time.Sleep(200 * time.Millisecond)
			}
		}
		select {
		case <-ctx.Done():
			return text, fmt.Errorf("the page never showed %q (last: %.200q): %w", want, text, ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

func (p *dashboardPage) screenshot(t *testing.T, name string) {
	t.Helper()
	png, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	path := filepath.Join(artifactsDir, "dashboard-"+name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(path)
	t.Logf("screenshot: %s", abs)
}

// shows reports whether a row of the table is the expected finding.
func shows(rows []row, e expected) bool {
	obj := e.kind + " " + e.object
	if e.namespace != "" {
		obj = e.kind + " " + e.namespace + "/" + e.object
	}
	for _, r := range rows {
		if strings.HasPrefix(r.Text, e.rule+" ") && strings.Contains(r.Text, obj+"\t") {
			return true
		}
	}
	return false
}

// expectFindings waits until the page lists every expected finding, then keeps a screenshot.
func (p *dashboardPage) expectFindings(t *testing.T, want []expected, shot string) {
	t.Helper()
	harness.Eventually(t, time.Minute, "the findings on the dashboard", func(context.Context) error {
		rows, err := p.load()
		if err != nil {
			return err
		}
		var missing []string
		for _, e := range want {
			if !shows(rows, e) {
				missing = append(missing, e.String())
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("not on the page: %v", missing)
		}
		return nil
	})
	p.screenshot(t, shot)
}

// expectNoFindings waits until the page lists none of the given findings.
func (p *dashboardPage) expectNoFindings(t *testing.T, gone []expected, shot string) {
	t.Helper()
	harness.Eventually(t, time.Minute, "the findings gone from the dashboard", func(context.Context) error {
		rows, err := p.load()
		if err != nil {
			return err
		}
		for _, e := range gone {
			if shows(rows, e) {
				return fmt.Errorf("still on the page: %s", e)
			}
		}
		return nil
	})
	p.screenshot(t, shot)
}

// expectFilter types into the filter box and picks an action, as a person would, and checks
// the rows that stay visible.
func (p *dashboardPage) expectFilter(t *testing.T, rule, object string) {
	t.Helper()
	if err := chromedp.Do(p.ctx, chromedp.SendKeys(chromedp.CSS("#filter"), rule)); err != nil {
		t.Fatalf("typing %s into the filter: %v", rule, err)
	}
	rows, err := chromedp.Run(p.ctx, chromedp.Evaluate[[]row](readRows))
	if err != nil {
		t.Fatalf("reading the rows: %v", err)
	}
	shown, err := chromedp.Run(p.ctx, chromedp.Text(chromedp.CSS("#shown")))
	if err != nil {
		t.Fatalf("reading the count: %v", err)
	}
	visible, hasObject := 0, false
	for _, r := range rows {
		if !r.Visible {
			continue
		}
		visible++
		if !strings.Contains(r.Text, rule) {
			t.Errorf("filter %q left visible: %q", rule, r.Text)
		}
		hasObject = hasObject || strings.Contains(r.Text, object)
	}
	if !hasObject || visible == 0 || visible == len(rows) {
		t.Fatalf("filter %q: %d of %d rows visible, %s among them: %v", rule, visible, len(rows), object, hasObject)
	}
	if want := fmt.Sprintf("%d of %d shown", visible, len(rows)); shown != want {
		t.Errorf("the count says %q, want %q", shown, want)
	}
	p.screenshot(t, "filtered")

	// Clear the text filter and show only deny findings.
	if _, err := chromedp.Run(p.ctx, chromedp.Evaluate[bool](`(() => {
		  const f = document.getElementById('filter'); f.value = ''; f.dispatchEvent(new Event('input'));
		  const s = document.getElementById('action'); s.value = 'deny'; s.dispatchEvent(new Event('change'));
		  return true; })()`)); err != nil {
		t.Fatalf("choosing the deny action: %v", err)
	}
	if rows, err = chromedp.Run(p.ctx, chromedp.Evaluate[[]row](readRows)); err != nil {
		t.Fatalf("reading the rows: %v", err)
	}
	visible = 0
	for _, r := range rows {
		if r.Visible {
			visible++
			if r.Action != "deny" {
				t.Errorf("action filter deny left visible a %s row: %q", r.Action, r.Text)
			}
		} else if r.Action == "deny" {
			t.Errorf("action filter deny hid a deny row: %q", r.Text)
		}
	}
	if visible == 0 {
		t.Error("action filter deny shows nothing, though deny findings were seeded")
	}
}
