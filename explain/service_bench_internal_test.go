package explain

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/binder"
	"github.com/pvguard/pvguard/clusterstate"
	"github.com/pvguard/pvguard/internal/access"
	"github.com/pvguard/pvguard/policy"
)

// stateReader is a client.Reader over a state, as the informer cache is to the server: a Get of
// a claim hands out the state's object without a copy (client.UnsafeDisableDeepCopy).
type stateReader struct{ s *clusterstate.State }

func (r stateReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	c, ok := obj.(*corev1.PersistentVolumeClaim)
	if !ok {
		return fmt.Errorf("stateReader reads claims only, not %T", obj)
	}
	got, _ := r.s.PersistentVolumeClaim(key.Namespace, key.Name)
	if got == nil {
		return fmt.Errorf("claim %s not found", key)
	}
	*c = *got
	return nil
}

func (stateReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return fmt.Errorf("stateReader lists nothing")
}

// servedFromPlan is the server's Service over in, its plan made (the server's one plan of the
// pool, before any question), each pair judged by engine as the upstream binder's user.
func servedFromPlan(in Input, engine *policy.Engine) *Service {
	x := indexInput(in)
	o := ServeOptions{Cache: stateReader{in.State}, Engine: func() *policy.Engine { return engine },
		Identity: binder.UpstreamBinderIdentity, Now: func() time.Time { return in.Now }}
	o.Plans = NewPlans(o, PlansOptions{})
	o.Plans.reads, o.Plans.cur = 1, snapshotOf(x, planPool(x, in.InFlight), 1, nil)
	return NewService(o)
}

// TestReadersOfOnePlanReadTheirOwnVolumes: readers of different rights asking in turn of one
// plan (which keeps the volumes each reads) are each answered as if they asked first, of a plan
// of their own: no reader is shown what another may read.
func TestReadersOfOnePlanReadTheirOwnVolumes(t *testing.T) {
	in := Input{State: synthetic(3, 300, 60), NodesListed: true}
	in.State = withUIDs(in.state())
	// Some free volumes granted to a namespace, and so read by its tenants.
	volumes := in.State.Volumes()
	for i, v := range volumes {
		if v.Spec.ClaimRef == nil && i%3 == 0 {
			v = v.DeepCopy()
			v.Annotations = map[string]string{policy.DefaultGrantAnnotation: fmt.Sprintf("ns-%02d", i%4)}
			volumes[i] = v
		}
	}
	in.State = clusterstate.New(in.State.Claims(), volumes, in.State.Classes(), in.State.Nodes())
	readers := []*access.Reader{
		access.NewReader("a", false, []string{"ns-00", "ns-01"}, false, true),
		access.NewReader("b", false, []string{"ns-00", "ns-02"}, false, true),
		access.NewReader("c", false, []string{"ns-00"}, false, false),
		access.NewReader("d", false, []string{"ns-00", "ns-01"}, true, true),
		access.NewReader("e", true, nil, false, true),
		access.Everything("f"),
	}
	engine := policy.NewEngine(nil)
	shared := servedFromPlan(in, engine)
	ctx := context.Background()
	asked := 0
	for _, c := range pendingClaims(in.State) {
		if c.Namespace != "ns-00" {
			continue
		}
		for _, rd := range readers {
			got, err := shared.Claim(ctx, rd, c.Namespace, c.Name, CandidatePage{All: true, Limit: 1000})
			if err != nil {
				t.Fatal(err)
			}
			want, err := servedFromPlan(in, engine).Claim(ctx, rd, c.Namespace, c.Name, CandidatePage{All: true, Limit: 1000})
			if err != nil {
				t.Fatal(err)
			}
			gj, _ := json.Marshal(got)
			wj, _ := json.Marshal(want)
			if !bytes.Equal(gj, wj) {
				t.Fatalf("claim %s/%s as %s, after the others asked:\n%s\nasking first:\n%s", c.Namespace, c.Name, rd.User, gj, wj)
			}
			asked++
		}
	}
	if asked == 0 {
		t.Fatal("no claim asked of")
	}
}

// benchmarkServiceClaim is one explanation of a Pending claim (each in turn) as the server
// answers GET /pvc/{namespace}/{name}: through Service.Claim, from the one plan of the pool the
// server keeps (made and indexed before the timer), each pair judged by the shipped policy
// engine as the upstream binder's user, for the reader rd, encoded as the handler encodes it
// (internal/web: indented, HTML not escaped). A reader who may not list every namespace's claims
// asks about the claims of the namespaces they may. It reports the CPU per answer and the
// largest answer's bytes.
func benchmarkServiceClaim(b *testing.B, pairs, immediate int, rd *access.Reader) {
	in := Input{State: syntheticClasses(1, pairs, pairs/10, immediate), NodesListed: true}
	in.State = scattered(withUIDs(in.state()))
	s := servedFromPlan(in, policy.NewEngine(nil))
	var asked []*corev1.PersistentVolumeClaim
	for _, c := range pendingClaims(in.State) {
		if rd.Claims(c.Namespace) {
			asked = append(asked, c)
		}
	}
	ctx := context.Background()
	var buf bytes.Buffer
	size := 0
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	for i := range b.N {
		c := asked[i%len(asked)]
		e, err := s.Claim(ctx, rd, c.Namespace, c.Name, CandidatePage{})
		if err != nil {
			b.Fatal(err)
		}
		buf.Reset()
		enc := json.NewEncoder(&buf)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		if err := enc.Encode(e); err != nil {
			b.Fatal(err)
		}
		size = max(size, buf.Len())
	}
	b.ReportMetric(float64(size), "max-answer-bytes")
	reportCPU(b, cpu0)
}

// serviceReaders are the readers the Service benchmarks ask as: one who may read everything,
// and a tenant who may list the claims of one namespace only (and classes), to whom most
// volumes are hidden. The state's Immediate claims and volumes are spread over immediate classes
// (syntheticClasses).
func serviceReaders(b *testing.B, pairs, immediate int) {
	b.Run("everything", func(b *testing.B) { benchmarkServiceClaim(b, pairs, immediate, access.Everything("admin")) })
	b.Run("tenant", func(b *testing.B) {
		benchmarkServiceClaim(b, pairs, immediate, access.NewReader("tenant", false, []string{"ns-07"}, false, true))
	})
}

func BenchmarkServiceClaim10k(b *testing.B)           { serviceReaders(b, 10000, 1) }
func BenchmarkServiceClaim100kScattered(b *testing.B) { serviceReaders(b, 100000, 1) }

// BenchmarkServiceClaimClasses10k and BenchmarkServiceClaimClasses100k are the benchmarks above
// on a state whose Immediate claims and volumes are spread over 8 classes: a plan without a
// claim's denied pairs plans again its class only (withoutDenied).
func BenchmarkServiceClaimClasses10k(b *testing.B)  { serviceReaders(b, 10000, 8) }
func BenchmarkServiceClaimClasses100k(b *testing.B) { serviceReaders(b, 100000, 8) }
