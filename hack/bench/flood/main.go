// Command flood measures the review latency of a bystander, a requester sending reviews at a
// steady rate, while another requester floods pvguard, beside the same without the flood.
//
// pvguard's server (internal/web, as `pvguard serve` mounts it, with its fair queue and
// live-read budget) runs in this process over TLS on 127.0.0.1. Its view holds a bound volume
// and claim; a review is judged on that state as on the informer cache, and a denial is re-read
// "live" through the live-read class's token bucket of -live-qps/-live-burst
// (webhook.NewLiveReadRateLimiter, as --live-read-qps sets it) followed by -live-latency for the
// apiserver's answer. The flooder keeps
// -flood-workers reviews in flight over one HTTP/2 connection, as the apiserver does for a
// tenant's writes: creates of claims naming the bound volume (each denied by PVG004, and re-read
// live), one in ten with a 200 KiB annotation. The bystander, over a connection of its own,
// sends -bystander-rate reviews a second whatever the answers do (open loop), alternately a
// plain claim (admitted) and one naming the bound volume (denied). Each review carries
// ?timeout=-timeout as the apiserver's do.
//
// Two phases of -duration each: quiet (the bystander alone), then flood. See docs/benchmarks.md.
package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/pvguard/pvguard/internal/web"
	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/test/admissionload"
	"github.com/pvguard/pvguard/test/testobj"
	"github.com/pvguard/pvguard/webhook"
)

func main() {
	duration := flag.Duration("duration", 10*time.Second, "length of each phase")
	workers := flag.Int("flood-workers", 200, "reviews the flooder keeps in flight at most")
	floodRate := flag.Float64("flood-rate", 0, "the flooder's reviews a second at most (0: as fast as the workers go)")
	bigEvery := flag.Int("big-every", 10, "one flood review in this many carries a 200 KiB annotation (0: none)")
	byRate := flag.Int("bystander-rate", 20, "the bystander's reviews a second")
	liveQPS := flag.Float64("live-qps", 50, "live reads' token bucket: tokens a second (--live-read-qps)")
	liveBurst := flag.Int("live-burst", 100, "live reads' token bucket: burst (--live-read-burst)")
	liveLatency := flag.Duration("live-latency", 2*time.Millisecond, "the apiserver's time to answer one live read")
	timeout := flag.Duration("timeout", 2*time.Second, "the webhook timeout the apiserver puts on each review's URL")
	fair := flag.Bool("fair-queue", true, "queue reviews per requester (--review-* defaults); false judges every review at once")
	budget := flag.Duration("live-read-budget", webhook.DefaultLiveReadBudget, "--live-read-budget")
	flag.Parse()

	owner := testobj.PVC("team-b", "x", testobj.ClaimBoundTo("pv-b"))
	state := testobj.NewView(owner, testobj.PV("pv-b", testobj.BoundTo(owner)))
	limiter := webhook.NewLiveReadRateLimiter(float32(*liveQPS), *liveBurst)
	reg := prometheus.NewRegistry()
	limits := webhook.Limits{LiveReadBudget: *budget}
	if *fair {
		q, err := webhook.NewFairQueue(webhook.DefaultFairQueueOptions(), reg)
		if err != nil {
			log.Fatal(err)
		}
		limits.Queue = q
	}
	certs, err := admissionload.IssueTLS()
	if err != nil {
		log.Fatal(err)
	}
	srv := web.NewServer(web.Options{
		Listen:         "127.0.0.1:0",
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &certs.Cert, nil },
		Engines:        webhook.StaticEngine{E: policy.NewEngine(nil)},
		Views:          liveViews{cache: state, limiter: limiter, latency: *liveLatency},
		Admission:      limits,
		Registry:       reg,
		Log:            admissionload.Logger(),
	})
	addr, stop, err := admissionload.Serve(srv.Handler(), srv.TLSConfig())
	if err != nil {
		log.Fatal(err)
	}
	defer stop()
	url := "https://" + addr + webhook.PathValidatePVC + "?timeout=" + timeout.String()
	big := strings.Repeat("x", 200<<10)
	review := func(ns, user, name, volume, padding string) []byte {
		pvc := testobj.PVC(ns, name, testobj.VolumeName(volume))
		if padding != "" {
			pvc.Annotations = map[string]string{"example.com/padding": padding}
		}
		return reviewBody(pvc, user)
	}
	const flooder = "system:serviceaccount:team-a:flooder"
	plain, grab := review("team-c", "carol", "c", "", ""), review("team-c", "carol", "g", "pv-b", "")
	floodGrab, floodBig := review("team-a", flooder, "f", "pv-b", ""), review("team-a", flooder, "f", "pv-b", big)
	// Each client gives up when the apiserver would.
	client := func() *http.Client { c := admissionload.Client(certs.Pool); c.Timeout = *timeout; return c }

	fmt.Printf("%s, GOMAXPROCS %d, load average %s; live reads %g/s burst %d, %s each; budget %s; fair queue %v; timeout %s; flood rate %g/s (0: unbounded), big every %d\n\n",
		runtime.Version(), runtime.GOMAXPROCS(0), loadavg(), *liveQPS, *liveBurst, *liveLatency, *budget, *fair, *timeout, *floodRate, *bigEvery)
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "phase\tbystander reviews\tp50 admitted\tp99 admitted\tp50 denied\tp99 denied\tmax\tbystander answers\tflood reviews/s\tflood answers\tlive-read fallbacks")
	for _, flood := range []bool{false, true} {
		ctx, cancel := context.WithTimeout(context.Background(), *duration)
		var floodOut answers
		var floodN atomic.Int64
		var wg sync.WaitGroup
		if flood {
			fc := client()
			lim := rate.NewLimiter(rate.Inf, 0)
			if *floodRate > 0 {
				lim = rate.NewLimiter(rate.Limit(*floodRate), 1)
			}
			for range *workers {
				wg.Go(func() {
					for lim.Wait(ctx) == nil {
						body := floodGrab
						if n := floodN.Add(1); *bigEvery > 0 && n%int64(*bigEvery) == 0 {
							body = floodBig
						}
						kind, _ := post(fc, url, body)
						floodOut.add(kind)
					}
				})
			}
		}
		before := fallbacks(reg)
		bc := client()
		admitted, denied := admissionload.NewRecorder(*byRate*int(duration.Seconds()+1)), admissionload.NewRecorder(*byRate*int(duration.Seconds()+1))
		var byOut answers
		tick := time.NewTicker(time.Second / time.Duration(*byRate))
		var bwg sync.WaitGroup
		for i := 0; ctx.Err() == nil; i++ {
			<-tick.C
			body, rec := plain, admitted
			if i%2 == 1 {
				body, rec = grab, denied
			}
			bwg.Go(func() {
				start := time.Now()
				kind, _ := post(bc, url, body)
				rec.Observe(time.Since(start))
				byOut.add(kind)
			})
		}
		tick.Stop()
		bwg.Wait()
		wg.Wait()
		cancel()
		a, d := admitted.Durations(), denied.Durations()
		ms := func(x time.Duration) string { return fmt.Sprintf("%.2f ms", float64(x)/float64(time.Millisecond)) }
		phase := "quiet"
		if flood {
			phase = fmt.Sprintf("flood (%d in flight)", *workers)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%.0f\t%s\t%.0f\n", phase, len(a)+len(d),
			ms(admissionload.Quantile(a, 0.5)), ms(admissionload.Quantile(a, 0.99)),
			ms(admissionload.Quantile(d, 0.5)), ms(admissionload.Quantile(d, 0.99)),
			ms(max(admissionload.Quantile(a, 1), admissionload.Quantile(d, 1))),
			byOut.String(), float64(floodOut.total())/duration.Seconds(), floodOut.String(), fallbacks(reg)-before)
	}
	tw.Flush()
	fmt.Printf("\nload average at the end: %s\n", loadavg())
}

// liveViews judges on the state as the cache, and re-reads it through the token bucket.
type liveViews struct {
	cache   *testobj.View
	limiter flowcontrol.RateLimiter
	latency time.Duration
}

func (l liveViews) View(context.Context) policy.View { return l.cache }
func (l liveViews) FreshView(ctx context.Context) policy.View {
	return liveView{View: l.cache, ctx: ctx, l: l}
}

type liveView struct {
	*testobj.View
	ctx context.Context
	l   liveViews
}

// read waits for a token, as client-go's rest client does, then for the apiserver's answer.
func (v liveView) read() error {
	if err := v.l.limiter.Wait(v.ctx); err != nil {
		return fmt.Errorf("client rate limiter Wait returned an error: %w", err)
	}
	select {
	case <-time.After(v.l.latency):
		return nil
	case <-v.ctx.Done():
		return v.ctx.Err()
	}
}

func (v liveView) PersistentVolume(name string) (*corev1.PersistentVolume, error) {
	if err := v.read(); err != nil {
		return nil, err
	}
	return v.View.PersistentVolume(name)
}

func (v liveView) PersistentVolumeClaim(ns, name string) (*corev1.PersistentVolumeClaim, error) {
	if err := v.read(); err != nil {
		return nil, err
	}
	return v.View.PersistentVolumeClaim(ns, name)
}

// answers counts answers by kind.
type answers struct {
	mu sync.Mutex
	n  map[string]int
}

func (a *answers) add(kind string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n == nil {
		a.n = map[string]int{}
	}
	a.n[kind]++
}

func (a *answers) total() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	t := 0
	for _, v := range a.n {
		t += v
	}
	return t
}

func (a *answers) String() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var parts []string
	for _, k := range []string{"admitted", "denied", "busy", "error", "failed"} {
		if a.n[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, a.n[k]))
		}
	}
	return strings.Join(parts, ", ")
}

// post sends one review and names its answer: admitted, denied (by a rule, code 403), busy
// (answered unjudged with HTTP 429, where the registration's failurePolicy decides), error
// (another in-band refusal) or failed (no answer in time, or not an answer).
func post(c *http.Client, url string, body []byte) (string, error) {
	resp, err := c.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return "failed", err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusTooManyRequests {
		return "busy", nil
	}
	if err != nil || resp.StatusCode != http.StatusOK {
		return "failed", fmt.Errorf("HTTP %d: %v", resp.StatusCode, err)
	}
	var ar admissionv1.AdmissionReview
	if err := json.Unmarshal(data, &ar); err != nil || ar.Response == nil {
		return "failed", fmt.Errorf("not a review: %s", data)
	}
	switch r := ar.Response; {
	case r.Allowed:
		return "admitted", nil
	case r.Result != nil && r.Result.Code == http.StatusForbidden:
		return "denied", nil
	}
	return "error", nil
}

// reviewBody is the AdmissionReview of a create of pvc by username.
func reviewBody(pvc *corev1.PersistentVolumeClaim, username string) []byte {
	obj, err := json.Marshal(pvc)
	if err != nil {
		log.Fatal(err)
	}
	ar := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: types.UID("req-" + pvc.Name), Kind: testobj.PVCKind, Operation: admissionv1.Create,
			Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"},
			Namespace: pvc.Namespace, Name: pvc.Name,
			UserInfo: authenticationv1.UserInfo{Username: username},
			Object:   k8sruntime.RawExtension{Raw: obj},
		},
	}
	data, err := json.Marshal(ar)
	if err != nil {
		log.Fatal(err)
	}
	return data
}

func fallbacks(reg *prometheus.Registry) float64 {
	mfs, err := reg.Gather()
	if err != nil {
		log.Fatal(err)
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() == "pvguard_admission_live_read_fallbacks_total" {
			for _, m := range mf.GetMetric() {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}

func loadavg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(data))[:3], " ")
}
