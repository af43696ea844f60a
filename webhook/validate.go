package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/pvguard/pvguard/policy"
)

// Validator is the validating admission handler for one kind.
type Validator struct {
	kind    policy.Kind
	engines EngineSource
	views   ViewSource
	metrics *Metrics
	// liveReadBudget bounds the live re-read of a denial (0: DefaultLiveReadBudget).
	liveReadBudget time.Duration
	// rereads, when set, is each requester's allowance of live re-reads (Limits).
	rereads *rereadShares
	// rights, when set, says what a requester may read beyond its request (WithReadRights).
	rights ReadRights
}

var _ admission.Handler = &Validator{}

// EngineSource yields the policy engine for the current config; it changes on reload.
type EngineSource interface {
	Engine() *policy.Engine
}

// ViewSource yields the view of related objects for one request.
type ViewSource interface {
	View(ctx context.Context) policy.View
}

// FreshViewSource is a ViewSource that can also read each related object live, past the cache:
// a denial judged on cached objects is judged again on fresh ones before it is sent, since a
// cache that has not caught up with a write a moment ago (another controller's hand-off, the
// other half of a binding) would refuse a write that is fine (clusterview.Source).
type FreshViewSource interface {
	ViewSource
	FreshView(ctx context.Context) policy.View
	// CacheView reads only the cache: a miss is an absence, never a live read.
	CacheView(ctx context.Context) policy.View
}

// NewValidator returns the validating handler for a kind.
func NewValidator(kind policy.Kind, engines EngineSource, views ViewSource, m *Metrics, opts ...ValidatorOption) *Validator {
	v := &Validator{kind: kind, engines: engines, views: views, metrics: m}
	for _, o := range opts {
		o(v)
	}
	return v
}

// Handle implements admission.Handler.
func (v *Validator) Handle(ctx context.Context, req admission.Request) admission.Response {
	start := time.Now()
	resp, decision := v.handle(ctx, req)
	v.metrics.observeReview(v.kind, "validate", req, decision, time.Since(start))
	return resp
}

func (v *Validator) handle(ctx context.Context, req admission.Request) (admission.Response, string) {
	review, resp, ok := decodeReview(v.kind, req)
	if !ok {
		return resp, "skipped"
	}
	engine := v.engines.Engine()
	view := v.views.View(ctx)
	d, err := engine.Admit(review, view)
	onCache := false
	if fresh, ok := v.views.(FreshViewSource); ok && (len(d.Deny) > 0 || linksClaimUnseen(ctx, review, fresh)) {
		d, onCache, err = v.recheck(ctx, engine, review, fresh, d, err)
	}
	if err != nil {
		logf.FromContext(ctx).Error(err, "could not evaluate the request", "object", review.Object().String())
		// The rules that could judge already refuse the write: say why, and that the others
		// could not judge. Without a denial the write is answered as an error, as before, since
		// admitting it would mean admitting what a rule never looked at.
		// The error goes to the requester as which rules could not judge and the cause alone
		// (failedRules): the reads around it may name objects the requester may not read (the
		// claim a volume is linked to); the log has it all.
		if len(d.Deny) == 0 {
			return admission.Errored(http.StatusInternalServerError, fmt.Errorf("pvguard could not evaluate %s: %s", review.Object(), failedRules(err))), "error"
		}
	}
	if !review.DryRun {
		v.metrics.observeFindings(d)
	}
	if len(d.Deny) > 0 {
		// The operator's record of a refusal, in full: pvguard's log is not a tenant's to read.
		logf.FromContext(ctx).Info("refused a write", "object", review.Object().String(), "operation", review.Operation,
			"requester", review.User.Username, "dryRun", review.DryRun, "onCache", onCache, "findings", denialSummary(d))
	}
	// The requester is an audience only for a denial or a warning: an admitted review without
	// either renders no message, and does not pay for building one.
	var aud policy.Audience
	if len(d.Deny)+len(d.Warn) > 0 {
		aud = audienceOf(ctx, review, view, engine.Config(), v.rights)
	}
	resp = responseFor(review, d, aud)
	if err != nil {
		resp.Result.Message += fmt.Sprintf("\n(pvguard could not evaluate every rule on %s; it refuses the write for the findings above: %s)", review.Object(), failedRules(err))
	}
	if onCache {
		resp.Warnings = append(resp.Warnings, "pvguard: judged on its informer cache; the live re-read that confirms its decision did not fit in its budget")
	}
	return resp, decisionLabel(d)
}

// recheck judges a decision made on the cache (a denial, or a link to a claim the cache has not
// caught up with: linksClaimUnseen) again on live reads, within the live-read budget
// (and the review's own deadline, which ctx carries). When the re-read cannot be done at once
// (its client's rate limiter has no token: NewLiveReadRateLimiter), cannot finish in the budget
// (the apiserver is slow) or fails, the cache's decision stands: the denial is sent now rather
// than turned into a timeout, which the components' registration (failurePolicy Ignore) would
// turn into an admission. onCache reports that it did.
//
// Every wait has a deadline: without one, client-go's token bucket (golang.org/x/time/rate's
// Wait) reserves a token however far ahead, and a waiter canceled later (its review timed out)
// gives back nothing while later reservations stand, so a flood's backlog of tokens outlives the
// flood.
func (v *Validator) recheck(ctx context.Context, engine *policy.Engine, review *policy.Review, fresh FreshViewSource, cached policy.Decision, cachedErr error) (d policy.Decision, onCache bool, err error) {
	if v.rereads != nil && !v.rereads.allow(review.User.Username) {
		v.metrics.observeLiveReadFallback(v.kind, "requester-share")
		return cached, true, cachedErr
	}
	budget := v.liveReadBudget
	if budget <= 0 {
		budget = DefaultLiveReadBudget
	}
	liveCtx, cancel := context.WithTimeout(asReread(ctx), budget)
	defer cancel()
	d, err = engine.Admit(review, fresh.FreshView(liveCtx))
	if err == nil {
		return d, false, nil
	}
	reason := "error"
	switch {
	case errors.Is(err, errNoToken):
		reason = "no-token"
	case liveCtx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "would exceed context deadline"):
		reason = "budget"
	}
	v.metrics.observeLiveReadFallback(v.kind, reason)
	logf.FromContext(ctx).V(1).Info("the live re-read of a denial did not complete; the cache's decision stands",
		"object", review.Object().String(), "reason", reason, "error", err.Error())
	return cached, true, cachedErr
}

// linksClaimUnseen reports whether a volume write links the volume to a claim whose version the
// writer saw and the cache does not hold. Provisioners and the PV controller make a claimRef with
// client-go's reference helper, which records the claim's resourceVersion as they read it: when
// the cached claim has another, the cache may not have caught up with a change the writer acted
// on (the scheduler's selected-node a moment ago), and a write the cache admits is judged again on
// live reads, as a denial is. A resourceVersion is compared for equality only (it is opaque); a
// writer that read an older claim costs a re-read too, which confirms what the cache says. Only a
// write that makes the link is checked: a bound volume's later writes keep the claimRef of the
// bind, whose resourceVersion the claim's own bind write already left behind.
func linksClaimUnseen(ctx context.Context, r *policy.Review, views FreshViewSource) bool {
	if !r.LinksVolume() || r.PV.Spec.ClaimRef.ResourceVersion == "" {
		return false
	}
	ref := r.PV.Spec.ClaimRef
	pvc, err := views.CacheView(ctx).PersistentVolumeClaim(ref.Namespace, ref.Name)
	if err != nil || pvc == nil {
		// A claim the cache does not hold was read live by the rules: nothing newer to see.
		return false
	}
	return pvc.ResourceVersion != ref.ResourceVersion
}

// denialSummary lists a decision's denials as rule and plain message, for the log.
func denialSummary(d policy.Decision) []string {
	out := make([]string, 0, len(d.Deny))
	for _, f := range d.Deny {
		out = append(out, f.String())
	}
	return out
}

func decisionLabel(d policy.Decision) string {
	switch {
	case len(d.Deny) > 0:
		return "denied"
	case len(d.Warn) > 0:
		return "warned"
	}
	return "allowed"
}

// expectedKinds maps pvguard's kinds to the group and kind an AdmissionReview carries.
var expectedKinds = map[policy.Kind]metav1.GroupKind{
	policy.KindPersistentVolume:      {Group: "", Kind: "PersistentVolume"},
	policy.KindPersistentVolumeClaim: {Group: "", Kind: "PersistentVolumeClaim"},
	policy.KindStorageClass:          {Group: "storage.k8s.io", Kind: "StorageClass"},
}

// decodeReview turns an admission request into a policy review. When it cannot, it returns the
// response to send instead: an error for a request that does not carry what its operation needs
// in a form pvguard can read (a validating webhook must not admit what it could not judge), or an
// allowed response with a warning for a kind this endpoint does not judge (a misconfigured webhook
// must not block unrelated writes).
func decodeReview(kind policy.Kind, req admission.Request) (*policy.Review, admission.Response, bool) {
	if req.UID == "" && req.Kind.Kind == "" {
		return nil, admission.Errored(http.StatusBadRequest, fmt.Errorf("AdmissionReview has no request")), false
	}
	if req.Kind.Kind == "" {
		return nil, admission.Errored(http.StatusBadRequest, fmt.Errorf("AdmissionReview request %s names no kind", req.UID)), false
	}
	want := expectedKinds[kind]
	if req.Kind.Group != want.Group || req.Kind.Kind != want.Kind {
		return nil, admission.Allowed("").WithWarnings(fmt.Sprintf(
			"pvguard: %s sent to the %s endpoint was not checked; fix the webhook configuration's rules", groupKind(req.Kind.Group, req.Kind.Kind), kind)), false
	}
	switch req.Operation {
	case admissionv1.Create, admissionv1.Update, admissionv1.Delete:
	default:
		return nil, admission.Errored(http.StatusBadRequest, fmt.Errorf("%s request has operation %q; pvguard judges CREATE, UPDATE and DELETE", kind, req.Operation)), false
	}
	r := &policy.Review{
		Kind:        kind,
		Operation:   policy.Operation(req.Operation),
		SubResource: req.SubResource,
		User:        policy.UserInfo{Username: req.UserInfo.Username, Groups: req.UserInfo.Groups},
		DryRun:      req.DryRun != nil && *req.DryRun,
	}
	var (
		err          error
		cur, old     *metav1.ObjectMeta
		curTM, oldTM *metav1.TypeMeta
	)
	switch kind {
	case policy.KindPersistentVolume:
		if r.PV, r.OldPV, err = decodePair[corev1.PersistentVolume](req); err == nil {
			cur, old, curTM, oldTM = metaOf(r.PV), metaOf(r.OldPV), typeOf(r.PV), typeOf(r.OldPV)
		}
	case policy.KindPersistentVolumeClaim:
		if r.PVC, r.OldPVC, err = decodePair[corev1.PersistentVolumeClaim](req); err == nil {
			cur, old, curTM, oldTM = metaOf(r.PVC), metaOf(r.OldPVC), typeOf(r.PVC), typeOf(r.OldPVC)
		}
	case policy.KindStorageClass:
		if r.SC, r.OldSC, err = decodePair[storagev1.StorageClass](req); err == nil {
			cur, old, curTM, oldTM = metaOf(r.SC), metaOf(r.OldSC), typeOf(r.SC), typeOf(r.OldSC)
		}
	}
	if err == nil {
		err = errors.Join(checkType(want, "object", curTM), checkType(want, "oldObject", oldTM))
	}
	if err == nil && req.Operation != admissionv1.Delete {
		switch {
		case cur == nil:
			err = fmt.Errorf("%s request carries no object", req.Operation)
		case cur.Name == "" && cur.GenerateName == "":
			// A mutating webhook sees a generateName object before the apiserver names it.
			err = errors.New("object has neither metadata.name nor metadata.generateName")
		case req.Operation == admissionv1.Update && old == nil:
			err = errors.New("UPDATE request carries no oldObject")
		}
	}
	if err != nil {
		return nil, admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding %s%s: %w", kind, objectName(req), err)), false
	}
	return r, admission.Response{}, true
}

// objectName is " <namespace>/<name>" of the request, or "" when the request names no object
// (a create with generateName).
func objectName(req admission.Request) string {
	switch {
	case req.Name == "":
		return ""
	case req.Namespace != "":
		return " " + req.Namespace + "/" + req.Name
	}
	return " " + req.Name
}

func groupKind(group, kind string) string {
	if group == "" {
		return kind
	}
	return kind + "." + group
}

// metaOf and typeOf return nil for an absent object.
func metaOf[T any, PT interface {
	*T
	GetObjectMeta() metav1.Object
}](o PT) *metav1.ObjectMeta {
	if o == nil {
		return nil
	}
	return o.GetObjectMeta().(*metav1.ObjectMeta)
}

func typeOf[T any, PT interface {
	*T
	GetObjectKind() schema.ObjectKind
}](o PT) *metav1.TypeMeta {
	if o == nil {
		return nil
	}
	return o.GetObjectKind().(*metav1.TypeMeta)
}

// checkType refuses an object whose own kind or API group, when it states them, is not the kind
// the request names: the object would be judged as something it is not.
func checkType(want metav1.GroupKind, which string, tm *metav1.TypeMeta) error {
	if tm == nil {
		return nil
	}
	group := ""
	if g, _, ok := strings.Cut(tm.APIVersion, "/"); ok {
		group = g
	}
	if (tm.Kind != "" && tm.Kind != want.Kind) || (tm.APIVersion != "" && group != want.Group) {
		return fmt.Errorf("%s is apiVersion %q kind %q, not a %s", which, tm.APIVersion, tm.Kind, groupKind(want.Group, want.Kind))
	}
	return nil
}

// decodePair decodes the new and old object; either may be absent (empty or JSON null).
func decodePair[T any](req admission.Request) (obj, old *T, err error) {
	if obj, err = decodeRaw[T](req.Object.Raw); err != nil {
		return nil, nil, fmt.Errorf("object: %w", err)
	}
	if old, err = decodeRaw[T](req.OldObject.Raw); err != nil {
		return nil, nil, fmt.Errorf("oldObject: %w", err)
	}
	return obj, old, nil
}

func decodeRaw[T any](raw []byte) (*T, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	// Invalid UTF-8 is refused (read as U+FFFD, a name or annotation that is not the one written
	// would be judged); so are duplicate names. Unknown fields are ignored: a newer apiserver may
	// send fields this build does not know.
	if !utf8.Valid(raw) {
		return nil, errors.New("not valid UTF-8")
	}
	obj := new(T)
	if err := jsonv2.Unmarshal(raw, obj, skipManagedFields); err != nil {
		return nil, err
	}
	return obj, nil
}

// skipManagedFields leaves metadata.managedFields unread (still checked as JSON): nothing pvguard
// does with a reviewed object reads it, and in a cluster it is a large part of every object (an
// entry per field manager, each with its own tree of fields), so decoding it was a fifth of the
// allocations of decoding an object.
var skipManagedFields = jsonv2.WithUnmarshalers(jsonv2.UnmarshalFromFunc(func(dec *jsontext.Decoder, _ *[]metav1.ManagedFieldsEntry) error {
	return dec.SkipValue()
}))

// responseFor turns a decision into the admission response: denials as a Forbidden status whose
// causes carry the field paths (kubectl prints the message), warnings as admission warnings, both
// rendered for the requester (aud), and audit findings as audit annotations, which only the API
// audit log's readers see, rendered for everyone.
// aud, the reader of the denials' and warnings' messages, is needed only when there are some.
func responseFor(r *policy.Review, d policy.Decision, aud policy.Audience) admission.Response {
	var resp admission.Response
	if d.Allowed() {
		resp = admission.Allowed("")
	} else {
		msgs := make([]string, 0, len(d.Deny))
		causes := make([]metav1.StatusCause, 0, len(d.Deny))
		for _, f := range d.Deny {
			msg := f.For(aud)
			msgs = append(msgs, msg)
			causes = append(causes, metav1.StatusCause{Type: metav1.CauseType(field.ErrorTypeForbidden), Field: f.Field, Message: msg})
		}
		obj := r.Object()
		resp = admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{
			Allowed: false,
			Result: &metav1.Status{
				Status:  metav1.StatusFailure,
				Code:    http.StatusForbidden,
				Reason:  metav1.StatusReasonForbidden,
				Message: strings.Join(msgs, "\n"),
				Details: &metav1.StatusDetails{Name: obj.Name, Kind: string(obj.Kind), Causes: causes},
			},
		}}
	}
	for _, f := range d.Warn {
		resp.Warnings = append(resp.Warnings, f.For(aud))
	}
	if len(d.Audit) > 0 {
		resp.AuditAnnotations = make(map[string]string, len(d.Audit))
		for _, f := range d.Audit {
			key := strings.ToLower(string(f.Rule)) + "-" + f.Name
			if prev, ok := resp.AuditAnnotations[key]; ok {
				resp.AuditAnnotations[key] = prev + "\n" + f.String()
			} else {
				resp.AuditAnnotations[key] = f.String()
			}
		}
	}
	return resp
}
