// Package e2eflood floods pvguard from one tenant's ServiceAccount on a real kube-apiserver, with
// the webhook configurations the chart renders (the components' registration, which matches
// ServiceAccounts, fails open), while a person of another namespace writes: the flood must not get
// a write the rules refuse past pvguard, no review may reach the webhook timeout, and the other
// person's refused writes must come back with the rule's message.
package e2eflood

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pvguard/pvguard/internal/cli"
	"github.com/pvguard/pvguard/test/controlplane"
	"github.com/pvguard/pvguard/test/harness"
	"github.com/pvguard/pvguard/test/testobj"
)

var h *harness.Harness

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	var err error
	if h, err = harness.Start("{}\n"); err != nil {
		fmt.Fprintln(os.Stderr, "e2eflood:", err)
		return 1
	}
	defer func() { _ = h.Stop() }()
	return m.Run()
}

// Knobs of the flood (PVGUARD_FLOOD_*): its length, how many requests the tenant keeps in flight,
// and the rate of pvguard's live reads.
//
// The rate is scaled to the machine: on the 2 cores of CI the control plane, pvguard and the
// flood together answer a few dozen writes a second, so a flood there is as many times the live
// reads' rate as a cluster's 60 denials a second (two live reads each) are of the default 50 QPS
// when the live-read bucket has 5 QPS (burst 10). PVGUARD_FLOOD_LIVE_QPS=50 with more workers
// floods at the defaults on a larger machine.
var (
	floodFor     = 15 * time.Second
	floodWorkers = 60
	liveQPS      = float32(5)
)

// client acts as user (the admin for "") without client-side rate limiting: the flood must reach
// the apiserver as fast as the tenant can send it.
func newClient(t *testing.T, user string, groups ...string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(h.Config)
	cfg.QPS, cfg.Burst = -1, 0
	if user != "" {
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	}
	scheme := runtime.NewScheme()
	harness.Must(t, clientgoscheme.AddToScheme(scheme), "building scheme")
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	harness.Must(t, err, "client for "+user)
	return c
}

// allowClaims lets subject create, get, list and delete claims in ns, and nothing else.
func allowClaims(t *testing.T, admin client.Client, ns string, subject rbacv1.Subject) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "claims"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"}, Verbs: []string{"create", "get", "list", "delete"},
	}}}
	harness.Must(t, admin.Create(ctx, role), "creating role")
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "claims"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "claims"},
		Subjects:   []rbacv1.Subject{subject},
	}
	harness.Must(t, admin.Create(ctx, rb), "creating role binding")
}

// outcomes counts the answers one identity got, by kind.
type outcomes struct {
	mu     sync.Mutex
	counts map[string]int
	sample map[string]string
}

func (o *outcomes) add(kind string, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.counts == nil {
		o.counts, o.sample = map[string]int{}, map[string]string{}
	}
	o.counts[kind]++
	if _, ok := o.sample[kind]; !ok && err != nil {
		o.sample[kind] = err.Error()
	}
}

func (o *outcomes) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	keys := make([]string, 0, len(o.counts))
	for k := range o.counts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "\n  %-28s %5d", k, o.counts[k])
		if s := o.sample[k]; s != "" {
			fmt.Fprintf(&b, "  e.g. %.300s", s)
		}
	}
	return b.String()
}

// classify names an answer to a write: pvguard's rule denial, pvguard's refusal unjudged (its
// queue was full), a webhook call that failed (a timeout among them), the apiserver's own
// throttling, admitted, or something else.
func classify(err error, rule string) string {
	switch {
	case err == nil:
		return "admitted"
	case harness.DeniedBy(err, rule):
		return "denied by " + rule
	case strings.Contains(err.Error(), "pvguard did not judge this write"):
		return "refused unjudged (busy)"
	case harness.WebhookUnreachable(err) || strings.Contains(err.Error(), "context deadline exceeded"):
		return "webhook failed"
	case strings.Contains(err.Error(), "the server has received too many requests") || strings.Contains(err.Error(), "rate limit"):
		return "apiserver throttled"
	}
	return "other error"
}

// TestFloodFromOneTenant: a tenant's ServiceAccount, which may only create, get, list and delete
// claims in its own namespace, keeps 60 requests in flight for 15 s: dry-run and real creates of
// claims naming another namespace's bound volume (PVG004 refuses them), some with large
// annotations, and dry-run creates pvguard admits. Meanwhile a person in a third namespace creates
// claims one after the other, alternately one naming that volume and a plain one.
//
// The tenant matches the chart's components registration (failurePolicy Ignore): a review of its
// writes that times out admits the write. So: (a) no real create naming the bound volume is
// persisted; (b) the apiserver counts no failed or failed-open call of pvguard's webhooks (a
// review past its timeout is one); (c) every refused write of the person carries PVG004's
// message, and every plain claim of theirs is created.
func TestFloodFromOneTenant(t *testing.T) {
	harness.ReadKnobs(t, harness.EnvKnob("PVGUARD_FLOOD_DURATION", &floodFor), harness.EnvKnob("PVGUARD_FLOOD_WORKERS", &floodWorkers),
		harness.EnvKnob("PVGUARD_FLOOD_LIVE_QPS", &liveQPS))
	ctx := context.Background()
	admin := newClient(t, "")
	inst, err := h.Serve(func(o *cli.ServeFlags) {
		o.API.Classes.LiveReads = cli.APIRate{QPS: liveQPS, Burst: int(2 * liveQPS)}
		// The election is not what is tested: a control plane starved of CPU by the flood may
		// be slow to renew the Lease, and a replica that loses it exits.
		o.LeaderElection.Elect = false
	})
	harness.Must(t, err, "starting pvguard")
	t.Cleanup(func() { _ = inst.Stop() })
	harness.Must(t, h.InstallWebhooks(inst), "installing the chart's webhook configurations")

	tenantNS := harness.PrefixedNamespace(t, admin, "tenant-a")
	victimNS := harness.PrefixedNamespace(t, admin, "tenant-b")
	personNS := harness.PrefixedNamespace(t, admin, "tenant-c")
	victimPV := "flood-victim-" + victimNS
	harness.Must(t, admin.Create(ctx, harness.FreshPV(testobj.PV(victimPV))), "creating the victim's volume")
	harness.Must(t, admin.Create(ctx, harness.FreshPVC(testobj.PVC(victimNS, "x"))), "creating the victim's claim")
	harness.Must(t, controlplane.UpstreamBind(ctx, newClient(t, controlplane.BinderUser, "system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"), victimPV, victimNS, "x"),
		"binding the victim's claim")

	tenantSA := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: "flooder"}}
	harness.Must(t, admin.Create(ctx, tenantSA), "creating the tenant's ServiceAccount")
	allowClaims(t, admin, tenantNS, rbacv1.Subject{Kind: "ServiceAccount", Name: "flooder", Namespace: tenantNS})
	allowClaims(t, admin, personNS, rbacv1.Subject{Kind: "User", APIGroup: rbacv1.GroupName, Name: "carol"})
	tenant := newClient(t, "system:serviceaccount:"+tenantNS+":flooder", "system:serviceaccounts", "system:serviceaccounts:"+tenantNS, "system:authenticated")
	person := newClient(t, "carol", "system:authenticated")

	// Both identities' writes are judged before the flood: the tenant's grab is refused.
	err = tenant.Create(ctx, harness.FreshPVC(testobj.PVC(tenantNS, "probe", testobj.VolumeName(victimPV))), client.DryRunAll)
	if !harness.DeniedBy(err, "PVG004") {
		t.Fatalf("before the flood, the tenant's grab was answered %v; want PVG004's denial", err)
	}

	before := webhookFailures(t)
	floodCtx, stop := context.WithTimeout(ctx, floodFor)
	defer stop()
	var (
		flood, realGrabs, personOut outcomes
		wg                          sync.WaitGroup
		n                           atomic.Int64
		personLatencies             []time.Duration
	)
	big := strings.Repeat("x", 200<<10)
	for range floodWorkers {
		wg.Go(func() {
			for floodCtx.Err() == nil {
				i := n.Add(1)
				var (
					pvc  = harness.FreshPVC(testobj.PVC(tenantNS, fmt.Sprintf("grab-%d", i), testobj.VolumeName(victimPV)))
					opts = []client.CreateOption{client.DryRunAll}
					out  = &flood
				)
				switch i % 10 {
				case 0: // a real create of a grab
					opts, out = nil, &realGrabs
				case 1: // an admitted claim
					pvc.Spec.VolumeName = ""
				case 2: // a large grab
					pvc.Annotations = map[string]string{"example.com/padding": big}
				}
				// The tenant's client gives up as the apiserver would on its own call.
				wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				err := tenant.Create(wctx, pvc, opts...)
				cancel()
				kind := classify(err, "PVG004")
				if i%10 == 1 && err == nil {
					kind = "admitted (plain claim)"
				}
				out.add(kind, err)
			}
		})
	}
	// The person writes one after the other through the flood.
	wg.Go(func() {
		for i := 0; floodCtx.Err() == nil; i++ {
			pvc := harness.FreshPVC(testobj.PVC(personNS, fmt.Sprintf("c-%d", i)))
			grab := i%2 == 0
			if grab {
				pvc.Spec.VolumeName = victimPV
			}
			start := time.Now()
			err := person.Create(ctx, pvc)
			personLatencies = append(personLatencies, time.Since(start))
			kind := classify(err, "PVG004")
			if grab && err == nil {
				kind = "grab admitted"
			}
			personOut.add(kind, err)
			time.Sleep(50 * time.Millisecond)
		}
	})
	wg.Wait()
	after := webhookFailures(t)
	t.Logf("the tenant's %d dry runs and plain claims:%s", n.Load()-int64(realGrabs.total()), flood.String())
	t.Logf("the tenant's real creates naming %s:%s", victimPV, realGrabs.String())
	slices.Sort(personLatencies)
	t.Logf("the person's writes (latency p50 %v, max %v):%s", quantile(personLatencies, 0.5), quantile(personLatencies, 1), personOut.String())
	t.Logf("the apiserver's counts of failed calls of pvguard's webhooks: before %v, after %v", before, after)

	// (a) Nothing the rules refuse was persisted.
	var claims corev1.PersistentVolumeClaimList
	harness.Must(t, admin.List(ctx, &claims, client.InNamespace(tenantNS)), "listing the tenant's claims")
	var persisted []string
	for _, c := range claims.Items {
		if c.Spec.VolumeName == victimPV {
			persisted = append(persisted, c.Name)
		}
	}
	if len(persisted) > 0 {
		t.Errorf("(a) %d of the tenant's real creates naming %s/x's volume were persisted: %v", len(persisted), victimNS, persisted)
	}
	if realGrabs.count("admitted") > 0 {
		t.Errorf("(a) %d real grabs were admitted", realGrabs.count("admitted"))
	}
	// (b) No review of either identity failed or timed out.
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			t.Errorf("(b) the apiserver counted %v more %s", d, k)
		}
	}
	if f := flood.count("webhook failed") + realGrabs.count("webhook failed") + personOut.count("webhook failed"); f > 0 {
		t.Errorf("(b) %d writes failed calling pvguard's webhooks (a timeout among them)", f)
	}
	// (c) The person's refused writes carry the rule's message; their plain claims are created.
	if personOut.total() < 10 {
		t.Errorf("(c) the person made only %d writes during the flood", personOut.total())
	}
	if bad := personOut.total() - personOut.count("denied by PVG004") - personOut.count("admitted"); bad > 0 {
		t.Errorf("(c) %d of the person's writes came back other than with PVG004's message or created", bad)
	}
	if personOut.count("denied by PVG004") == 0 || personOut.count("admitted") == 0 {
		t.Errorf("(c) the person's writes were not both refused by PVG004 and created")
	}
	// The flood did reach pvguard and was judged: most of its grabs were refused by the rule.
	if flood.count("denied by PVG004") == 0 {
		t.Errorf("no flood request was judged by PVG004; the flood did not reach pvguard")
	}
}

func (o *outcomes) count(kind string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.counts[kind]
}

func (o *outcomes) total() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, v := range o.counts {
		n += v
	}
	return n
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[int(math.Ceil(q*float64(len(sorted))))-1]
}

// webhookFailures reads the apiserver's counts of calls of pvguard's webhooks that failed:
// rejected for a calling error (failurePolicy Fail) and failed open (failurePolicy Ignore). A
// call that timed out is one of them.
func webhookFailures(t *testing.T) map[string]float64 {
	t.Helper()
	cs, err := kubernetes.NewForConfig(h.Config)
	harness.Must(t, err, "clientset")
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	harness.Must(t, err, "reading the apiserver's metrics")
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(raw)))
	harness.Must(t, err, "parsing the apiserver's metrics")
	out := map[string]float64{
		"calling errors (rejected)": 0,
		"calls failed open":         0,
	}
	for _, m := range families["apiserver_admission_webhook_rejection_count"].GetMetric() {
		if labelIs(m.GetLabel(), "name", ".pvguard.io") && labelExact(m.GetLabel(), "error_type", "calling_webhook_error") {
			out["calling errors (rejected)"] += m.GetCounter().GetValue()
		}
	}
	for _, m := range families["apiserver_admission_webhook_fail_open_count"].GetMetric() {
		if labelIs(m.GetLabel(), "name", ".pvguard.io") {
			out["calls failed open"] += m.GetCounter().GetValue()
		}
	}
	return out
}

func labelIs(ls []*dto.LabelPair, name, suffix string) bool {
	for _, l := range ls {
		if l.GetName() == name && strings.HasSuffix(l.GetValue(), suffix) {
			return true
		}
	}
	return false
}

func labelExact(ls []*dto.LabelPair, name, value string) bool {
	for _, l := range ls {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}
