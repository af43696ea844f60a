package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"

	"github.com/pvguard/pvguard/explain"
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

// serverTimeout bounds one request to the pvguard server: past it the server counts as out of
// reach and `explain pvc` explains from the caller's own reads.
const serverTimeout = 20 * time.Second

// The full candidate list of a claim's explanation, as the server pages it (docs/explain.md,
// "Candidates on the API"): candidatesParam=candidatesAll asks for every candidate, limitParam
// for pages of serverPage (the most the server gives), continueParam carries the token of the
// page before, and the answer's continue names the next page ("" for none).
const (
	candidatesParam = "candidates"
	candidatesAll   = "all"
	limitParam      = "limit"
	serverPage      = 5000
	continueParam   = "continue"
)

// serverUnreachable is the pvguard server not answering: no connection, a timeout, or an answer
// that is its own failure (5xx, 429 after queueing). `explain pvc` then explains locally.
type serverUnreachable struct{ err error }

func (e *serverUnreachable) Error() string { return e.err.Error() }
func (e *serverUnreachable) Unwrap() error { return e.err }

// pagedExplanation is one page of a claim's explanation as the server sends it.
type pagedExplanation struct {
	explain.Explanation
	Continue string `json:"continue,omitempty"`
}

// askServerClaim asks the pvguard server for the explanation of the claim namespace/name as
// the user of rc; with all, for every candidate, following the server's pages and joining
// their candidates.
func askServerClaim(ctx context.Context, o ExplainFlags, rc *rest.Config, namespace, name string, all bool) (*explain.Explanation, error) {
	path := "pvc/" + url.PathEscape(namespace) + "/" + url.PathEscape(name)
	if !all {
		e := &explain.Explanation{}
		return e, askServer(ctx, o, rc, path, e)
	}
	var out *explain.Explanation
	token := ""
	for pages := 0; ; pages++ {
		q := url.Values{candidatesParam: {candidatesAll}, limitParam: {strconv.Itoa(serverPage)}}
		if token != "" {
			q.Set(continueParam, token)
		}
		var p pagedExplanation
		if err := askServer(ctx, o, rc, path+"?"+q.Encode(), &p); err != nil {
			return nil, err
		}
		if out == nil {
			e := p.Explanation
			out = &e
		} else {
			out.Candidates = append(out.Candidates, p.Candidates...)
		}
		if p.Continue == "" {
			return out, nil
		}
		if p.Continue == token || pages >= maxServerPages {
			return nil, fmt.Errorf("the pvguard server %s: its candidate pages do not end (%d pages)", o.Server, pages+1)
		}
		token = p.Continue
	}
}

// maxServerPages bounds how many pages of candidates one explanation follows.
const maxServerPages = 10000

// askServer GETs path (below /api/v1/explain/) from the pvguard server o.Server as the user of
// rc (their bearer token, token file or exec plugin, as kubectl sends it to the apiserver), and
// decodes the explanation into v. The server answers what that user's RBAC lets them list.
// The server not answering is a *serverUnreachable.
func askServer(ctx context.Context, o ExplainFlags, rc *rest.Config, path string, v any) error {
	base, err := url.Parse(o.Server)
	if err != nil || base.Scheme != "https" || base.Host == "" {
		return badInput("--pvguard-server %q: want https://HOST[:PORT]", o.Server)
	}
	sc := rest.CopyConfig(rc)
	sc.Host, sc.APIPath = strings.TrimSuffix(o.Server, "/"), ""
	// The server's own CA, not the apiserver's; the apiserver's client certificate stays behind.
	sc.TLSClientConfig = rest.TLSClientConfig{CAFile: o.ServerCA}
	sc.Timeout = serverTimeout
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
		return &serverUnreachable{fmt.Errorf("asking the pvguard server %s: %w", o.Server, err)}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxServerAnswer))
	if err != nil {
		return &serverUnreachable{fmt.Errorf("reading the pvguard server's answer: %w", err)}
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
	switch {
	case resp.StatusCode == http.StatusBadRequest, resp.StatusCode == http.StatusNotFound:
		return badInput("%s", msg)
	case resp.StatusCode == http.StatusUnauthorized:
		return errors.New("the pvguard server takes a bearer token (a user's or a ServiceAccount's), and your kubeconfig's user has none it accepts: " + msg)
	case resp.StatusCode == http.StatusTooManyRequests, resp.StatusCode >= 500:
		return &serverUnreachable{fmt.Errorf("the pvguard server %s: HTTP %d: %s", o.Server, resp.StatusCode, msg)}
	}
	return fmt.Errorf("the pvguard server %s: HTTP %d: %s", o.Server, resp.StatusCode, msg)
}

// serverEnv and serverCAEnv name the pvguard server and its CA when the flags do not, so that a
// team that reaches its server one way sets it once.
const (
	serverEnv   = "PVGUARD_SERVER"
	serverCAEnv = "PVGUARD_SERVER_CA"
)
