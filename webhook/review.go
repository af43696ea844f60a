package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// maxReviewBytes bounds an AdmissionReview body. The apiserver caps objects at 3 MiB and a
// review carries at most two of them.
const maxReviewBytes = 7 << 20

// reviewGuard answers requests that are not AdmissionReviews at all with a plain HTTP error,
// before reviewHandler reads the body (it answers bodies that are not reviews in-band, with HTTP
// 200), and bounds the body it reads.
func reviewGuard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || mt != "application/json" {
			http.Error(w, fmt.Sprintf("pvguard: Content-Type %q is not application/json", r.Header.Get("Content-Type")), http.StatusUnsupportedMediaType)
			return
		}
		if r.ContentLength > maxReviewBytes {
			http.Error(w, "pvguard: AdmissionReview larger than "+strconv.Itoa(maxReviewBytes)+" bytes", http.StatusRequestEntityTooLarge)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxReviewBytes)
		next.ServeHTTP(w, r)
	})
}

// reviewKind and reviewVersions are the AdmissionReviews pvguard answers. v1beta1 has the same
// JSON shape as v1 and is answered in v1beta1.
const reviewKind = "AdmissionReview"

var reviewVersions = map[string]bool{"admission.k8s.io/v1": true, "admission.k8s.io/v1beta1": true}

// reviewHandler serves one webhook endpoint. It reads and decodes the AdmissionReview itself
// instead of leaving that to admission.Webhook's ServeHTTP, which decodes a body of any
// apiVersion and kind (admission.k8s.io/v2, a Pod, none at all) as a v1 review and answers it.
// The admission.Webhook still handles the decoded request: it recovers panics and fills in the
// response's uid and code.
//
// A body that is not a review pvguard answers gets a denial with code 400 that says what is
// wrong, in an HTTP 200 as controller-runtime answers; a body over the size limit gets HTTP 413.
type reviewHandler struct {
	wh    *admission.Webhook
	log   logr.Logger
	queue *FairQueue
}

var _ http.Handler = reviewHandler{}

func (h reviewHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			http.Error(w, fmt.Sprintf("pvguard: AdmissionReview larger than %d bytes", tooLarge.Limit), http.StatusRequestEntityTooLarge)
			return
		}
		h.refuse(w, reviewKind, "admission.k8s.io/v1", "", fmt.Errorf("reading the request body: %w", err))
		return
	}
	if len(bytes.TrimSpace(body)) == 0 {
		h.refuse(w, reviewKind, "admission.k8s.io/v1", "", errors.New("request body is empty"))
		return
	}
	ar, err := decodeAdmissionReview(body)
	if err != nil {
		h.refuse(w, reviewKind, "admission.k8s.io/v1", "", err)
		return
	}
	var uid types.UID
	if ar.Request != nil {
		uid = ar.Request.UID
	}
	if ar.Kind != reviewKind || !reviewVersions[ar.APIVersion] {
		h.refuse(w, reviewKind, "admission.k8s.io/v1", uid, fmt.Errorf(
			"body is apiVersion %q kind %q; pvguard answers kind AdmissionReview of admission.k8s.io/v1 or admission.k8s.io/v1beta1", ar.APIVersion, ar.Kind))
		return
	}
	if ar.Request == nil {
		h.refuse(w, ar.Kind, ar.APIVersion, "", errors.New("AdmissionReview has no request"))
		return
	}
	if uid == "" {
		h.refuse(w, ar.Kind, ar.APIVersion, "", errors.New("AdmissionReview request has no uid"))
		return
	}
	start := time.Now()
	timeout := reviewTimeout(r)
	// The review is answered before the apiserver gives up on it: a timed-out call is a webhook
	// failure, which the components' registration (failurePolicy Ignore) turns into an
	// admission. Every wait below ends by then.
	ctx, cancel := context.WithDeadline(r.Context(), start.Add(timeout-answerMargin(timeout)))
	defer cancel()
	req := admission.Request{AdmissionRequest: *ar.Request}
	var resp admission.Response
	judge := func() { resp = h.wh.Handle(ctx, req) }
	if h.queue == nil {
		judge()
	} else {
		// Half the timeout for waiting in the queue, the other half for judging.
		waitCtx, cancelWait := context.WithDeadline(ctx, start.Add(timeout/2))
		refused := h.queue.DoSized(waitCtx, req.UserInfo.Username, int64(len(body)), judge)
		cancelWait()
		if refused != "" {
			busy(w, refused)
			return
		}
	}
	writeReview(w, ar.Kind, ar.APIVersion, &resp.AdmissionResponse, h.log)
}

// reviewTimeout is the time the apiserver waits for this review: the ?timeout= it puts on the
// webhook's URL (the registration's timeoutSeconds), else the API's default of 10 s, held to
// between 1 s and 30 s, the range timeoutSeconds allows.
func reviewTimeout(r *http.Request) time.Duration {
	d, err := time.ParseDuration(r.URL.Query().Get("timeout"))
	if err != nil || d <= 0 {
		return 10 * time.Second
	}
	return min(max(d, time.Second), 30*time.Second)
}

// answerMargin is kept free at the end of a review's timeout for writing the answer and its trip
// back to the apiserver: a tenth of the timeout, at most 250 ms.
func answerMargin(timeout time.Duration) time.Duration {
	return min(timeout/10, 250*time.Millisecond)
}

// busy answers a review the fair queue refused unjudged with HTTP 429 and no AdmissionReview: a
// failed call, so the registration's failure policy decides, as it would if pvguard were down.
// The people's registration (Fail) refuses the write, and a tenant's ServiceAccount is one of
// them; the components' (Ignore) admits it, so that the cluster's own controllers never wait on
// pvguard, while the admission policies still hold the destructive guards. A denial here would
// refuse kube-controller-manager's writes whenever others fill the queues. The requester whose
// own reviews filled its queue is the one refused; others are queued apart.
func busy(w http.ResponseWriter, reason string) {
	why := "too many of the requester's reviews are waiting"
	if reason == queueTimeout {
		why = "the review waited for its turn past half its timeout"
	}
	w.Header().Set("Retry-After", "1")
	http.Error(w, fmt.Sprintf("pvguard did not judge this write (%s); try again", why), http.StatusTooManyRequests)
}

// decodeAdmissionReview decodes a review body; the objects stay raw for decodeReview. It uses
// go-json-experiment (the basis of encoding/json/v2), as decodeRaw does: less time and fewer
// allocations than encoding/json for these documents (docs/benchmarks.md, Admission). The
// envelope is read leniently about invalid UTF-8 and duplicate names, so that a review whose
// object has them still yields its uid; decodeRaw then refuses the object itself.
func decodeAdmissionReview(body []byte) (admissionv1.AdmissionReview, error) {
	var ar admissionv1.AdmissionReview
	if err := jsonv2.Unmarshal(body, &ar, jsontext.AllowInvalidUTF8(true), jsontext.AllowDuplicateNames(true)); err != nil {
		return ar, fmt.Errorf("decoding the AdmissionReview: %w", err)
	}
	return ar, nil
}

// readBody reads the whole body; reviewGuard bounds it.
func readBody(r *http.Request) ([]byte, error) {
	if r.Body == nil {
		return nil, nil
	}
	size := int64(bytes.MinRead)
	if r.ContentLength > 0 && r.ContentLength <= maxReviewBytes {
		size += r.ContentLength
	}
	buf := bytes.NewBuffer(make([]byte, 0, size))
	_, err := buf.ReadFrom(r.Body)
	return buf.Bytes(), err
}

// refuse answers a body that is not a review pvguard can judge with a denial, code 400, that
// names the problem. It echoes the request's uid when the body had one.
func (h reviewHandler) refuse(w http.ResponseWriter, kind, apiVersion string, uid types.UID, err error) {
	h.log.Error(err, "refusing a malformed AdmissionReview")
	resp := admission.Errored(http.StatusBadRequest, fmt.Errorf("pvguard: %w", err))
	resp.UID = uid
	writeReview(w, kind, apiVersion, &resp.AdmissionResponse, h.log)
}

func writeReview(w http.ResponseWriter, kind, apiVersion string, resp *admissionv1.AdmissionResponse, log logr.Logger) {
	out := admissionv1.AdmissionReview{Response: resp}
	out.Kind, out.APIVersion = kind, apiVersion
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(out); err != nil {
		// The response is pvguard's own and always encodes; this is the connection failing.
		log.Error(err, "writing the AdmissionReview response")
	}
}
