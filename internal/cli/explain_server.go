package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
)

// maxServerAnswer bounds an explanation read from the server (a claim's lists every volume).
const maxServerAnswer = 64 << 20

// forbiddenHint is what `pvguard explain` adds when the caller's own reads are forbidden and no
// server was named.
const forbiddenHint = "your credentials may not read every claim and volume, which an explanation plans over; " +
	"ask the pvguard server instead, which shows what your RBAC lets you list: " +
	"--pvguard-server https://localhost:9443 (after kubectl -n pvguard-system port-forward svc/pvguard 9443:443) " +
	"and --pvguard-certificate-authority FILE (the CA of its serving certificate)"

// forbidden reports whether err is the apiserver refusing one of the explanation's reads.
func forbidden(err error) bool { return apierrors.IsForbidden(err) }

// askServer GETs path (below /api/v1/explain/) from the pvguard server o.Server as the user of
// rc (their bearer token, token file or exec plugin, as kubectl sends it to the apiserver), and
// decodes the explanation into v. The server answers what that user's RBAC lets them list.
func askServer(ctx context.Context, o ExplainFlags, rc *rest.Config, path string, v any) error {
	base, err := url.Parse(o.Server)
	if err != nil || base.Scheme != "https" || base.Host == "" {
		return badInput("--pvguard-server %q: want https://HOST[:PORT]", o.Server)
	}
	sc := rest.CopyConfig(rc)
	sc.Host, sc.APIPath = strings.TrimSuffix(o.Server, "/"), ""
	// The server's own CA, not the apiserver's; the apiserver's client certificate stays behind.
	sc.TLSClientConfig = rest.TLSClientConfig{CAFile: o.ServerCA}
	sc.Timeout = time.Minute
	hc, err := rest.HTTPClientFor(sc)
	if err != nil {
		return fmt.Errorf("connecting to the pvguard server %s: %w", o.Server, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, sc.Host+"/api/v1/explain/"+path, nil)
	if err != nil {
		return badInput("--pvguard-server %q: %v", o.Server, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("asking the pvguard server %s: %w", o.Server, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxServerAnswer))
	if err != nil {
		return fmt.Errorf("reading the pvguard server's answer: %w", err)
	}
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(body, v); err != nil {
			return fmt.Errorf("the pvguard server's answer is not an explanation: %w", err)
		}
		return nil
	}
	var e struct {
		Error string `json:"error"`
	}
	msg := strings.TrimSpace(string(body))
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		msg = e.Error
	}
	switch resp.StatusCode {
	case http.StatusBadRequest, http.StatusNotFound:
		return badInput("%s", msg)
	case http.StatusUnauthorized:
		return errors.New("the pvguard server takes a bearer token (a user's or a ServiceAccount's), and your kubeconfig's user has none it accepts: " + msg)
	}
	return fmt.Errorf("the pvguard server %s: HTTP %d: %s", o.Server, resp.StatusCode, msg)
}
