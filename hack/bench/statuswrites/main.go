// Command statuswrites counts, on the real control plane (test/cluster: etcd, kube-apiserver,
// kube-scheduler and kube-controller-manager v1.37 from bin/ at their default feature gates, no
// kubelet, pvguard installed as the chart installs it, --binder=off), the volume and claim
// writes kube-apiserver served (apiserver_request_total) against the reviews pvguard received
// (pvguard_admission_reviews_total), in two windows:
//
//   - a kube-controller-manager restart over N bound claims whose Unused condition is missing (as
//     after an upgrade from a release with PersistentVolumeClaimUnusedSinceTime off): the
//     pvc-protection controller writes each claim's condition;
//   - pod churn: P pods, each using one claim, are created and then deleted; the pvc-protection
//     controller marks each claim used, then unused;
//   - the restart again over the first H claims with every webhook pointed at a listener that
//     never answers (a hung pvguard): how long the restart takes, and how many calls it got.
//
// Each window runs with the webhooks as the chart renders them ("generated": with the
// matchCondition derived from the rules' StatusReads) and without that condition ("none": every
// status write sent, as before it), on the same claims. Results are in docs/benchmarks.md,
// "Status writes pvguard need not judge".
//
//	go run ./hack/bench/statuswrites -claims 1000 -pods 200 -hung-claims 20
package main

import (
	"bytes"
	"context"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/test/cluster"
)

type config struct {
	claims, pods, creators int
	hungClaims             int
	kcmQPS                 string
	conditions             []string
	timeout                time.Duration
	keepLogs               bool
}

func main() {
	var c config
	var conds string
	flag.IntVar(&c.claims, "claims", 1000, "bound claims (each with a pre-bound volume) the restart re-processes")
	flag.IntVar(&c.pods, "pods", 200, "pods of the churn, each using one claim, created and then deleted")
	flag.IntVar(&c.creators, "creators", 16, "parallel requests creating fixtures")
	flag.IntVar(&c.hungClaims, "hung-claims", 20, "claims whose condition the restart with pvguard hung re-writes (0 skips that window)")
	flag.StringVar(&c.kcmQPS, "kcm-qps", "", "kube-controller-manager's --kube-api-qps:--kube-api-burst (empty: its defaults, 20:30)")
	flag.StringVar(&conds, "conditions", "generated,none", "webhook configurations to measure, in order: generated (the chart's) and none (without the generated matchCondition)")
	flag.DurationVar(&c.timeout, "timeout", 10*time.Minute, "give up on a window after this long")
	flag.BoolVar(&c.keepLogs, "keep-logs", false, "keep the components' logs (their directory is printed)")
	flag.Parse()
	c.conditions = strings.Split(conds, ",")
	for _, m := range c.conditions {
		if m != "generated" && m != "none" {
			fmt.Fprintf(os.Stderr, "statuswrites bench: -conditions: %q is neither generated nor none\n", m)
			os.Exit(2)
		}
	}
	ctrllog.SetLogger(logr.Discard())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c); err != nil {
		fmt.Fprintln(os.Stderr, "statuswrites bench:", err)
		os.Exit(1)
	}
}

const namespace = "bench-status"

type result struct {
	conditions, window string
	seconds            float64
	writes             counts // apiserver: volume and claim writes it served
	reviews            counts // pvguard: reviews it received
}

func run(ctx context.Context, c config) (err error) {
	o := cluster.Options{}
	if c.kcmQPS != "" {
		qps, burst, ok := strings.Cut(c.kcmQPS, ":")
		if !ok {
			return errors.New("-kcm-qps wants qps:burst")
		}
		o.ControllerManagerArgs = []string{"--kube-api-qps=" + qps, "--kube-api-burst=" + burst}
	}
	start := time.Now()
	cl, err := cluster.Start(o)
	if err != nil {
		return err
	}
	defer func() {
		err = errors.Join(err, cl.Stop())
		if c.keepLogs || err != nil {
			fmt.Println("logs:", cl.LogDir)
		} else {
			_ = os.RemoveAll(cl.LogDir)
		}
	}()
	if err := cl.Use(cluster.ModeUpstream); err != nil {
		return err
	}
	fmt.Printf("control plane up in %v\n", time.Since(start).Round(time.Second))
	if err := fixtures(ctx, cl, c); err != nil {
		return err
	}
	var results []result
	for _, mode := range c.conditions {
		if err := setConditions(ctx, cl, mode == "generated"); err != nil {
			return err
		}
		r, err := restartWindow(ctx, cl, c)
		if err != nil {
			return fmt.Errorf("%s, restart: %w", mode, err)
		}
		r.conditions = mode
		results = append(results, r)
		r, err = churnWindow(ctx, cl, c)
		if err != nil {
			return fmt.Errorf("%s, pod churn: %w", mode, err)
		}
		r.conditions = mode
		results = append(results, r)
		if c.hungClaims > 0 {
			if r, err = hungWindow(ctx, cl, c); err != nil {
				return fmt.Errorf("%s, restart with pvguard hung: %w", mode, err)
			}
			r.conditions = mode
			results = append(results, r)
		}
	}
	report(os.Stdout, c, results)
	return nil
}

// fixtures creates the claims and their pre-bound volumes and waits until kube-controller-
// manager's binder has bound every pair and the pvc-protection controller has marked each
// claim Unused.
func fixtures(ctx context.Context, cl *cluster.Cluster, c config) error {
	start := time.Now()
	if err := cl.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		return err
	}
	class := "bench-static"
	immediate := storagev1.VolumeBindingImmediate
	if err := cl.Client.Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: class}, Provisioner: "kubernetes.io/no-provisioner", VolumeBindingMode: &immediate}); err != nil {
		return err
	}
	err := parallel(ctx, c.claims, c.creators, func(ctx context.Context, i int) error {
		name := fmt.Sprintf("data-%05d", i)
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bench-pv-%05d", i)},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				StorageClassName:              class,
				PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/bench/" + name}},
				ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: namespace, Name: name},
			},
		}
		pvc := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				StorageClassName: &class,
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			},
		}
		if err := cl.Client.Create(ctx, pv); err != nil {
			return err
		}
		return cl.Client.Create(ctx, pvc)
	})
	if err != nil {
		return fmt.Errorf("creating the fixtures: %w", err)
	}
	if err := waitClaims(ctx, cl, 15*time.Minute, "every claim Bound and marked Unused", func(pvc *corev1.PersistentVolumeClaim) bool {
		return pvc.Status.Phase == corev1.ClaimBound && unused(pvc) == corev1.ConditionTrue
	}, c.claims); err != nil {
		return err
	}
	fmt.Printf("%d pairs bound and marked Unused in %v\n", c.claims, time.Since(start).Round(time.Second))
	return nil
}

// restartWindow stops kube-controller-manager, drops every claim's Unused condition (as a
// cluster that ran with the gate off has none), starts it again and counts until every claim has
// its condition back and the writes have stopped.
func restartWindow(ctx context.Context, cl *cluster.Cluster, c config) (result, error) {
	if err := dropConditions(ctx, cl, c, c.claims); err != nil {
		return result{}, err
	}
	return window(ctx, cl, "kube-controller-manager restart", func() error {
		if err := cl.StartControllerManager(); err != nil {
			return err
		}
		return waitClaims(ctx, cl, c.timeout, "every claim marked Unused again", func(pvc *corev1.PersistentVolumeClaim) bool {
			return unused(pvc) == corev1.ConditionTrue
		}, c.claims)
	})
}

// hungWindow is restartWindow over the first hungClaims claims with every webhook of pvguard's
// pointed at a listener that accepts and never answers (a hung pvguard): each write sent to it
// waits for the webhook's timeout. Its calls are counted as reviews ("hung").
func hungWindow(ctx context.Context, cl *cluster.Cluster, c config) (result, error) {
	if err := dropConditions(ctx, cl, c, c.hungClaims); err != nil {
		return result{}, err
	}
	var calls atomic.Int64
	release := make(chan struct{})
	hung := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer func() { close(release); hung.Close() }()
	restore, err := pointWebhooks(ctx, cl, hung)
	if err != nil {
		return result{}, err
	}
	r, err := window(ctx, cl, "restart, pvguard hung", func() error {
		if err := cl.StartControllerManager(); err != nil {
			return err
		}
		return waitClaims(ctx, cl, c.timeout, "every claim marked Unused again", func(pvc *corev1.PersistentVolumeClaim) bool {
			return unused(pvc) == corev1.ConditionTrue
		}, c.claims)
	})
	r.reviews = counts{"hung": float64(calls.Load())}
	return r, errors.Join(err, restore())
}

// pointWebhooks points every webhook of pvguard's configurations at the server (trusting its
// certificate) and returns what points them back.
func pointWebhooks(ctx context.Context, cl *cluster.Cluster, srv *httptest.Server) (func() error, error) {
	var v admissionregistrationv1.ValidatingWebhookConfiguration
	var m admissionregistrationv1.MutatingWebhookConfiguration
	if err := cl.Client.Get(ctx, client.ObjectKey{Name: "pvguard"}, &v); err != nil {
		return nil, err
	}
	if err := cl.Client.Get(ctx, client.ObjectKey{Name: "pvguard"}, &m); err != nil {
		return nil, err
	}
	origV, origM := v.DeepCopy(), m.DeepCopy()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	point := func(cc *admissionregistrationv1.WebhookClientConfig) {
		u, _ := url.Parse(*cc.URL)
		to := srv.URL + u.Path
		cc.URL, cc.CABundle = &to, ca
	}
	for i := range v.Webhooks {
		point(&v.Webhooks[i].ClientConfig)
	}
	for i := range m.Webhooks {
		point(&m.Webhooks[i].ClientConfig)
	}
	if err := errors.Join(cl.Client.Update(ctx, &v), cl.Client.Update(ctx, &m)); err != nil {
		return nil, err
	}
	time.Sleep(2 * time.Second) // the apiserver reloads webhook configurations from its informer
	return func() error {
		if err := cl.Client.Get(ctx, client.ObjectKey{Name: "pvguard"}, &v); err != nil {
			return err
		}
		if err := cl.Client.Get(ctx, client.ObjectKey{Name: "pvguard"}, &m); err != nil {
			return err
		}
		v.Webhooks, m.Webhooks = origV.Webhooks, origM.Webhooks
		err := errors.Join(cl.Client.Update(ctx, &v), cl.Client.Update(ctx, &m))
		time.Sleep(2 * time.Second)
		return err
	}, nil
}

// dropConditions stops kube-controller-manager and drops the Unused condition of the first n
// claims (as a cluster that ran with the gate off has none), so that the restart re-writes them.
func dropConditions(ctx context.Context, cl *cluster.Cluster, c config, n int) error {
	if err := cl.StopControllerManager(); err != nil {
		return err
	}
	var list corev1.PersistentVolumeClaimList
	if err := cl.Client.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return err
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	list.Items = list.Items[:min(n, len(list.Items))]
	err := parallel(ctx, len(list.Items), c.creators, func(ctx context.Context, i int) error {
		pvc := &list.Items[i]
		pvc.Status.Conditions = nil
		return cl.Client.Status().Update(ctx, pvc)
	})
	if err != nil {
		return fmt.Errorf("dropping the Unused conditions: %w", err)
	}
	return nil
}

// churnWindow creates the pods, waits until the pvc-protection controller has marked each of
// their claims used, deletes them and waits until it has marked the claims unused again.
func churnWindow(ctx context.Context, cl *cluster.Cluster, c config) (result, error) {
	in := func(pvc *corev1.PersistentVolumeClaim) bool {
		var i int
		_, err := fmt.Sscanf(pvc.Name, "data-%05d", &i)
		return err == nil && i < c.pods
	}
	count := func(want corev1.ConditionStatus) func(*corev1.PersistentVolumeClaim) bool {
		return func(pvc *corev1.PersistentVolumeClaim) bool { return in(pvc) && unused(pvc) == want }
	}
	pod := func(i int) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: fmt.Sprintf("app-%05d", i)},
			Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
				Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
					PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: fmt.Sprintf("data-%05d", i)},
				}}},
			},
		}
	}
	return window(ctx, cl, "pod churn", func() error {
		if err := parallel(ctx, c.pods, c.creators, func(ctx context.Context, i int) error { return cl.Client.Create(ctx, pod(i)) }); err != nil {
			return fmt.Errorf("creating pods: %w", err)
		}
		if err := waitClaims(ctx, cl, c.timeout, "every pod's claim marked used", count(corev1.ConditionFalse), c.pods); err != nil {
			return err
		}
		if err := parallel(ctx, c.pods, c.creators, func(ctx context.Context, i int) error { return cl.DeletePod(ctx, pod(i)) }); err != nil {
			return fmt.Errorf("deleting pods: %w", err)
		}
		return waitClaims(ctx, cl, c.timeout, "every pod's claim marked unused again", count(corev1.ConditionTrue), c.pods)
	})
}

// window counts the writes served and the reviews received while do runs and until the writes
// have stopped (no volume or claim write for 3 s).
func window(ctx context.Context, cl *cluster.Cluster, name string, do func() error) (result, error) {
	w0, r0, err := snapshot(ctx, cl)
	if err != nil {
		return result{}, err
	}
	start := time.Now()
	if err := do(); err != nil {
		return result{}, err
	}
	took := time.Since(start)
	var w1, r1 counts
	last := w0
	for quiet := 0; quiet < 3; {
		time.Sleep(time.Second)
		if w1, r1, err = snapshot(ctx, cl); err != nil {
			return result{}, err
		}
		if w1.total() == last.total() {
			quiet++
		} else {
			quiet, last = 0, w1
		}
	}
	return result{window: name, seconds: took.Seconds(), writes: w1.minus(w0), reviews: r1.minus(r0)}, nil
}

// counts are per "kind" (volumes, claims) and, for writes, "kind/status" for the status
// subresource.
type counts map[string]float64

func (c counts) total() float64 {
	var n float64
	for _, v := range c {
		n += v
	}
	return n
}

func (c counts) minus(o counts) counts {
	out := counts{}
	for k, v := range c {
		if d := v - o[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// snapshot reads the apiserver's served volume and claim writes (apiserver_request_total, verbs
// POST, PUT, PATCH and APPLY; DELETE aside: no webhook of pvguard's sees deletes) and pvguard's
// reviews (pvguard_admission_reviews_total, validating and mutating).
func snapshot(ctx context.Context, cl *cluster.Cluster) (writes, reviews counts, err error) {
	body, err := cl.Clientset.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the apiserver's metrics: %w", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return nil, nil, fmt.Errorf("parsing the apiserver's metrics: %w", err)
	}
	writes = counts{}
	for _, m := range fams["apiserver_request_total"].GetMetric() {
		l := map[string]string{}
		for _, p := range m.GetLabel() {
			l[p.GetName()] = p.GetValue()
		}
		switch l["verb"] {
		case "POST", "PUT", "PATCH", "APPLY":
		default:
			continue
		}
		kind := map[string]string{"persistentvolumes": "volumes", "persistentvolumeclaims": "claims"}[l["resource"]]
		if kind == "" {
			continue
		}
		if l["subresource"] != "" {
			kind += "/" + l["subresource"]
		}
		writes[kind] += m.GetCounter().GetValue()
	}
	ms, err := cl.PVGuard().Metrics("pvguard_admission_reviews_total")
	if err != nil {
		return nil, nil, err
	}
	reviews = counts{}
	for k, v := range ms {
		switch {
		case strings.Contains(k, `kind="PersistentVolume"`):
			reviews["volumes"] += v
		case strings.Contains(k, `kind="PersistentVolumeClaim"`):
			reviews["claims"] += v
		}
	}
	return writes, reviews, nil
}

// setConditions gives the validating webhooks the chart's generated matchCondition, or takes it
// away (every status write sent to pvguard, as before it).
func setConditions(ctx context.Context, cl *cluster.Cluster, generated bool) error {
	var v admissionregistrationv1.ValidatingWebhookConfiguration
	if err := cl.Client.Get(ctx, client.ObjectKey{Name: "pvguard"}, &v); err != nil {
		return err
	}
	for i := range v.Webhooks {
		wh := &v.Webhooks[i]
		var kind policy.Kind
		switch {
		case strings.HasPrefix(wh.Name, "validate-pv.") || strings.HasPrefix(wh.Name, "validate-pv-"):
			kind = policy.KindPersistentVolume
		case strings.HasPrefix(wh.Name, "validate-pvc"):
			kind = policy.KindPersistentVolumeClaim
		default:
			continue
		}
		gen := policy.WebhookMatchConditions(policy.Catalogue(), kind)
		var keep []admissionregistrationv1.MatchCondition
		for _, mc := range wh.MatchConditions {
			if mc.Name != gen[0].Name {
				keep = append(keep, mc)
			}
		}
		if generated {
			for _, mc := range gen {
				keep = append(keep, admissionregistrationv1.MatchCondition{Name: mc.Name, Expression: mc.Expression})
			}
		}
		wh.MatchConditions = keep
	}
	if err := cl.Client.Update(ctx, &v); err != nil {
		return err
	}
	time.Sleep(2 * time.Second) // the apiserver reloads webhook configurations from its informer
	return nil
}

func unused(pvc *corev1.PersistentVolumeClaim) corev1.ConditionStatus {
	for _, c := range pvc.Status.Conditions {
		if c.Type == "Unused" {
			return c.Status
		}
	}
	return ""
}

// waitClaims lists the namespace's claims every second until want of them satisfy ok.
func waitClaims(ctx context.Context, cl *cluster.Cluster, timeout time.Duration, what string, ok func(*corev1.PersistentVolumeClaim) bool, want int) error {
	var got int
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		var list corev1.PersistentVolumeClaimList
		if err := cl.Client.List(ctx, &list, client.InNamespace(namespace)); err != nil {
			return false, err
		}
		got = 0
		for i := range list.Items {
			if ok(&list.Items[i]) {
				got++
			}
		}
		return got >= want, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %s: %d of %d: %w", what, got, want, err)
	}
	return nil
}

// parallel runs f(i) for i in [0, n) on workers goroutines, stopping at the first error.
func parallel(ctx context.Context, n, workers int, f func(context.Context, int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := make(chan int)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				if err := f(ctx, i); err != nil {
					errs <- err
					cancel()
					return
				}
			}
		})
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return ctx.Err()
	}
}

func report(w io.Writer, c config, results []result) {
	fmt.Fprintf(w, "\n%d claims, %d pods, kube-controller-manager qps:burst %s\n", c.claims, c.pods, orDefault(c.kcmQPS, "default (20:30)"))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "conditions\twindow\ttook\tPV/PVC writes served (of them status)\treviews pvguard received\tby kind")
	for _, r := range results {
		status := r.writes["claims/status"] + r.writes["volumes/status"]
		fmt.Fprintf(tw, "%s\t%s\t%.1f s\t%.0f (%.0f)\t%.0f\twrites %v; reviews %v\n", r.conditions, r.window, r.seconds, r.writes.total(), status, r.reviews.total(), map[string]float64(r.writes), map[string]float64(r.reviews))
	}
	tw.Flush()
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
