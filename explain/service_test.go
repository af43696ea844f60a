package explain_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/pvguard/pvguard/explain"
	"github.com/pvguard/pvguard/internal/access"
	. "github.com/pvguard/pvguard/test/testobj"
)

func explainOptions(objs ...client.Object) explain.ServeOptions {
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(objs...).Build()
	return explain.ServeOptions{Cache: c, Now: func() time.Time { return ExplainNow }, Log: logr.Discard()}
}

// want is what `pvguard explain` computes for claim ns/name from the same objects, as JSON: the
// server must answer the same.
func want(t *testing.T, objs []client.Object, ns, name string) string {
	t.Helper()
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(objs...).Build()
	in, err := explain.ReadInput(context.Background(), c, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	e, err := explain.Claim(in, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	e.CandidatesTotal = len(e.Candidates) // the server counts them (all are listed here)
	return asJSON(t, e)
}

// asJSON is v as the server's API writes it (internal/web) and `pvguard explain -o json` prints it.
func asJSON(t *testing.T, v any) string {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// ask is the explanation of claim ns/name x gives a cluster reader, as its caller reads it from
// the JSON.
func ask(t *testing.T, x *explain.Service, ns, name string) explain.Explanation {
	t.Helper()
	e, err := x.Claim(context.Background(), access.Everything("admin"), ns, name, explain.CandidatePage{})
	if err != nil {
		t.Fatalf("%s/%s: %v", ns, name, err)
	}
	var got explain.Explanation
	if err := json.Unmarshal([]byte(asJSON(t, e)), &got); err != nil {
		t.Fatal(err)
	}
	return got
}

// kindOf names which of the Service's errors err is, so that a table can say which it wants.
func kindOf(err error) string {
	var (
		invalid   *explain.InvalidNameError
		forbidden *explain.ForbiddenError
		notReady  *explain.NotReadyError
	)
	switch {
	case err == nil:
		return "none"
	case errors.As(err, &invalid):
		return "invalid " + invalid.Field
	case errors.As(err, &forbidden):
		return "forbidden to " + forbidden.User + " in " + forbidden.Namespace
	case errors.Is(err, explain.ErrUnknownClaim):
		return "unknown claim"
	case errors.Is(err, explain.ErrUnknownVolume):
		return "unknown volume"
	case errors.As(err, &notReady):
		return "not ready, retry after " + notReady.RetryAfter.String()
	}
	return "other: " + err.Error()
}

// TestServiceSaysWhyItCannotAnswer: the Service answers a claim and a volume that exist as
// `pvguard explain` does, and says with a typed error why it cannot answer the others: a name no
// object can have, a namespace whose claims the caller may not list, an object that does not
// exist, a volume the caller may not read (as one that does not exist), a question asked before
// the first plan was made (with when to ask again).
func TestServiceSaysWhyItCannotAnswer(t *testing.T) {
	objs := ExplainCluster()
	x := explain.NewService(explainOptions(objs...))
	admin := access.Everything("admin")
	tenant := access.NewReader("alice", false, []string{"team-a"}, false, false)
	ctx := context.Background()
	claim := func(rd *access.Reader, ns, name string) func() (any, error) {
		return func() (any, error) { return x.Claim(ctx, rd, ns, name, explain.CandidatePage{}) }
	}
	volume := func(rd *access.Reader, name string) func() (any, error) {
		return func() (any, error) { return x.Volume(ctx, rd, name) }
	}
	for name, tc := range map[string]struct {
		ask  func() (any, error)
		want string
	}{
		"claim":                     {claim(admin, "team-a", "data"), "none"},
		"the tenant's claim":        {claim(tenant, "team-a", "data"), "none"},
		"volume":                    {volume(admin, "pv-fs"), "none"},
		"malformed namespace":       {claim(admin, "Team_A", "data"), "invalid namespace"},
		"malformed name":            {claim(admin, "team-a", "Data!"), "invalid name"},
		"malformed volume":          {volume(admin, "-pv"), "invalid name"},
		"another tenant's claim":    {claim(tenant, "team-b", "data"), "forbidden to alice in team-b"},
		"unknown claim":             {claim(admin, "team-a", "nope"), "unknown claim"},
		"unknown volume":            {volume(admin, "pv-nope"), "unknown volume"},
		"a volume it may not read":  {volume(tenant, "pv-fs"), "unknown volume"},
		"a page without a limit":    {func() (any, error) { return x.Claim(ctx, admin, "team-a", "data", explain.CandidatePage{All: true}) }, "other: candidates {All:true Offset:0 Limit:0}: want a limit of 1 or more from an offset of 0 or more"},
		"a malformed name, first":   {claim(tenant, "team-b", "Data!"), "invalid name"},
		"an unknown claim, allowed": {claim(tenant, "team-a", "nope"), "unknown claim"},
	} {
		t.Run(name, func(t *testing.T) {
			v, err := tc.ask()
			if got := kindOf(err); got != tc.want {
				t.Fatalf("error %q, want %s", got, tc.want)
			}
			if err == nil && v == nil {
				t.Fatal("no explanation and no error")
			}
		})
	}
	if got, w := asJSON(t, ask(t, x, "team-a", "data")), want(t, objs, "team-a", "data"); got != w {
		t.Errorf("the Service's explanation:\n%s\nwant the CLI's:\n%s", got, w)
	}

	// Before the first plan: the cache's first read hangs past FirstWait.
	release := make(chan struct{})
	defer close(release)
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(objs...).
		WithInterceptorFuncs(interceptor.Funcs{List: func(ctx context.Context, cl client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			<-release
			return cl.List(ctx, list, opts...)
		}}).Build()
	o := explain.ServeOptions{Cache: c, Now: time.Now, Log: logr.Discard()}
	o.Plans = explain.NewPlans(o, explain.PlansOptions{FirstWait: 50 * time.Millisecond})
	_, err := explain.NewService(o).Claim(ctx, admin, "team-a", "data", explain.CandidatePage{})
	if got := kindOf(err); got != "not ready, retry after 5s" {
		t.Errorf("before the first plan: error %q, want not ready, retry after 5s", got)
	}
}

// TestContinueOffsetReadsTheTokensItGives: a page's token reads back as its offset; anything else
// is no token.
func TestContinueOffsetReadsTheTokensItGives(t *testing.T) {
	objs := []client.Object{StorageClass("local", "kubernetes.io/no-provisioner"), PVC("team-a", "data", ClaimClass("local"))}
	for _, name := range []string{"pv-1", "pv-2", "pv-3"} {
		objs = append(objs, PV(name, Class("local"), Phase(corev1.VolumeAvailable)))
	}
	x := explain.NewService(explainOptions(objs...))
	e, err := x.Claim(context.Background(), access.Everything("admin"), "team-a", "data", explain.CandidatePage{All: true, Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if n, ok := explain.ContinueOffset(e.Continue); !ok || n != 2 || len(e.Candidates) != 2 {
		t.Errorf("%d candidates, token %q reads as %d (%v), want 2 and offset 2", len(e.Candidates), e.Continue, n, ok)
	}
	for _, tok := range []string{"", "xyz", "by0x" /* "o-1" */, "bw" /* "o" */, "cDI" /* "p2" */} {
		if n, ok := explain.ContinueOffset(tok); ok {
			t.Errorf("token %q reads as offset %d", tok, n)
		}
	}
}
