package web_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/pvguard/pvguard/binder"
	"github.com/pvguard/pvguard/explain"
	"github.com/pvguard/pvguard/internal/access"
	"github.com/pvguard/pvguard/internal/web"
	"github.com/pvguard/pvguard/policy"
	. "github.com/pvguard/pvguard/test/testobj"
)

func explainOptions(objs ...client.Object) explain.ServeOptions {
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(objs...).Build()
	return explain.ServeOptions{Cache: c, Now: func() time.Time { return ExplainNow }, Log: logr.Discard()}
}

// explainAPI and explainPages are the server's explain handlers over o's explanations.
func explainAPI(o explain.ServeOptions) http.Handler {
	return web.ExplainAPIHandler(explain.NewService(o), logr.Discard())
}

func explainPages(o explain.ServeOptions) http.Handler {
	return web.ExplainPagesHandler(explain.NewService(o), logr.Discard())
}

// want is what `pvguard explain` computes from the same objects: the endpoints must answer the
// same.
func want(t *testing.T, objs []client.Object, kind, ns, name string) string {
	t.Helper()
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(objs...).Build()
	in, err := explain.ReadInput(context.Background(), c, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if kind == "pvc" {
		var e *explain.Explanation
		e, err = explain.Claim(in, ns, name)
		if e != nil {
			e.CandidatesTotal = len(e.Candidates) // the server counts them (all are listed here)
		}
		v = e
	} else {
		v, err = explain.Volume(in, name, ExplainNow)
	}
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestExplainAPI: the JSON endpoints answer what `pvguard explain -o json` prints for a claim or
// volume that exists, 404 naming an unknown one, and 400 naming a malformed name.
func TestExplainAPI(t *testing.T) {
	objs := ExplainCluster()
	h := explainAPI(explainOptions(objs...))
	for name, tc := range map[string]struct {
		path   string
		status int
		body   string // the JSON wanted, or a part of the error
	}{
		"claim":               {"/pvc/team-a/data", http.StatusOK, want(t, objs, "pvc", "team-a", "data")},
		"volume":              {"/pv/pv-fs", http.StatusOK, want(t, objs, "pv", "", "pv-fs")},
		"unknown claim":       {"/pvc/team-a/nope", http.StatusNotFound, "no such PersistentVolumeClaim team-a/nope"},
		"unknown namespace":   {"/pvc/team-z/data", http.StatusNotFound, "no such PersistentVolumeClaim team-z/data"},
		"unknown volume":      {"/pv/pv-nope", http.StatusNotFound, "no such PersistentVolume pv-nope"},
		"malformed namespace": {"/pvc/Team_A/data", http.StatusBadRequest, `namespace "Team_A" is not valid`},
		"malformed name":      {"/pvc/team-a/Data!", http.StatusBadRequest, `name "Data!" is not valid`},
		"encoded slash":       {"/pvc/team-a/a%2Fb", http.StatusBadRequest, "is not valid"},
		"malformed volume":    {"/pv/-pv", http.StatusBadRequest, `name "-pv" is not valid`},
		"no name":             {"/pvc/team-a", http.StatusNotFound, ""},
	} {
		t.Run(name, func(t *testing.T) {
			rec := HTTPGet(h, tc.path)
			if rec.Code != tc.status {
				t.Fatalf("GET %s: HTTP %d, want %d: %s", tc.path, rec.Code, tc.status, rec.Body)
			}
			if tc.body == "" {
				return
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			if cc := rec.Header().Get("Cache-Control"); cc != "no-store" {
				t.Errorf("Cache-Control %q, want no-store", cc)
			}
			if tc.status == http.StatusOK {
				var got any
				if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
					t.Fatal(err)
				}
				compact, _ := json.Marshal(got)
				var w any
				_ = json.Unmarshal([]byte(tc.body), &w)
				wantCompact, _ := json.Marshal(w)
				if string(compact) != string(wantCompact) {
					t.Errorf("GET %s:\n got %s\nwant %s", tc.path, compact, wantCompact)
				}
				return
			}
			var e struct{ Error string }
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || !strings.Contains(e.Error, tc.body) {
				t.Errorf("GET %s: error %q (%v), want it to say %q", tc.path, e.Error, err, tc.body)
			}
		})
	}
	if rec := httptest.NewRecorder(); true {
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/pvc/team-a/data", nil))
		if rec.Code != http.StatusMethodNotAllowed {
			t.Errorf("POST: HTTP %d, want 405", rec.Code)
		}
	}
}

// TestExplainAPIReadsTheBindersState: with the binder in the same process, a volume it is binding
// to another claim fails RESERVED, as the binder's plan leaves it out.
func TestExplainAPIReadsTheBindersState(t *testing.T) {
	objs := append(ExplainCluster(),
		PV("pv-block", Class("local"), Capacity("10Gi"), VolumeMode(corev1.PersistentVolumeBlock), Phase(corev1.VolumeAvailable)),
		PVC("team-b", "other", ClaimClass("local"), ClaimVolumeMode(corev1.PersistentVolumeBlock)))
	o := explainOptions(objs...)
	for name, tc := range map[string]struct {
		state    func(time.Time) (bool, binder.InFlight)
		reserved string
	}{
		"no binder": {nil, ""},
		"binding pv-block to team-b/other": {func(now time.Time) (bool, binder.InFlight) {
			return false, binder.InFlight{Reserved: map[string]types.UID{"pv-block": "uid-team-b-other"}, At: now}
		}, "bind to team-b/other in flight"},
	} {
		t.Run(name, func(t *testing.T) {
			o.PlanState = tc.state
			rec := HTTPGet(explainAPI(o), "/pvc/team-a/data")
			var e explain.Explanation
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil {
				t.Fatalf("HTTP %d: %v", rec.Code, err)
			}
			for _, c := range e.Candidates {
				if c.Volume != "pv-block" {
					continue
				}
				for _, r := range c.Checks {
					if r.Check == explain.CheckReserved && r.Value.String() != tc.reserved {
						t.Errorf("RESERVED of pv-block = %q, want %q", r.Value.String(), tc.reserved)
					}
				}
			}
		})
	}
}

// TestExplainPages: a claim's page shows the state, a column per check with the failing value,
// the other classes' line and the verdict, as `pvguard explain` prints them, escaped, under the
// dashboard's CSP; unknown and malformed objects get an error page with the API's statuses.
func TestExplainPages(t *testing.T) {
	objs := append(ExplainCluster(),
		PV("pv-<b>", Class("local"), Capacity("10Gi"), Phase(corev1.VolumeAvailable)),
		PV("pv-gone", Class("local"), ClaimRef("team-a", "old", "uid-old"), Phase(corev1.VolumeReleased)))
	h := explainPages(explainOptions(objs...))
	for name, tc := range map[string]struct {
		path   string
		status int
		want   []string
	}{
		"claim": {"/pvc/team-a/data", http.StatusOK, []string{
			`<h1 id="title">PersistentVolumeClaim team-a/data: no phase</h1>`,
			`id="state">State: `,
			`<th data-check="volumeMode">MODE</th>`,
			`<td data-check="volumeMode" class="fail">Filesystem != Block</td>`,
			`<td data-check="capacity" class="fail">1Gi &lt; 5Gi</td>`,
			`<td data-check="class" class="pass">ok</td>`,
			`pv-&lt;b&gt;`,
			`<p id="others">1 volume(s) of other classes (slow: 1)</p>`,
			`id="verdict">Verdict: no volume fits; `,
			`href="../../../"`, `href="../../../api/v1/explain/pvc/team-a/data"`,
		}},
		"volume": {"/pv/pv-gone", http.StatusOK, []string{
			`PersistentVolume pv-gone: Released`, `<a href="../pvc/team-a/old">team-a/old</a>`, `id="next"`,
			`href="../../api/v1/explain/pv/pv-gone"`,
		}},
		"unknown claim":  {"/pvc/team-a/nope", http.StatusNotFound, []string{`id="error">no such PersistentVolumeClaim team-a/nope`}},
		"unknown volume": {"/pv/pv-nope", http.StatusNotFound, []string{`id="error">no such PersistentVolume pv-nope`}},
		"malformed":      {"/pvc/team-a/%3Cscript%3E", http.StatusBadRequest, []string{`name &#34;&lt;script&gt;&#34; is not valid`}},
	} {
		t.Run(name, func(t *testing.T) {
			rec := HTTPGet(h, tc.path)
			if rec.Code != tc.status {
				t.Fatalf("GET %s: HTTP %d, want %d", tc.path, rec.Code, tc.status)
			}
			if !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") || rec.Header().Get("Cache-Control") != "no-store" ||
				!strings.Contains(rec.Header().Get("Content-Security-Policy"), "default-src 'none'") {
				t.Errorf("headers %v", rec.Header())
			}
			page := rec.Body.String()
			for _, w := range tc.want {
				if !strings.Contains(page, w) {
					t.Errorf("page lacks %q", w)
				}
			}
			for _, banned := range []string{"<script", "http://", "https://", "<b>"} {
				if strings.Contains(page, banned) {
					t.Errorf("page has %q", banned)
				}
			}
		})
	}
}

// TestExplainPageMatchesTheText: the page's state, rows and verdict are the CLI's text's.
func TestExplainPageMatchesTheText(t *testing.T) {
	objs := ExplainCluster()
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(objs...).Build()
	in, err := explain.ReadInput(context.Background(), c, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	e, err := explain.Claim(in, "team-a", "data")
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	if err := explain.WriteText(&text, e); err != nil {
		t.Fatal(err)
	}
	// As a browser shows it: the escaping undone.
	page := html.UnescapeString(HTTPGet(explainPages(explainOptions(objs...)), "/pvc/team-a/data").Body.String())
	rows, others := e.Table()
	if len(rows) != 2 || others == "" {
		t.Fatalf("rows %d, others %q: the fixture should give two rows and another class", len(rows), others)
	}
	for _, line := range []string{"State: " + e.State.String(), others, "Verdict: " + e.Verdict.Text.String()} {
		if !strings.Contains(text.String(), line) {
			t.Fatalf("the text lacks %q: the test is wrong", line)
		}
		if !strings.Contains(page, line) {
			t.Errorf("the page lacks the text's %q", line)
		}
	}
	for _, r := range rows {
		for _, res := range r.Checks {
			class := "fail"
			if res.Pass {
				class = "pass"
			}
			if cell := `<td data-check="` + string(res.Check) + `" class="` + class + `">` + res.Cell() + `</td>`; !strings.Contains(page, cell) {
				t.Errorf("the page lacks %s's cell %s", r.Volume, cell)
			}
		}
	}
}

// TestExplainAPIJudgesPairsByThePolicy: with the server's engine, the POLICY column of a pair
// that passes every other check is the engine's judgement of the binding as the binder's
// identity would write it; the binder's plan leaves a denied pair out.
func TestExplainAPIJudgesPairsByThePolicy(t *testing.T) {
	cfg, err := policy.ParseConfig([]byte("rules:\n  binder-annotations: {action: deny}\n"))
	if err != nil {
		t.Fatal(err)
	}
	objs := []client.Object{StorageClass("local", "kubernetes.io/no-provisioner"), PVC("team-a", "data", ClaimClass("local")),
		PV("pv-1", Class("local"), Phase(corev1.VolumeAvailable))}
	for name, tc := range map[string]struct {
		identity policy.UserInfo
		policy   string
		verdict  string
	}{
		"a binder policy does not list as a controller": {policy.UserInfo{Username: "system:serviceaccount:x:binder"}, "PVG013: ", "no volume fits; pv-1 fits if policy allows the pair"},
		"upstream's binder, a built-in controller":      {binder.UpstreamBinderIdentity, "", "the binder takes pv-1"},
	} {
		t.Run(name, func(t *testing.T) {
			o := explainOptions(objs...)
			o.Engine, o.Identity = func() *policy.Engine { return policy.NewEngine(cfg) }, tc.identity
			rec := HTTPGet(explainAPI(o), "/pvc/team-a/data")
			var e explain.Explanation
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil {
				t.Fatalf("HTTP %d: %v", rec.Code, err)
			}
			got := e.Candidates[0].Checks[len(e.Candidates[0].Checks)-1]
			if got.Check != explain.CheckPolicy || !strings.HasPrefix(got.Value.String(), tc.policy) || (tc.policy == "") != got.Pass {
				t.Errorf("POLICY %+v, want %q", got, tc.policy)
			}
			if !strings.HasPrefix(e.Verdict.Text.String(), tc.verdict) {
				t.Errorf("verdict %q, want %q", e.Verdict.Text.String(), tc.verdict)
			}
		})
	}
}

// TestExplainAPIListsTheClosestAndPagesTheRest: the API lists the 10 closest candidates and
// counts the rest by the first check each fails; with candidates=all it pages through every
// candidate, in the CLI's order, and refuses a query it cannot read.
func TestExplainAPIListsTheClosestAndPagesTheRest(t *testing.T) {
	objs := []client.Object{StorageClass("local", "kubernetes.io/no-provisioner"),
		PVC("team-a", "data", ClaimClass("local"), Request("5Gi"))}
	for i := range 25 {
		size, class := fmt.Sprintf("%dGi", 1+i%4), "local"
		if i%3 == 0 {
			class = "slow"
		}
		objs = append(objs, PV(fmt.Sprintf("pv-%02d", i), Class(class), Capacity(size), Phase(corev1.VolumeAvailable)))
	}
	var cli explain.Explanation
	if err := json.Unmarshal([]byte(want(t, objs, "pvc", "team-a", "data")), &cli); err != nil {
		t.Fatal(err)
	}
	h := explainAPI(explainOptions(objs...))
	get := func(path string) (explain.Explanation, int) {
		rec := HTTPGet(h, path)
		var e explain.Explanation
		if rec.Code == http.StatusOK {
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil {
				t.Fatal(err)
			}
		}
		return e, rec.Code
	}
	e, code := get("/pvc/team-a/data")
	if code != http.StatusOK || e.CandidatesTotal != 25 || !reflect.DeepEqual(e.Candidates, cli.Candidates[:10]) {
		t.Fatalf("HTTP %d, %d of %d candidates, want the CLI's 10 closest of 25", code, len(e.Candidates), e.CandidatesTotal)
	}
	if e.Verdict.Text.String() != cli.Verdict.Text.String() {
		t.Errorf("verdict %q, want the CLI's %q", e.Verdict.Text, cli.Verdict.Text)
	}
	counted := map[string]int{}
	for _, c := range cli.Candidates[10:] {
		why := "fits"
		if f := c.Failed(); len(f) > 0 {
			why = string(f[0].Check)
		}
		counted[why]++
	}
	got := map[string]int{}
	for _, g := range e.Others {
		got[g.Failing] = g.Count
	}
	if !reflect.DeepEqual(got, counted) {
		t.Errorf("others %v, want %v", got, counted)
	}
	var all []explain.Candidate
	path, pages := "/pvc/team-a/data?candidates=all&limit=7", 0
	for {
		e, code := get(path)
		if code != http.StatusOK || len(e.Others) != 0 || e.CandidatesTotal != 25 {
			t.Fatalf("GET %s: HTTP %d, others %v, total %d", path, code, e.Others, e.CandidatesTotal)
		}
		all, pages = append(all, e.Candidates...), pages+1
		if e.Continue == "" {
			break
		}
		path = "/pvc/team-a/data?candidates=all&limit=7&continue=" + e.Continue
	}
	if pages != 4 || !reflect.DeepEqual(all, cli.Candidates) {
		t.Errorf("%d pages of %d candidates, want 4 pages of the CLI's 25 in its order", pages, len(all))
	}
	for _, q := range []string{"?candidates=some", "?limit=5", "?candidates=all&limit=0", "?candidates=all&limit=5001",
		"?candidates=all&continue=xyz", "?candidates=all&continue=by0x" /* "o-1" */} {
		if _, code := get("/pvc/team-a/data" + q); code != http.StatusBadRequest {
			t.Errorf("GET %s: HTTP %d, want 400", q, code)
		}
	}
}

// TestExplainAPIReadsOnePlan: with the server's Plans, eight callers asking at once and again
// are all answered from one read and plan of the cache, each answer the one a plan of its own
// would give.
func TestExplainAPIReadsOnePlan(t *testing.T) {
	objs := ExplainCluster()
	var lists atomic.Int32
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(objs...).
		WithInterceptorFuncs(interceptor.Funcs{List: func(ctx context.Context, cl client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*corev1.PersistentVolumeList); ok {
				lists.Add(1)
			}
			return cl.List(ctx, list, opts...)
		}}).Build()
	o := explain.ServeOptions{Cache: c, Now: func() time.Time { return ExplainNow }, Log: logr.Discard()}
	o.Plans = explain.NewPlans(o, explain.PlansOptions{})
	h := explainAPI(o)
	var solo explain.Explanation
	if err := json.Unmarshal([]byte(want(t, objs, "pvc", "team-a", "data")), &solo); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 8*5)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				rec := HTTPGet(h, "/pvc/team-a/data")
				var e explain.Explanation
				if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &e) != nil || !reflect.DeepEqual(e.Verdict, solo.Verdict) || !reflect.DeepEqual(e.Candidates, solo.Candidates) {
					errs <- fmt.Sprintf("HTTP %d: %s", rec.Code, rec.Body)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if n := lists.Load(); n != 1 {
		t.Errorf("%d reads of the cache for 40 questions, want 1", n)
	}
}

// TestVolumePageLinksItsClaimOnlyForTheClaimsReaders: the page of a volume whose claim was deleted
// and re-created names neither the claim nor its uids to a caller who may list volumes but not
// that namespace's claims, saying a claim is hidden, and links the claim for the claim's readers
// (explain's TestVolumeExplanationNamesItsClaimOnlyToTheClaimsReaders holds the JSON to the same).
func TestVolumePageLinksItsClaimOnlyForTheClaimsReaders(t *testing.T) {
	objs := []client.Object{
		PVC("team-b", "x", ClaimUID("uid-new-x"), ClaimBoundTo("pv-b")),
		PV("pv-b", Capacity("10Gi"), ClaimRef("team-b", "x", "uid-old-x"), Phase(corev1.VolumeBound)),
	}
	pages := explainPages(explainOptions(objs...))
	volumes := access.NewReader("carol", false, []string{"team-a"}, true, true)
	page := HTTPGetAs(volumes, pages, "/pv/pv-b").Body.String()
	if strings.Contains(page, "team-b") || strings.Contains(page, "uid-") || !strings.Contains(page, `<dd id="claim">`+policy.HiddenClaim+` (bound)</dd>`) {
		t.Errorf("the page for a reader of volumes only names the claim, or does not say a claim is hidden: %s", page)
	}
	owner := access.NewReader("bob", false, []string{"team-b"}, false, false)
	if page := HTTPGetAs(owner, pages, "/pv/pv-b").Body.String(); !strings.Contains(page, `<a href="../pvc/team-b/x">team-b/x</a>`) {
		t.Errorf("the page does not link the claim for its reader: %s", page)
	}
}

// TestExplainAsksToRetryBeforeTheFirstPlan: a question asked before the server's first plan of
// the pool, past the wait for it, is a 503 whose JSON says to ask again and whose Retry-After
// says when (the CLI and the benchmark's callers wait that long), and an error page; a cache
// that fails is the server's fault, a 500 naming the object.
func TestExplainAsksToRetryBeforeTheFirstPlan(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(ExplainCluster()...).
		WithInterceptorFuncs(interceptor.Funcs{List: func(ctx context.Context, cl client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			<-release // the first plan's read hangs
			return cl.List(ctx, list, opts...)
		}}).Build()
	o := explain.ServeOptions{Cache: c, Now: time.Now, Log: logr.Discard()}
	o.Plans = explain.NewPlans(o, explain.PlansOptions{FirstWait: 50 * time.Millisecond})
	rec := HTTPGet(explainAPI(o), "/pvc/team-a/data")
	var e struct{ Error string }
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") != "5" ||
		json.Unmarshal(rec.Body.Bytes(), &e) != nil || !strings.Contains(e.Error, "ask again in a few seconds") {
		t.Errorf("before the first plan: HTTP %d, Retry-After %q: %s; want 503, 5, ask again", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
	rec = HTTPGet(explainPages(o), "/pvc/team-a/data")
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), `id="error">the pool&#39;s first plan is still being made`) {
		t.Errorf("the page before the first plan: HTTP %d: %s", rec.Code, rec.Body)
	}

	failing := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(ExplainCluster()...).
		WithInterceptorFuncs(interceptor.Funcs{List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
			return errors.New("the cache is gone")
		}}).Build()
	o = explain.ServeOptions{Cache: failing, Now: time.Now, Log: logr.Discard()}
	for path, w := range map[string]string{"/pvc/team-a/data": "explaining PersistentVolumeClaim team-a/data: ", "/pv/pv-fs": "explaining PersistentVolume pv-fs: "} {
		rec := HTTPGet(explainAPI(o), path)
		if rec.Code != http.StatusInternalServerError || rec.Header().Get("Retry-After") != "" ||
			json.Unmarshal(rec.Body.Bytes(), &e) != nil || !strings.HasPrefix(e.Error, w) || !strings.Contains(e.Error, "the cache is gone") {
			t.Errorf("GET %s with a failing cache: HTTP %d: %s; want 500 %q", path, rec.Code, rec.Body, w)
		}
	}
}

// TestAQuestionWaitingForItsPlanHoldsUpNoOneElse: explanations are computed one at a time, but a
// question that waits for a plan of the pool (its caller just changed the claim, and the next plan
// is far off) does not hold that turn: another caller's question about an unchanged claim is
// answered while the first still waits. Otherwise a tenant who keeps changing their own claim and
// asking about it would keep every other caller's explanations waiting.
func TestAQuestionWaitingForItsPlanHoldsUpNoOneElse(t *testing.T) {
	objs := append(ExplainCluster(), PVC("team-b", "other", ClaimClass("local"), Request("1Gi")))
	waiting := make(chan struct{}, 1)
	var changed atomic.Bool
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(objs...).
		WithInterceptorFuncs(interceptor.Funcs{Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			err := cl.Get(ctx, key, obj, opts...)
			if key.Name == "data" && changed.Load() {
				select { // the tenant's question read its changed claim: it now waits for a plan
				case waiting <- struct{}{}:
				default:
				}
			}
			return err
		}}).Build()
	reg := prometheus.NewRegistry()
	o := explain.ServeOptions{Cache: c, Now: time.Now, Log: logr.Discard(), Registry: reg}
	// No plan is made again for an hour, and a question about a changed claim waits a minute.
	o.Plans = explain.NewPlans(o, explain.PlansOptions{MinInterval: time.Hour, FreshWait: time.Minute})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := o.Plans.Start(ctx); err != nil {
		t.Fatal(err)
	}
	h := web.NewServer(web.Options{ExplainAPI: explainAPI(o), Access: testGuard(), Registry: reg}).Handler()
	get := func(ctx context.Context, token, path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		req := httptest.NewRequestWithContext(ctx, http.MethodGet, web.PathExplainAPI+path, nil)
		h.ServeHTTP(rec, withToken(req, token))
		return rec
	}

	var claim corev1.PersistentVolumeClaim
	if err := c.Get(ctx, types.NamespacedName{Namespace: "team-a", Name: "data"}, &claim); err != nil {
		t.Fatal(err)
	}
	claim.Labels = map[string]string{"changed": "yes"}
	if err := c.Update(ctx, &claim); err != nil {
		t.Fatal(err)
	}
	changed.Store(true)
	tenantCtx, stopTenant := context.WithCancel(ctx)
	tenantDone := make(chan int, 1)
	go func() { tenantDone <- get(tenantCtx, "tenant-token", "/pvc/team-a/data").Code }()
	<-waiting

	// Bounded only so that a failing build ends; the answer needs no plan.
	otherCtx, stop := context.WithTimeout(ctx, 20*time.Second)
	defer stop()
	rec := get(otherCtx, "admin-token", "/pvc/team-b/other")
	select {
	case code := <-tenantDone:
		t.Fatalf("the tenant's question ended (HTTP %d) before the other caller's was answered", code)
	default:
	}
	if rec.Code != http.StatusOK {
		t.Errorf("another caller's question while the tenant's waits for a plan: HTTP %d, want 200: %s", rec.Code, rec.Body)
	}
	stopTenant()
	<-tenantDone
	// The answered question is timed, and its waits for the plan and the turn are recorded.
	for _, m := range []struct {
		name   string
		labels map[string]string
	}{
		{"pvguard_explain_request_duration_seconds", map[string]string{"handler": "api", "code": "200"}},
		{"pvguard_explain_wait_seconds", map[string]string{"for": "plan"}},
		{"pvguard_explain_wait_seconds", map[string]string{"for": "turn"}},
	} {
		if n := Metric(t, reg, m.name, m.labels).GetHistogram().GetSampleCount(); n != 1 {
			t.Errorf("%s%v observed %d times, want 1", m.name, m.labels, n)
		}
	}
}

// TestExplainAsksToRetryWhenBusy: a question that waited its turn past the service's wait (here
// a millisecond, while another is computed) is a 429 whose Retry-After says when to ask again,
// as JSON and as a page.
func TestExplainAsksToRetryWhenBusy(t *testing.T) {
	computing, release := make(chan struct{}), make(chan struct{})
	var lists atomic.Int32
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(ExplainCluster()...).
		WithInterceptorFuncs(interceptor.Funcs{List: func(ctx context.Context, cl client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*corev1.PersistentVolumeList); ok && lists.Add(1) == 1 {
				close(computing)
				<-release // the first question keeps its turn
			}
			return cl.List(ctx, list, opts...)
		}}).Build()
	o := explain.ServeOptions{Cache: c, Now: time.Now, Log: logr.Discard(), BacklogWait: time.Millisecond}
	x := explain.NewService(o)
	api, pages := web.ExplainAPIHandler(x, logr.Discard()), web.ExplainPagesHandler(x, logr.Discard())
	first := make(chan int, 1)
	go func() { first <- HTTPGet(api, "/pv/pv-fs").Code }()
	<-computing
	rec := HTTPGet(api, "/pv/pv-small")
	var e struct{ Error string }
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "1" ||
		json.Unmarshal(rec.Body.Bytes(), &e) != nil || !strings.Contains(e.Error, "ask again in a moment") {
		t.Errorf("while another question is computed: HTTP %d, Retry-After %q: %s; want 429, 1, ask again", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
	rec = HTTPGet(pages, "/pvc/team-a/data")
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "1" || !strings.Contains(rec.Body.String(), `id="error">the server is computing other explanations`) {
		t.Errorf("the page while another question is computed: HTTP %d, Retry-After %q: %s", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
	close(release)
	if code := <-first; code != http.StatusOK {
		t.Errorf("the question that had the turn: HTTP %d, want 200", code)
	}
}

// TestExplanationsRunOneAtATime: an explanation checks every volume, so the pages and the API
// share one turn; the others wait for it rather than run beside it.
func TestExplanationsRunOneAtATime(t *testing.T) {
	var running, most atomic.Int32
	release := make(chan struct{})
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(ExplainCluster()...).
		WithInterceptorFuncs(interceptor.Funcs{List: func(ctx context.Context, cl client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*corev1.PersistentVolumeList); ok {
				n := running.Add(1)
				defer running.Add(-1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				<-release
			}
			return cl.List(ctx, list, opts...)
		}}).Build()
	x := explain.NewService(explain.ServeOptions{Cache: c, Now: time.Now, Log: logr.Discard()})
	h := web.NewServer(web.Options{ExplainAPI: web.ExplainAPIHandler(x, logr.Discard()),
		ExplainPages: web.ExplainPagesHandler(x, logr.Discard()), Access: testGuard()}).Handler()
	paths := []string{web.PathExplainAPI + "/pvc/team-a/data", web.PathExplainPages + "/pvc/team-a/data", web.PathExplainAPI + "/pv/pv-fs"}
	codes := make(chan int, len(paths))
	for _, p := range paths {
		go func() {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, withToken(httptest.NewRequest(http.MethodGet, p, nil), "admin-token"))
			codes <- rec.Code
		}()
	}
	time.Sleep(200 * time.Millisecond) // all three have arrived; one runs, two wait
	close(release)
	for range paths {
		if code := <-codes; code != http.StatusOK {
			t.Errorf("HTTP %d, want 200 after waiting", code)
		}
	}
	if m := most.Load(); m != 1 {
		t.Errorf("%d explanations ran at once, want 1", m)
	}
}
