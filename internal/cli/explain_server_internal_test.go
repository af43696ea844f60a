package cli

import (
	"bytes"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pvguard/pvguard/explain"
)

// nowhereKubeconfig is a kubeconfig whose apiserver refuses connections, with a bearer token:
// an explanation that reaches it was made locally.
const nowhereKubeconfig = `apiVersion: v1
kind: Config
current-context: a
clusters:
- name: nowhere
  cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}
users:
- name: alice
  user: {token: alice-token}
contexts:
- name: a
  context: {cluster: nowhere, user: alice, namespace: team-a}
`

// pvguardServer serves handler over TLS and returns flags that name it (and its CA) with a
// kubeconfig whose apiserver cannot be reached.
func pvguardServer(t *testing.T, handler http.HandlerFunc) (ExplainFlags, *httptest.Server) {
	t.Helper()
	srv := httptest.NewTLSServer(handler)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	kc := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kc, []byte(nowhereKubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	return ExplainFlags{Kubeconfig: kc, Output: "json", Server: srv.URL, ServerCA: ca}, srv
}

func writeAnswer(t *testing.T, w http.ResponseWriter, v any) {
	t.Helper()
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(v); err != nil {
		t.Error(err)
	}
}

// TestExplainClaimPrefersTheServer: with a server named, `explain pvc` prints the server's answer,
// asked as the kubeconfig's user, and reads nothing of the cluster itself (whose apiserver here
// cannot be reached).
func TestExplainClaimPrefersTheServer(t *testing.T) {
	o, _ := pvguardServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/explain/pvc/team-a/data" || r.Header.Get("Authorization") != "Bearer alice-token" {
			http.Error(w, "unexpected request "+r.URL.Path+" as "+r.Header.Get("Authorization"), http.StatusBadRequest)
			return
		}
		writeAnswer(t, w, explain.Explanation{Claim: "team-a/data", WaitingFor: explain.WaitingForNothing,
			Candidates: []explain.Candidate{{Volume: "pv-from-server"}}})
	})
	var out, errOut bytes.Buffer
	if err := RunExplainClaim(o, "data", &out, &errOut); err != nil {
		t.Fatalf("%v (stderr %q)", err, errOut.String())
	}
	var e explain.Explanation
	if err := json.Unmarshal(out.Bytes(), &e); err != nil {
		t.Fatal(err)
	}
	if e.Claim != "team-a/data" || len(e.Candidates) != 1 || e.Candidates[0].Volume != "pv-from-server" {
		t.Errorf("printed %s, want the server's answer", out.String())
	}
	if errOut.Len() != 0 {
		t.Errorf("stderr %q, want nothing", errOut.String())
	}
}

// TestExplainClaimFollowsTheServersPages: --all-candidates asks for every candidate and follows
// the server's continue tokens, joining the pages' candidates in order.
func TestExplainClaimFollowsTheServersPages(t *testing.T) {
	pages := map[string]struct{ volume, next string }{"": {"pv-a", "t1"}, "t1": {"pv-b", "t2"}, "t2": {"pv-c", ""}}
	asked := 0
	o, _ := pvguardServer(t, func(w http.ResponseWriter, r *http.Request) {
		asked++
		q := r.URL.Query()
		p, ok := pages[q.Get(continueParam)]
		if q.Get(candidatesParam) != candidatesAll || q.Get(limitParam) != "5000" || !ok {
			http.Error(w, "unexpected query "+r.URL.RawQuery, http.StatusBadRequest)
			return
		}
		writeAnswer(t, w, pagedExplanation{Explanation: explain.Explanation{Claim: "team-a/data",
			Candidates: []explain.Candidate{{Volume: p.volume}}}, Continue: p.next})
	})
	o.AllCandidates = true
	var out, errOut bytes.Buffer
	if err := RunExplainClaim(o, "team-a/data", &out, &errOut); err != nil {
		t.Fatalf("%v (stderr %q)", err, errOut.String())
	}
	var e explain.Explanation
	if err := json.Unmarshal(out.Bytes(), &e); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range e.Candidates {
		got = append(got, c.Volume)
	}
	if strings.Join(got, ",") != "pv-a,pv-b,pv-c" || asked != 3 {
		t.Errorf("candidates %v after %d requests, want pv-a,pv-b,pv-c after 3", got, asked)
	}
}

// TestExplainClaimFallsBackWhenTheServerIsDown: a server that fails, is overloaded or is gone
// leaves `explain pvc` to the caller's own reads, said on stderr (the apiserver here refuses
// connections, so the local read's error shows it was tried); a server's answer that the claim
// does not exist is final.
func TestExplainClaimFallsBackWhenTheServerIsDown(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int // 0: the server is closed
	}{{"unavailable", http.StatusServiceUnavailable}, {"overloaded", http.StatusTooManyRequests}, {"gone", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			o, srv := pvguardServer(t, func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
				writeAnswer(t, w, map[string]string{"error": "busy"})
			})
			if tc.status == 0 {
				srv.Close()
			}
			var out, errOut bytes.Buffer
			err := RunExplainClaim(o, "data", &out, &errOut)
			if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
				t.Errorf("err %v, want the local read of the apiserver at 127.0.0.1:1 failing", err)
			}
			if !strings.Contains(errOut.String(), "explaining from your own reads") {
				t.Errorf("stderr %q does not say the explanation is made locally", errOut.String())
			}
		})
	}
	t.Run("not found", func(t *testing.T) {
		o, _ := pvguardServer(t, func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusNotFound)
			writeAnswer(t, w, map[string]string{"error": "no such PersistentVolumeClaim team-a/data"})
		})
		var out, errOut bytes.Buffer
		err := RunExplainClaim(o, "data", &out, &errOut)
		var ee *ExitError
		if !errors.As(err, &ee) || ee.Code != ExitBadInput || errOut.Len() != 0 {
			t.Errorf("err %v, stderr %q: want exit 2 from the server's answer and no local read", err, errOut.String())
		}
	})
}

// TestCompactCandidates: without --all-candidates a local explanation shows the closest rows and
// counts the others by the check each fails first.
func TestCompactCandidates(t *testing.T) {
	row := func(name string, failed ...explain.Check) explain.Candidate {
		c := explain.Candidate{Volume: name, Fits: len(failed) == 0}
		for _, ch := range explain.Checks {
			c.Checks = append(c.Checks, explain.Result{Check: ch, Pass: !contains(failed, ch)})
		}
		return c
	}
	e := &explain.Explanation{Candidates: []explain.Candidate{row("a"), row("b", explain.CheckCapacity),
		row("c", explain.CheckCapacity, explain.CheckPhase), row("d", explain.CheckClass), row("e", explain.CheckPhase)}}
	note := compactCandidates(e, 2)
	if len(e.Candidates) != 2 || e.Candidates[1].Volume != "b" {
		t.Errorf("kept %v, want a and b", e.Candidates)
	}
	if want := "3 more candidate volume(s) not shown (--all-candidates shows them): 1 fail class, 1 fail capacity, 1 fail phase."; note != want {
		t.Errorf("note %q, want %q", note, want)
	}
	if note := compactCandidates(e, 2); note != "" {
		t.Errorf("nothing left out, but the note says %q", note)
	}
}

func contains(checks []explain.Check, c explain.Check) bool {
	for _, x := range checks {
		if x == c {
			return true
		}
	}
	return false
}
