package policytest

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/webhook"
)

// hooks are the webhook handlers `pvguard serve` mounts, over a suite's engine and fixtures: the
// validating handler of each kind and the mutating handlers of volumes and claims, each behind
// the admission.Webhook serve hands requests through (webhook.AdmissionWebhook), which answers a
// panic with an error.
type hooks struct {
	validators map[policy.Kind]admission.Handler
	mutators   map[policy.Kind]admission.Handler
}

func newHooks(engines webhook.EngineSource, view policy.View) *hooks {
	views := webhook.StaticView{V: view}
	h := &hooks{validators: map[policy.Kind]admission.Handler{}, mutators: map[policy.Kind]admission.Handler{}}
	for _, k := range []policy.Kind{policy.KindPersistentVolume, policy.KindPersistentVolumeClaim, policy.KindStorageClass} {
		h.validators[k] = webhook.AdmissionWebhook(webhook.NewValidator(k, engines, views, nil), logr.Discard())
	}
	for _, k := range []policy.Kind{policy.KindPersistentVolume, policy.KindPersistentVolumeClaim} {
		h.mutators[k] = webhook.AdmissionWebhook(webhook.NewMutator(k, engines, views, nil), logr.Discard())
	}
	return h
}

// resources are the group, version and resource of each kind, as an AdmissionReview names them.
var resources = map[policy.Kind]struct {
	kind     metav1.GroupVersionKind
	resource metav1.GroupVersionResource
}{
	policy.KindPersistentVolume: {metav1.GroupVersionKind{Version: "v1", Kind: "PersistentVolume"},
		metav1.GroupVersionResource{Version: "v1", Resource: "persistentvolumes"}},
	policy.KindPersistentVolumeClaim: {metav1.GroupVersionKind{Version: "v1", Kind: "PersistentVolumeClaim"},
		metav1.GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"}},
	policy.KindStorageClass: {metav1.GroupVersionKind{Group: "storage.k8s.io", Version: "v1", Kind: "StorageClass"},
		metav1.GroupVersionResource{Group: "storage.k8s.io", Version: "v1", Resource: "storageclasses"}},
}

// Verdict is what pvguard's webhooks answered a write: the rules that denied it, warned and
// wrote audit annotations (each sorted), the answer's text, or the error it was answered with.
type Verdict struct {
	Deny, Warn, Audit []string
	// Message is the denial's message and the warnings, one a line.
	Message string
	// Error is set when the write was answered with an error (pvguard could not judge it).
	Error string
}

// String is the verdict as the output shows it: "allowed", "warned [PVG010]",
// "denied [PVG004] warned [PVG013]", "error: ...".
func (v Verdict) String() string {
	if v.Error != "" {
		return "error: " + v.Error
	}
	var parts []string
	if len(v.Deny) > 0 {
		parts = append(parts, "denied ["+strings.Join(v.Deny, " ")+"]")
	}
	if len(v.Warn) > 0 {
		parts = append(parts, "warned ["+strings.Join(v.Warn, " ")+"]")
	}
	if len(parts) == 0 {
		return "allowed"
	}
	return strings.Join(parts, " ")
}

// String is the expectation as the output shows it.
func (e Expectation) String() string { return Verdict{Deny: e.Deny, Warn: e.Warn}.String() }

// mutated reports whether the apiserver sends a write to one of pvguard's mutating webhooks (the
// chart registers volumes' CREATE and UPDATE and claims' CREATE, not status writes). Those it
// sends them only under a match condition are sent here every time: the handler leaves the
// others unchanged.
func (w *Write) mutated() bool {
	if w.SubResource != "" {
		return false
	}
	switch w.Kind {
	case policy.KindPersistentVolume:
		return w.Operation == admissionv1.Create || w.Operation == admissionv1.Update
	case policy.KindPersistentVolumeClaim:
		return w.Operation == admissionv1.Create
	}
	return false
}

// Request is the AdmissionReview request the apiserver sends pvguard's webhooks for the write.
func (w *Write) Request(object []byte) admission.Request {
	r := resources[w.Kind]
	dryRun := w.DryRun
	req := admissionv1.AdmissionRequest{
		UID: "policytest", Kind: r.kind, Resource: r.resource, SubResource: w.SubResource,
		RequestKind: &r.kind, RequestResource: &r.resource, RequestSubResource: w.SubResource,
		Name: w.Name, Namespace: w.Namespace, Operation: w.Operation, UserInfo: w.User, DryRun: &dryRun,
		Object: runtime.RawExtension{Raw: object}, OldObject: runtime.RawExtension{Raw: w.OldObject},
	}
	return admission.Request{AdmissionRequest: req}
}

// Admit sends the write through pvguard's webhooks as the apiserver would, in the suite's
// fixtures: its mutating webhook first, where the apiserver sends the write to one, with the
// patch it answers applied; then the apiserver's own preparation of the object (prepare); then
// its validating webhook. It returns what the validating webhook answered.
func (s *Suite) Admit(ctx context.Context, w *Write) Verdict {
	if !w.resolved {
		r, err := w.resolve(s.initial.fx)
		if err != nil {
			return Verdict{Error: "the case cannot run: " + err.Error()}
		}
		w = r
	}
	v, _ := s.initial.admit(ctx, w)
	return v
}

// admit is Admit in one state of the fixtures; it also returns the object as the apiserver
// stores it if the write is admitted (nil for a DELETE).
func (wd *world) admit(ctx context.Context, w *Write) (Verdict, []byte) {
	obj := w.Object
	if w.mutated() {
		resp := wd.hooks.mutators[w.Kind].Handle(ctx, w.Request(obj))
		if !resp.Allowed {
			return Verdict{Error: "the mutating webhook answered: " + statusMessage(resp)}, nil
		}
		if len(resp.Patch) > 0 {
			patch, err := jsonpatch.DecodePatch(resp.Patch)
			if err == nil {
				obj, err = patch.Apply(obj)
			}
			if err != nil {
				return Verdict{Error: fmt.Sprintf("applying the mutating webhook's patch %s: %v", resp.Patch, err)}, nil
			}
		}
	}
	if obj != nil {
		var err error
		if obj, err = prepare(w, obj); err != nil {
			return Verdict{Error: err.Error()}, nil
		}
	}
	return verdictOf(wd.hooks.validators[w.Kind].Handle(ctx, w.Request(obj))), obj
}

// ruleOf reads the rule ID a finding's text starts with: "[PVG001 volume-mode-match] ...".
var ruleOf = regexp.MustCompile(`^\[(PVG[0-9]+) `)

// verdictOf reads a validating webhook's answer: the rules of its denial (one status cause per
// finding), of its warnings and of its audit annotations (pvgNNN-name).
func verdictOf(resp admission.Response) Verdict {
	var v Verdict
	if !resp.Allowed {
		if resp.Result == nil || resp.Result.Code != http.StatusForbidden {
			return Verdict{Error: statusMessage(resp)}
		}
		var texts []string
		if resp.Result.Details != nil {
			for _, c := range resp.Result.Details.Causes {
				texts = append(texts, c.Message)
			}
		}
		if len(texts) == 0 {
			texts = strings.Split(resp.Result.Message, "\n")
		}
		for _, t := range texts {
			if m := ruleOf.FindStringSubmatch(t); m != nil {
				v.Deny = append(v.Deny, m[1])
			}
		}
		v.Message = resp.Result.Message
	}
	for _, w := range resp.Warnings {
		if m := ruleOf.FindStringSubmatch(w); m != nil {
			v.Warn = append(v.Warn, m[1])
		}
		v.Message = joinLines(v.Message, w)
	}
	for key := range resp.AuditAnnotations {
		id, _, _ := strings.Cut(key, "-")
		v.Audit = append(v.Audit, strings.ToUpper(id))
	}
	v.Deny, v.Warn, v.Audit = sorted(v.Deny), sorted(v.Warn), sorted(v.Audit)
	return v
}

func statusMessage(resp admission.Response) string {
	if resp.Result == nil {
		return "no status"
	}
	return fmt.Sprintf("%d %s", resp.Result.Code, resp.Result.Message)
}

func joinLines(a, b string) string {
	if a == "" {
		return b
	}
	return a + "\n" + b
}

func sorted(ids []string) []string {
	slices.Sort(ids)
	return slices.Compact(ids)
}

// Judge compares a verdict with a write's expectation: "" when it holds, else what differs.
func (e Expectation) Judge(v Verdict) string {
	switch {
	case v.Error != "":
		return fmt.Sprintf("expected %s, got %s", e, v)
	case !slices.Equal(e.Deny, v.Deny) || !slices.Equal(e.Warn, v.Warn):
		return withMessage(fmt.Sprintf("expected %s, got %s", e, v), v.Message)
	case e.CheckAudit && !slices.Equal(e.Audit, v.Audit):
		return fmt.Sprintf("expected audited [%s], got audited [%s]", strings.Join(e.Audit, " "), strings.Join(v.Audit, " "))
	case e.Message != nil && !matchesLine(e.Message, v.Message):
		return withMessage(fmt.Sprintf("%s as expected, but no message matches %q", v, e.Message), v.Message)
	}
	return ""
}

// matchesLine reports whether the expression matches the text or one of its lines.
func matchesLine(re *regexp.Regexp, text string) bool {
	if re.MatchString(text) {
		return true
	}
	for line := range strings.SplitSeq(text, "\n") {
		if re.MatchString(line) {
			return true
		}
	}
	return false
}

func withMessage(s, msg string) string {
	if msg == "" {
		return s
	}
	return s + ": " + strings.ReplaceAll(msg, "\n", " | ")
}
