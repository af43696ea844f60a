package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"

	"github.com/pvguard/pvguard/test/admissionload"
	"github.com/pvguard/pvguard/webhook"
)

// The objects the reviews refer to, in fixtureNamespace of every cluster (N = 0 included), so
// that every row judges the same reviews and only the cache around them grows.
const (
	fixturePending   = "bench-pending"   // rbd claim waiting for its volume: the imported volume's target
	fixtureAvailable = "bench-available" // free local disk: the pre-bound claim's volume
	fixtureBound     = "bench-bound"     // bound rbd pair: resized, and its volume relabelled
	fixtureRestore   = "bench-restore"   // the claim the pvc-create review creates
)

// createFixtures creates the objects the reviews refer to, as the fill creates its own.
func (f *filler) createFixtures(ctx context.Context) error {
	if _, err := f.pendingClaim(ctx, pairSpec{namespace: fixtureNamespace, claim: fixturePending, request: "10Gi"}); err != nil {
		return err
	}
	pv := localVolume(pairSpec{node: nodeName(1), capacity: "375Gi"})
	pv.Name, pv.Spec.Local.Path, pv.Labels["restore"] = fixtureAvailable, "/mnt/disks/"+fixtureAvailable, "db"
	pv, err := f.createStatic(ctx, pv)
	if err != nil {
		return err
	}
	if err := f.volumeStatus(ctx, pv, corev1.VolumeAvailable); err != nil {
		return err
	}
	return f.bound(ctx, pairSpec{namespace: fixtureNamespace, claim: fixtureBound, request: "10Gi", capacity: "10Gi"})
}

// reviewCase is one kind of write the reviews stand for.
type reviewCase struct {
	Name string `json:"name"`
	path string
	body []byte
}

// reviewCases builds the four reviews from what the apiserver itself makes of each write (a
// dry run returns the object defaulted, with finalizers, uid and managedFields, as a webhook
// receives it; old objects are read live): a claim pre-bound to a free volume (every at-bind
// rule runs), a bound claim's resize, a volume import pre-bound to a pending claim, and a label
// added to a bound volume.
func reviewCases(ctx context.Context, cs kubernetes.Interface) ([]reviewCase, error) {
	dry := []string{metav1.DryRunAll}
	pvcs, pvs := cs.CoreV1().PersistentVolumeClaims(fixtureNamespace), cs.CoreV1().PersistentVolumes()

	restore := (&filler{}).claimObject(pairSpec{namespace: fixtureNamespace, claim: fixtureRestore, local: true, request: "100Gi"})
	restore.Spec.VolumeName = fixtureAvailable
	restore.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"restore": "db"}}
	if err := setLastApplied(&restore.ObjectMeta, restore); err != nil {
		return nil, err
	}
	newClaim, err := pvcs.Create(ctx, restore, metav1.CreateOptions{DryRun: dry, FieldManager: managerKubectl})
	if err != nil {
		return nil, fmt.Errorf("dry-run create of claim %s: %w", fixtureRestore, err)
	}

	bound, err := pvcs.Get(ctx, fixtureBound, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading claim %s: %w", fixtureBound, err)
	}
	grown := bound.DeepCopy()
	grown.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("20Gi")
	resized, err := pvcs.Update(ctx, grown, metav1.UpdateOptions{DryRun: dry, FieldManager: "kubectl-edit"})
	if err != nil {
		return nil, fmt.Errorf("dry-run resize of claim %s: %w", fixtureBound, err)
	}

	imported := csiVolume(pairSpec{namespace: fixtureNamespace, capacity: "10Gi"}, "pvc-"+string(uuid.NewUUID()))
	imported.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: fixtureNamespace, Name: fixturePending}
	imported.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
	delete(imported.Annotations, annProvisionedBy)
	newVolume, err := pvs.Create(ctx, imported, metav1.CreateOptions{DryRun: dry, FieldManager: managerKubectl})
	if err != nil {
		return nil, fmt.Errorf("dry-run create of volume %s: %w", imported.Name, err)
	}

	boundPV, err := pvs.Get(ctx, bound.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading volume %s: %w", bound.Spec.VolumeName, err)
	}
	labelled := boundPV.DeepCopy()
	labelled.Labels["backup.example.com/schedule"] = "hourly"
	relabelled, err := pvs.Update(ctx, labelled, metav1.UpdateOptions{DryRun: dry, FieldManager: "kubectl-label"})
	if err != nil {
		return nil, fmt.Errorf("dry-run relabel of volume %s: %w", boundPV.Name, err)
	}

	type write struct {
		name     string
		path     string
		obj, old runtime.Object
	}
	var out []reviewCase
	for _, w := range []write{
		{"pvc-create", webhook.PathValidatePVC, newClaim, nil},
		{"pvc-update", webhook.PathValidatePVC, resized, bound},
		{"pv-create", webhook.PathValidatePV, newVolume, nil},
		{"pv-update", webhook.PathValidatePV, relabelled, boundPV},
	} {
		body, err := reviewBody(w.obj, w.old)
		if err != nil {
			return nil, fmt.Errorf("review %s: %w", w.name, err)
		}
		out = append(out, reviewCase{Name: w.name, path: w.path, body: body})
	}
	return out, nil
}

// reviewBody is the AdmissionReview the apiserver sends for obj (a create when old is nil).
func reviewBody(obj, old runtime.Object) ([]byte, error) {
	raw := func(o runtime.Object) (runtime.RawExtension, error) {
		if o == nil {
			return runtime.RawExtension{}, nil
		}
		data, err := json.Marshal(o)
		return runtime.RawExtension{Raw: data}, err
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("%T has no metadata", obj)
	}
	gvk, gvr := metav1.GroupVersionKind{Version: "v1", Kind: "PersistentVolumeClaim"}, metav1.GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"}
	if _, isPV := obj.(*corev1.PersistentVolume); isPV {
		gvk.Kind, gvr.Resource = "PersistentVolume", "persistentvolumes"
	}
	// The clientset drops apiVersion and kind when it decodes; the apiserver sends them.
	for _, o := range []runtime.Object{obj, old} {
		if o != nil {
			o.GetObjectKind().SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(gvk.Kind))
		}
	}
	op, opts := admissionv1.Create, `{"kind":"CreateOptions","apiVersion":"meta.k8s.io/v1","fieldManager":"kubectl-client-side-apply","fieldValidation":"Strict"}`
	if old != nil {
		op, opts = admissionv1.Update, `{"kind":"UpdateOptions","apiVersion":"meta.k8s.io/v1","fieldManager":"kubectl-edit","fieldValidation":"Strict"}`
	}
	object, err := raw(obj)
	if err != nil {
		return nil, err
	}
	oldObject, err := raw(old)
	if err != nil {
		return nil, err
	}
	dryRun := false
	ar := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: uuid.NewUUID(), Kind: gvk, Resource: gvr, RequestKind: &gvk, RequestResource: &gvr,
			Name: m.GetName(), Namespace: m.GetNamespace(), Operation: op,
			UserInfo: authenticationv1.UserInfo{Username: "alice@example.com", UID: "b5f3c8d2-alice",
				Groups: []string{"storage-admins", "system:authenticated"}},
			Object: object, OldObject: oldObject, DryRun: &dryRun, Options: runtime.RawExtension{Raw: []byte(opts)},
		},
	}
	return json.Marshal(ar)
}

// latency is one case's client-side review latency.
type latency struct {
	Case     string  `json:"case"`
	Requests int     `json:"requests"`
	P50ms    float64 `json:"p50_ms"`
	P99ms    float64 `json:"p99_ms"`
	MeanMs   float64 `json:"mean_ms"`
	MaxMs    float64 `json:"max_ms"`
	// Late is how many paced reviews (-review-rate) were sent more than one interval after they
	// were due, the one before them still unanswered or the bench not yet awake.
	Late int `json:"late,omitempty"`
}

// lateSaid is ", N sent late" when some paced reviews were.
func (l latency) lateSaid() string {
	if l.Late == 0 {
		return ""
	}
	return fmt.Sprintf(", %d sent late", l.Late)
}

// measureReviews sends each case warmup times untimed, then n times timed, one at a time, over
// one HTTP/2 connection that trusts the server's CA (as the apiserver's webhook client does):
// back to back when rate is 0, else paced at rate reviews a second, each timed from its send.
// Back to back, the bench and pvguard keep about a core each busy passing reviews to and fro,
// and anything else on a two-core machine queues with them; paced, the reviews leave the
// cores to what runs beside them, as an apiserver's few reviews a second do.
func measureReviews(ctx context.Context, hc *http.Client, base string, cases []reviewCase, warmup, n int, rate float64) ([]latency, error) {
	var out []latency
	for _, c := range cases {
		url := base + c.path
		for range warmup {
			if err := admissionload.Post(hc, url, c.body); err != nil {
				return nil, fmt.Errorf("review %s: %w", c.Name, err)
			}
		}
		d := make([]time.Duration, 0, n)
		var interval time.Duration
		if rate > 0 {
			interval = time.Duration(float64(time.Second) / rate)
		}
		late, first := 0, time.Now()
		for i := range n {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if interval > 0 {
				due := first.Add(time.Duration(i) * interval)
				time.Sleep(time.Until(due))
				if time.Since(due) > interval {
					late++
				}
			}
			start := time.Now()
			if err := admissionload.Post(hc, url, c.body); err != nil {
				return nil, fmt.Errorf("review %s: %w", c.Name, err)
			}
			d = append(d, time.Since(start))
		}
		slices.Sort(d)
		var total time.Duration
		for _, x := range d {
			total += x
		}
		ms := func(x time.Duration) float64 { return float64(x.Microseconds()) / 1000 }
		l := latency{Case: c.Name, Requests: n, P50ms: ms(admissionload.Quantile(d, 0.50)), P99ms: ms(admissionload.Quantile(d, 0.99)), Late: late}
		if n > 0 {
			l.MeanMs, l.MaxMs = ms(total/time.Duration(n)), ms(d[n-1])
		}
		out = append(out, l)
	}
	return out, nil
}
