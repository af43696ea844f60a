package explain

import (
	"regexp"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/pvguard/pvguard/binder"
)

// Enforcement points a refused write can meet.
const (
	// PointWebhook: pvguard's validating webhook denied the write.
	PointWebhook = "pvguard webhook"
	// PointAdmissionPolicy: one of the ValidatingAdmissionPolicies generated from the rules
	// (`pvguard admission-policies`) denied it in the apiserver; it holds while pvguard is down.
	PointAdmissionPolicy = "admission policy"
	// PointWebhookUnreachable: the apiserver could not call pvguard's webhook, and that webhook's
	// failure policy (Fail) refused the write.
	PointWebhookUnreachable = "pvguard webhook unreachable"
	// PointBinder: pvguard's binder did not make a binding policy denies (PolicyForbidsBinding).
	PointBinder = "pvguard binder"
)

// Refusal is a write about the claim that an event reports refused, and where.
type Refusal struct {
	// Point is one of the Point constants; Name names the webhook or the admission policy.
	Point string `json:"point"`
	Name  string `json:"name,omitempty"`
	// Rule is the rule the refusal names, when it names one.
	Rule string `json:"rule,omitempty"`
	// Reason and Source are the event's; Count how often it was seen; Last when last.
	Reason string    `json:"reason"`
	Source string    `json:"source,omitempty"`
	Count  int32     `json:"count"`
	Last   time.Time `json:"last"`
}

// The messages the apiserver and pvguard's binder write, as components relay them in events.
var (
	webhookDenied = regexp.MustCompile(`admission webhook "([a-z0-9.-]+\.pvguard\.io)" denied the request: \[(PVG[0-9]+)`)
	policyDenied  = regexp.MustCompile(`ValidatingAdmissionPolicy '([a-z0-9.-]+)' with binding '[^']*' denied request: \[(PVG[0-9]+)`)
	webhookFailed = regexp.MustCompile(`failed calling webhook "([a-z0-9.-]+\.pvguard\.io)"`)
	ruleNamed     = regexp.MustCompile(`\[(PVG[0-9]+) `)
)

// refusals lists, newest first, the claim's Warning events that report a write refused by one of
// pvguard's enforcement points, when their message tells which. Only what the components recorded
// is known: a refused write nobody reported in an event does not show.
func refusals(events []*corev1.Event, c *corev1.PersistentVolumeClaim) []Refusal {
	var out []Refusal
	for _, ev := range events {
		o := ev.InvolvedObject
		if ev.Type != corev1.EventTypeWarning || o.Kind != "PersistentVolumeClaim" || o.Namespace != c.Namespace || o.Name != c.Name || (o.UID != "" && o.UID != c.UID) {
			continue
		}
		r, ok := classify(ev.Reason, ev.Message)
		if !ok {
			continue
		}
		r.Reason, r.Source, r.Count = ev.Reason, ev.Source.Component, max(ev.Count, 1)
		r.Last = ev.LastTimestamp.Time
		if t := ev.EventTime.Time; t.After(r.Last) {
			r.Last = t
		}
		if ev.ReportingController != "" && r.Source == "" {
			r.Source = ev.ReportingController
		}
		out = append(out, r)
	}
	slices.SortStableFunc(out, func(a, b Refusal) int { return b.Last.Compare(a.Last) })
	return out
}

// classify tells the enforcement point of a refusal from an event's reason and message.
func classify(reason, message string) (Refusal, bool) {
	switch {
	case reason == binder.ReasonPolicyForbidsBinding:
		r := Refusal{Point: PointBinder}
		if m := ruleNamed.FindStringSubmatch(message); m != nil {
			r.Rule = m[1]
		}
		return r, true
	case policyDenied.MatchString(message):
		m := policyDenied.FindStringSubmatch(message)
		return Refusal{Point: PointAdmissionPolicy, Name: m[1], Rule: m[2]}, true
	case webhookDenied.MatchString(message):
		m := webhookDenied.FindStringSubmatch(message)
		return Refusal{Point: PointWebhook, Name: m[1], Rule: m[2]}, true
	case webhookFailed.MatchString(message):
		return Refusal{Point: PointWebhookUnreachable, Name: webhookFailed.FindStringSubmatch(message)[1]}, true
	}
	return Refusal{}, false
}
